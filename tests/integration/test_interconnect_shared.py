"""The link share of all-reduces on recorded NCCL traces (../shared) of devices whose link peak
the table now knows, against a hand computation from the raw JSON (no opscope code): each
``c10d::allreduce_`` call's kernels found through their launches' correlation ids, its bytes
from what the trace records inside the call, the bus bandwidth over the kernels' time, divided
by the datasheet's link peak per direction."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.pipeline import analyze

pytestmark = pytest.mark.shared


def _inside(outer: dict[str, Any], e: dict[str, Any]) -> bool:
    same = (outer["pid"], outer["tid"]) == (e["pid"], e["tid"])
    return same and outer["ts"] <= e["ts"] <= outer["ts"] + outer["dur"]


def _nelems(dims: Any) -> int:
    if dims and all(isinstance(d, int) for d in dims):
        return math.prod(dims)
    return sum(_nelems(d) for d in dims)


def _bytes_in_call(call: dict[str, Any], host: list[dict[str, Any]]) -> int:
    """The message size the trace records inside one call: ``record_param_comms``'s
    ``In/Out msg nelems`` (float), else the backend range's ``Input Dims`` (float)."""
    inner = [e for e in host if e is not call and _inside(call, e)]
    for e in inner:
        a = e.get("args") or {}
        if e["name"] == "record_param_comms" and "In msg nelems" in a:
            assert a["dtype"] == "Float"
            return 4 * max(int(a["In msg nelems"]), int(a["Out msg nelems"]))
    for e in inner:
        a = e.get("args") or {}
        if e["name"] == "nccl:all_reduce" and a.get("Input Dims"):
            assert a["Input type"] == ["float"]
            return 4 * _nelems(a["Input Dims"])
    raise AssertionError("no size recorded in the call")


def _hand_busbw(path: Path, group: int) -> tuple[float, int]:
    """(bus bandwidth in GB/s of the all-reduces, calls counted)."""
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    host = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    calls = [e for e in host if e["name"] == "c10d::allreduce_"]
    launches = {
        (e.get("args") or {}).get("correlation"): e
        for e in events
        if e.get("cat") == "cuda_runtime" and (e.get("args") or {}).get("correlation") is not None
    }
    kernels: dict[int, list[dict[str, Any]]] = {}
    for k in events:
        if k.get("cat") != "kernel" or "AllReduce" not in k["name"]:
            continue
        launch = launches.get((k.get("args") or {}).get("correlation"))
        owner = next((i for i, c in enumerate(calls) if launch and _inside(c, launch)), None)
        if owner is not None:
            kernels.setdefault(owner, []).append(k)
    total_bytes = 0
    total_us = 0.0
    for i, ks in kernels.items():
        total_bytes += _bytes_in_call(calls[i], host)
        total_us += max(k["ts"] + k["dur"] for k in ks) - min(k["ts"] for k in ks)
    factor = 2 * (group - 1) / group
    return total_bytes / (total_us * 1e3) * factor, len(kernels)


@pytest.mark.parametrize(
    ("trace", "device", "link_gbs", "calls"),
    [
        # A100-PG509-200 (an A100 SXM4 40GB board): NVLink 600 GB/s both ways, 300 each way;
        # the process group's size (2) from distributedInfo.pg_config
        ("cuda/a100_nccl_rank0_of2.json.gz", "NVIDIA A100-PG509-200", 300.0, 15),
        # Tesla V100-SXM2-16GB: NVLink 300 GB/s both ways, 150 each way; the calls name no
        # process group and distributedInfo lists none: the default group, the world's 2 ranks
        ("cuda/diff_pair/test_v100.json.gz", "Tesla V100-SXM2-16GB", 150.0, 18),
    ],
)
def test_all_reduce_link_share_by_hand(
    shared: Callable[[str], Path], trace: str, device: str, link_gbs: float, calls: int
) -> None:
    path = shared(trace)
    busbw, counted = _hand_busbw(path, group=2)
    doc = analyze(path, roofline=False).to_dict()
    assert doc["device"]["name"] == device
    dist = doc["distributed"]
    link = dist["interconnect"]
    assert link["gbs"] == link_gbs and "each way" in link["source"]
    (g,) = [g for g in dist["by_collective"] if g["name"] == "all_reduce"]
    assert (g["count"], counted, g["group_size"]) == (calls, calls, 2)
    assert g["busbw_gbps"] == pytest.approx(busbw, rel=1e-6)
    assert g["link_share"] == pytest.approx(busbw / link_gbs, rel=1e-6)
    # every collective type of the job gets its share
    assert all(x["link_share"] is not None for x in dist["by_collective"])
    # far below the link's peak (a few to 10 %): the comm_bandwidth finding, against this link
    found = [f for f in doc["findings"] if f["kind"] == "comm_bandwidth"]
    ours = [f for f in found if f["details"]["collective"] == "all_reduce"]
    assert len(ours) == 1 and ours[0]["details"]["link_gbps"] == link_gbs
    assert ours[0]["details"]["link_share"] == pytest.approx(busbw / link_gbs, rel=1e-6)
