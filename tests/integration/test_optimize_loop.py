"""opscope optimize end to end on small blocks: the contract document (checked against its
schema), each candidate kind, the budget, a target that does not trace, the CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import opscope
import optimize_models as M
from schema_checks import check_document

REPO = Path(__file__).resolve().parents[2]
# the subprocesses run this checkout's opscope
ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
}


def test_a_zero_budget_tries_nothing_and_says_why() -> None:
    r = opscope.optimize(M.rms_function, M.rms_inputs(), "cpu", budget_s=0, profile=False)
    doc = r.to_dict()
    check_document(doc, "optimize")
    assert doc["candidates"] == [] and doc["best"] is None
    names = {n["name"] for n in doc["not_tried"]}
    assert {"rewrite:rms_norm", "compile:default", "compile+rewrites"} <= names
    assert all(n["reason"].startswith("budget") for n in doc["not_tried"])
    assert doc["capture"]["matches"][0]["pattern"] == "rms_norm"


def test_rewrites_alone_within_a_short_budget() -> None:
    r = opscope.optimize(M.Block(), M.x_inputs(), "cpu", budget_s=12, min_run_s=0.05, profile=False)
    doc = r.to_dict()
    check_document(doc, "optimize")
    kinds = {c["name"]: c["kind"] for c in doc["candidates"]}
    assert kinds == {
        "rewrite:rms_norm": "rewrite",
        "rewrite:linear": "rewrite",
        "rewrite:gelu_tanh": "rewrite",
        "rewrite:silu": "rewrite",
        "rewrite:all": "combined",
    }
    for c in doc["candidates"]:
        assert c["numerics_ok"], c
        assert c["verdict"] in ("faster", "same", "slower")
        assert c["speedup"]["ci95"][0] <= c["speedup"]["point"] <= c["speedup"]["ci95"][1]
        assert c["patch"] and c["patch"].startswith("---")
    assert "F.silu(g)" in r["rewrite:silu"]["patch"]
    assert doc["baseline"]["latency_us"]["median"] > 0
    assert "original" in str(r) and "rewrite:all" in r.to_markdown()


@pytest.mark.slow
def test_study_rmsnorm_finds_the_builtin_and_compile(compile_env) -> None:
    from opscope.study.rmsnorm import naive_rmsnorm

    x, w = torch.randn(64, 256), 1 + 0.1 * torch.randn(256)
    r = opscope.optimize(naive_rmsnorm, (x, w), "cpu", budget_s=200, min_run_s=0.05)
    doc = r.to_dict()
    check_document(doc, "optimize")
    names = [c["name"] for c in doc["candidates"]]
    assert names[:3] == ["rewrite:rms_norm", "compile:default", "compile+rewrites"]
    for c in doc["candidates"]:
        assert c["numerics_ok"] and c["verdict"] != "failed", c
        assert c["speedup"] is not None
    assert "torch.rms_norm(x, (x.shape[-1],), weight, eps)" in r["rewrite:rms_norm"]["patch"]
    assert r["compile:default"]["patch"] == "naive_rmsnorm = torch.compile(naive_rmsnorm)"
    assert r["compile:default"]["compile_s"] > 0
    assert doc["baseline"]["device_ops_per_call"]
    assert r["compile:default"]["device_ops_per_call"] is not None
    assert doc["best"] in (None, *names)
    assert any("warm compile time" in n for n in doc["notes"])  # two compiles ran


@pytest.mark.slow
def test_a_graph_break_still_tries_compile(compile_env) -> None:
    r = opscope.optimize(
        M.Branchy(), M.x_inputs(), "cpu", budget_s=60, min_run_s=0.05, profile=False
    )
    doc = r.to_dict()
    check_document(doc, "optimize")
    assert "does not trace" in doc["capture"]["error"]
    assert any("does not trace" in n for n in doc["notes"])
    c = r["compile:default"]
    assert c["numerics_ok"] and c["verdict"] in ("faster", "same", "slower")


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_reduce_overhead_is_a_cuda_candidate(compile_env) -> None:
    r = opscope.optimize(M.Block(), M.x_inputs(), "cuda", budget_s=300, min_run_s=0.05)
    doc = r.to_dict()
    check_document(doc, "optimize")
    names = {c["name"] for c in doc["candidates"]} | {n["name"] for n in doc["not_tried"]}
    assert "compile:reduce-overhead" in names


def test_cli_json_is_quiet_and_valid(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(
        "import torch\n\n\ndef swish(x):\n    y = x * torch.sigmoid(x)\n    return y\n",
        encoding="utf-8",
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "opscope",
            "optimize",
            f"{model}:swish",
            "--inputs",
            "4x16",
            "--format",
            "json",
            "--budget",
            "8",
            "--min-time",
            "0.05",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
        env=ENV,
    )
    assert out.returncode == 0, out.stderr
    assert "opscope optimize:" not in out.stderr  # quiet under --format json
    doc = json.loads(out.stdout)
    check_document(doc, "optimize")
    assert doc["candidates"][0]["name"] == "rewrite:silu"
    assert "F" not in doc["candidates"][0]["patch"].split("silu")[0][-3:]  # spelled in full
    assert "torch.nn.functional.silu(x)" in doc["candidates"][0]["patch"]
    assert model.read_text().count("sigmoid") == 1  # never changed without --write
    assert not (tmp_path / "model.py.orig").exists()


def test_cli_rejects_a_bad_target(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "opscope", "optimize", f"{tmp_path}/none.py:f", "--inputs", "4"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=ENV,
    )
    assert out.returncode == 1
    assert "no such file" in out.stderr


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opscope", "optimize", *args, "--min-time", "0.05"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
        env=ENV,
    )


MODULE = """\
import torch
from torch import nn


class Gate(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def example_inputs():
    torch.manual_seed(0)
    return (torch.randn(8, 32),)
"""


def test_cli_write_changes_the_file_only_through_a_verified_faster_rewrite(
    tmp_path: Path,
) -> None:
    """--example feeds the inputs; with --write the file changes exactly when the document's
    best candidate is a rewrite (verified and faster), keeping model.py.orig; either way the
    file still imports and computes the same."""
    model = tmp_path / "model.py"
    model.write_text(MODULE, encoding="utf-8")
    out = _cli(
        tmp_path,
        f"{model}:Gate",
        "--example",
        f"{model}:example_inputs",
        "--format",
        "json",
        "--budget",
        "8",  # the rewrites, not the compile modes
        "--write",
        "--device",
        "cpu",
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    check_document(doc, "optimize")
    (silu,) = [c for c in doc["candidates"] if c["name"] == "rewrite:silu"]
    assert silu["numerics_ok"] is True
    backup = tmp_path / "model.py.orig"
    text = model.read_text(encoding="utf-8")
    if doc["best"] in ("rewrite:silu", "rewrite:all"):
        assert silu["verdict"] == "faster" or doc["best"] == "rewrite:all"
        assert backup.read_text(encoding="utf-8") == MODULE
        assert "torch.nn.functional.silu(x)" in text and "sigmoid" not in text
    else:
        assert text == MODULE and not backup.exists()
    ns: dict[str, object] = {}
    exec(compile(text, str(model), "exec"), ns)  # the file still runs
    gate = ns["Gate"]()  # type: ignore[operator]
    x = torch.randn(4, 32)
    torch.testing.assert_close(gate(x), x * torch.sigmoid(x))


def test_cli_markdown_and_text_name_each_candidate(tmp_path: Path) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODULE, encoding="utf-8")
    md = _cli(tmp_path, f"{model}:Gate", "--inputs", "8x32", "--budget", "8", "--format", "md")
    assert md.returncode == 0, md.stderr
    assert re.search(r"^\|.*rewrite:silu.*\|", md.stdout, re.M), md.stdout
    text = _cli(tmp_path, f"{model}:Gate", "--inputs", "8x32", "--budget", "8")
    assert text.returncode == 0, text.stderr
    assert "patterns found: silu" in text.stdout
    assert re.search(r"rewrite:silu\s+rewrite\s+ok", text.stdout), text.stdout
    assert "not tried" in text.stdout.lower()  # the budget left the compile modes out
