"""comm_exposed: fires when communication that no compute hides reaches 3 % of the wall, with
the exposed time at stake; stays quiet when compute hides it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.findings.comm_exposed import MIN_WALL_SHARE
from opscope.analysis.pipeline import analyze
from trace_checks import X

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)"


def _doc(comm: list[tuple[float, float]], op: str = "aten::op") -> dict[str, Any]:
    """Compute kernels at [0, 400) and [600, 1000) us; NCCL kernels at ``comm``."""
    events: list[dict[str, Any]] = [X("ProfilerStep#1", 0, 1000, "user_annotation")]
    spans = [("gemm_kernel", 0.0, 400.0), ("gemm_kernel", 600.0, 400.0)]
    spans += [(NCCL, s, d) for s, d in comm]
    for i, (name, ts, dur) in enumerate(spans):
        corr = 10 + i
        events.append(X(op if name == NCCL else "aten::mm", ts, 1, args={}))
        events.append(X("cudaLaunchKernel", ts, 1, "cuda_runtime", args={"correlation": corr}))
        events.append(X(name, ts, dur, "kernel", pid=0, tid=7, args={"correlation": corr}))
    return {"schemaVersion": 1, "traceEvents": events}


def _findings(tmp_path: Path, doc: dict[str, Any]) -> list[dict[str, Any]]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return [
        f
        for f in analyze(path, roofline=False).to_dict()["findings"]
        if f["kind"] == "comm_exposed"
    ]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def test_fires_on_exposed_comm_with_the_exposed_time_at_stake(tmp_path: Path) -> None:
    # [350, 650): 100 us under compute, 200 us exposed (20 % of a 1000 us wall)
    (f,) = _findings(tmp_path, _doc([(350, 300)]))
    assert f["time_at_stake_us"] == pytest.approx(200.0)
    assert f["details"]["comm_us"] == pytest.approx(300.0)
    assert f["details"]["overlap_share"] == pytest.approx(1 / 3)
    assert f["details"]["pattern"] == "serial"
    assert "async_op=True" in f["recommendation"]
    (ev,) = f["evidence"]
    assert ev["end_ns"] - ev["start_ns"] == 300_000


def test_quiet_when_compute_hides_it_or_below_the_threshold(tmp_path: Path) -> None:
    assert _findings(tmp_path, _doc([(50, 300)])) == []  # all under compute
    small = 1000 * MIN_WALL_SHARE * 0.5  # exposed: half the threshold
    assert _findings(tmp_path, _doc([(400, small)])) == []
    assert _findings(tmp_path, _doc([])) == []


def test_advice_follows_the_trace(tmp_path: Path) -> None:
    (ddp,) = _findings(tmp_path, _doc([(350, 300)], op="DistributedDataParallel.forward"))
    assert ddp["details"]["pattern"] == "ddp" and "bucket_cap_mb" in ddp["recommendation"]
    many = [(410 + 6 * i, 5) for i in range(30)]  # 30 short collectives in the gap
    (small,) = _findings(tmp_path, _doc(many))
    assert small["details"]["pattern"] == "small_messages"
