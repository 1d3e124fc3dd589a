"""The IBM AIU trace of ../shared (a four-card all-reduce over RDMA), against a hand
computation from its raw JSON (no opscope code): begins paired with ends per card and thread,
each card's RDMA transfers unioned, arrivals and waits of the one collective."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.pipeline import analyze
from opscope.trace import load

pytestmark = pytest.mark.shared
TRACE = "odd/ibm_aiu_allreduce_uint64.json"


def _pairs(path: Path) -> list[dict[str, Any]]:
    open_: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    out = []
    for e in json.loads(path.read_text()):
        key = (e["pid"], e["tid"])
        if e["ph"] == "B":
            open_.setdefault(key, []).append(e)
        else:
            b = open_[key].pop()
            out.append({**b, "end": e["ts"]})
    return out


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(spans):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def test_aiu_all_reduce_by_hand(shared: Callable[[str], Path]) -> None:
    path = shared(TRACE)
    pairs = _pairs(path)
    rdma = [p for p in pairs if p["name"].startswith("SenRdma")]
    cards = sorted({p["pid"] for p in pairs})
    assert cards == [0, 1, 2, 3]

    trace = load(path)
    assert (trace.meta.format, trace.meta.ranks, len(trace)) == ("aiu", cards, len(pairs))
    kinds = trace.events.column("kind").to_pylist()
    assert kinds.count("comm") == len(rdma)
    # attr is the args: every transfer's CollGroup and Bytes are there
    texts = trace.events.column("args").to_pylist()
    args = [json.loads(a) for a, k in zip(texts, kinds, strict=True) if k == "comm"]
    assert all(a["CollGroup"] == "AllReduce_all_reduce_4" for a in args)

    doc = analyze(path, roofline=False).to_dict()
    assert doc["device"]["kind"] == "aiu"
    dist = doc["distributed"]
    assert dist["ranks"] == cards
    comm = {r["rank"]: r["comm_us"] for r in dist["per_rank"]}
    for pid in cards:
        spans = [(p["ts"], p["end"]) for p in rdma if p["pid"] == pid]
        assert comm[pid] == pytest.approx(_union(spans), abs=2e-3), pid
    assert doc["summary"]["comm_us"] == pytest.approx(sum(comm.values()))

    # one all-reduce per card; each transfer moves the 512 KiB message (Bytes, where recorded)
    sizes = {int(p["attr"]["Bytes"]) for p in rdma if "Bytes" in p["attr"]}
    assert sizes == {524288}
    (g,) = dist["by_collective"]
    assert (g["name"], g["count"], g["bytes"]) == ("all_reduce", 4, 4 * 524288)
    (inst,) = dist["instances"]
    assert (inst["name"], inst["ranks"], inst["bytes"]) == ("all_reduce", cards, 524288)
    arrival = {pid: min(p["ts"] for p in rdma if p["pid"] == pid) for pid in cards}
    end = {pid: max(p["end"] for p in rdma if p["pid"] == pid) for pid in cards}
    last = max(arrival.values())
    assert inst["last_rank"] == max(arrival, key=lambda p: arrival[p])
    for pid in cards:
        assert inst["wait_us"][str(pid)] == pytest.approx(last - arrival[pid], abs=2e-3)
    assert inst["dur_us"] == pytest.approx(min(end[p] - arrival[p] for p in cards), abs=2e-3)
    # one instance is too few to estimate the cards' clock offsets from: none applied
    assert dist["clock"]["applied"] is False
