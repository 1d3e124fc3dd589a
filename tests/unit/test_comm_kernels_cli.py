"""Communication of every library on a trace: an expert-parallel build's renamed kernels and
an in-house library's (``--comm-kernels REGEX``) are counted as communication, not compute;
a trace with no communication gets an answer that says so (MCP), not an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.cli.main import main
from opscope.trace.commuser import USER_ENV
from trace_checks import X


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(USER_ENV, "")  # restored after the test, whatever --comm-kernels sets


def _trace(path: Path, kernels: list[str]) -> Path:
    events: list[dict[str, Any]] = [X("ProfilerStep#1", 0, 2000, "user_annotation")]
    for i, name in enumerate(kernels):
        corr, ts = i + 1, 100.0 + 300.0 * i
        events.append(X("aten::op", ts, 5, args={}))
        events.append(X("cudaLaunchKernel", ts, 5, "cuda_runtime", args={"correlation": corr}))
        events.append(X(name, ts + 10, 200, "kernel", pid=0, tid=7, args={"correlation": corr}))
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _comm_us(capsys: pytest.CaptureFixture[str], *args: str) -> float:
    assert main(["report", *args, "--format", "json"]) == 0
    return float(json.loads(capsys.readouterr().out)["summary"]["comm_us"])


def test_renamed_expert_parallel_kernels_are_communication(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [
        "void moe_ep::internode::dispatch<true, 2, 8>(int4*, float*)",
        "void moe_ep::internode::combine<__nv_bfloat16, 8>(void*)",
        "void moe_ep::intranode::notify_dispatch<8>(int const*, int*, int)",
        "void gemm_kernel<128>(float*)",
    ]
    trace = _trace(tmp_path / "ep.json", names)
    assert _comm_us(capsys, str(trace)) == pytest.approx(3 * 200.0)


def test_an_in_house_librarys_kernels_by_the_users_pattern(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path / "acme.json", ["acme_ring_xfer_kernel", "void gemm_kernel<128>()"])
    assert _comm_us(capsys, str(trace)) == 0.0
    # the cached trace is not reused: the pattern classes its events anew
    assert _comm_us(capsys, str(trace), "--comm-kernels", r"acme_\w+_xfer") == pytest.approx(200.0)


def test_a_bad_pattern_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path / "t.json", ["void gemm_kernel<128>()"])
    assert main(["report", str(trace), "--comm-kernels", "acme("]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--comm-kernels" in err


def test_mcp_distributed_on_a_trace_without_communication_answers_zero(tmp_path: Path) -> None:
    from opscope.mcp.registry import Session
    from opscope.mcp.tools_paths import _distributed
    from opscope.service import Workspace

    trace = _trace(tmp_path / "alone.json", ["void gemm_kernel<128>()"])
    ws = Workspace()
    ws.open(trace)
    got = _distributed(Session(ws), {"trace": None})
    assert got.data["distributed"] is None and got.data["comm_us"] == 0.0
    assert "No communication" in got.text


def test_the_flags_settings_last_one_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--comm-kernels`` and ``--max-inflate`` are in force while their command runs, and
    leave neither the environment nor the process's settings behind."""
    import os

    from opscope.trace.commuser import user_patterns
    from opscope.trace.readers import MAX_INFLATE_RATIO, max_inflate_ratio

    trace = _trace(tmp_path / "acme.json", ["acme_ring_xfer_kernel"])
    before = dict(os.environ)
    args = ("--comm-kernels", r"acme_\w+_xfer", "--max-inflate", "7")
    assert _comm_us(capsys, str(trace), *args) == pytest.approx(200.0)
    assert dict(os.environ) == before
    assert user_patterns() == "" and max_inflate_ratio() == float(MAX_INFLATE_RATIO)
    assert _comm_us(capsys, str(trace)) == 0.0
