"""Communication, compute and their overlap on real NCCL/RCCL traces, against a hand
computation that reads the raw JSON (no opscope code): a plain sweep over sorted intervals."""

from __future__ import annotations

import gzip
import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from opscope.analysis.pipeline import analyze

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
CASES = ("cuda/a100_nccl_rank0_of2.json.gz", "rocm/mi300x_resnet_act_checkpoint_rank0_of8.json.gz")


def _union(spans: list[tuple[int, int]]) -> int:
    total, end = 0, -(2**63)
    for s, e in sorted(spans):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def _ns(us: Decimal) -> int:
    return int((us * 1000).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _by_hand(path: Path) -> tuple[float, float, float]:
    """(comm, compute, overlap) in us: kernels whose name says nccl are communication; the
    kernels launched before the trace began (no runtime call with their correlation) left out.
    Timestamps read exactly (decimal) onto the ns grid."""
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    launched = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat", "").lower() in ("cuda_runtime", "cuda_driver")
        and "correlation" in e.get("args", {})
    }
    comm, comp = [], []
    for e in events:
        if e.get("cat", "").lower() != "kernel":
            continue
        corr = e.get("args", {}).get("correlation")
        if corr is not None and corr not in launched:
            continue
        start = _ns(Decimal(e["ts"]))
        span = (start, start + _ns(Decimal(e["dur"])))
        (comm if "nccl" in e["name"].lower() else comp).append(span)
    overlap = _union(comm) + _union(comp) - _union(comm + comp)
    return _union(comm) / 1e3, _union(comp) / 1e3, overlap / 1e3


@pytest.mark.parametrize("case", CASES)
def test_comm_overlap_matches_a_hand_computation(case: str) -> None:
    path = TRACES / case
    if not path.is_file():
        pytest.skip("../shared/traces not present (a user's clone)")
    comm, comp, overlap = _by_hand(path)
    s = analyze(path, findings=False, roofline=False).to_dict()["summary"]
    assert comm > 0
    assert s["comm_us"] == pytest.approx(comm, rel=1e-6, abs=0.01)
    assert s["compute_us"] == pytest.approx(comp, rel=1e-6, abs=0.01)
    assert s["exposed_comm_us"] == pytest.approx(comm - overlap, rel=1e-6, abs=0.01)
    assert s["overlap_share"] == pytest.approx(overlap / comm, rel=1e-6, abs=1e-6)
    assert 0.0 <= s["overlap_share"] <= 1.0


def test_no_communication_gives_nulls() -> None:
    path = TRACES / "cuda" / "et_pair" / "linear_kineto.json.gz"
    if not path.is_file():
        pytest.skip("../shared/traces not present (a user's clone)")
    s = analyze(path, findings=False, roofline=False).to_dict()["summary"]
    assert s["comm_us"] == 0
    assert s["exposed_comm_us"] is None and s["overlap_share"] is None
