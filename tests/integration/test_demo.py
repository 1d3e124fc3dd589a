"""``opscope demo`` end to end on the CPU: the JSON, the run folders, the study's findings.

One demo run (two small shapes, all three variants, real torch.compile) is shared by the
tests of this module: compiling costs seconds on a 2-core machine.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from schema_checks import check_document

pytest.importorskip("torch")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(compile_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("runs")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "opscope",
            "demo",
            "--format",
            "json",
            "--out",
            str(out),
            "--shape",
            "4x512:bf16",
            "--shape",
            "4096x4096:fp32",
            "--min-time",
            "0.05",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **compile_env},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data: dict[str, Any] = json.loads(proc.stdout)
    data["_stderr"] = proc.stderr
    return data


def test_demo_json_schema(demo: dict[str, Any]) -> None:
    assert demo["schema"] == "opscope.demo/1"
    check_document({k: v for k, v in demo.items() if k != "_stderr"}, "demo")
    assert demo["device"]["kind"] == "cpu"
    assert [s["shape"] for s in demo["shapes"]] == [[4, 512], [4096, 4096]]
    assert [s["dtype"] for s in demo["shapes"]] == ["bfloat16", "float32"]
    for shape in demo["shapes"]:
        assert [v["name"] for v in shape["variants"]] == ["naive", "builtin", "compiled"]
        for v in shape["variants"]:
            assert v["error"] is None, v
            assert v["numerics_ok"] is True, v
            assert isinstance(v["device_ops"], int) and v["device_ops"] >= 1
            assert v["device_us"] > 0 and v["cpu_us"] > 0
            assert v["latency_us"]["median"] > 0 and v["latency_us"]["iqr"] >= 0
            assert isinstance(v["max_abs_err"], float)
        naive, builtin, compiled = shape["variants"]
        assert naive["speedup_vs_naive"] == pytest.approx(1.0)
        assert naive["compile_s"] is None and builtin["compile_s"] is None
        assert compiled["compile_s"] > 0
        # the compiled region runs one fused kernel; the naive version runs several ops
        assert compiled["device_ops"] == 1
        assert naive["device_ops"] >= 5
    # at 4096×4096 fp32 the fused kernel wins clearly, and the interval says so
    big = demo["shapes"][1]["variants"][2]
    assert big["verdict"] == "faster", big
    assert big["speedup_ci95"][0] > 1.0
    assert len(demo["run_dirs"]) == 6
    assert demo["reading"] and all(isinstance(line, str) for line in demo["reading"])


def test_demo_shows_progress_on_stderr(demo: dict[str, Any]) -> None:
    assert "compiling" in demo["_stderr"]


def test_run_folders_are_complete(demo: dict[str, Any]) -> None:
    for d in map(Path, demo["run_dirs"]):
        for name in ("run.json", "trace.json.gz", "report.json", "report.html"):
            assert (d / name).is_file(), f"{d}/{name} missing"
        run = json.loads((d / "run.json").read_text())
        assert run["schema"] == "opscope.run/1"
        check_document(run, "run")
        with gzip.open(d / "trace.json.gz") as fh:
            trace = json.load(fh)
        steps = [
            e for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
        ]
        assert len(steps) == 1  # active 1
        report = json.loads((d / "report.json").read_text())
        assert report["schema"] == "opscope.report/1"
        assert report["study"]["variant"] in ("naive", "builtin", "compiled")
        assert len(report["study"]["variants"]) == 3
        check_document(report, "report")
        page = (d / "report.html").read_text()
        assert "RMSNorm study" in page and "<script src" not in page


def test_compiled_run_records_compile_apart(demo: dict[str, Any]) -> None:
    compiled = [d for d in map(Path, demo["run_dirs"]) if d.name.endswith("compiled")]
    assert len(compiled) == 2
    for d in compiled:
        run = json.loads((d / "run.json").read_text())
        text = json.dumps(run)
        assert "compile" in text
        with gzip.open(d / "trace.json.gz") as fh:
            trace = fh.read().decode()
        # the measured window holds the compiled region, not the compilation
        assert "Torch-Compiled Region" in trace


def test_naive_run_reports_a_fusion_finding_naming_its_mul_chain(demo: dict[str, Any]) -> None:
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for d in map(Path, demo["run_dirs"]):
        report = json.loads((d / "report.json").read_text())
        by_variant.setdefault(report["study"]["variant"], []).append(report)
    for report in by_variant["naive"]:
        fusion = [f for f in report["findings"] if f["kind"] == "fusion"]
        assert fusion, [f["title"] for f in report["findings"]]
        text = json.dumps(fusion[0])
        assert "aten::mul" in text and "rms_norm" in text
    for name in ("builtin", "compiled"):
        for report in by_variant[name]:
            assert not [f for f in report["findings"] if f["kind"] == "fusion"], name
