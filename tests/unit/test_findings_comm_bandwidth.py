"""comm_bandwidth: collectives far below the device link's peak (from the peaks table) fire;
fast ones, short ones and devices whose link the table does not know do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.pipeline import analyze
from trace_checks import X

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)"
NELEMS = 25_000_000  # 100 MB of float


def _doc(kernel_us: float, device: str = "NVIDIA A100-SXM4-80GB", calls: int = 3) -> dict[str, Any]:
    """``calls`` all-reduces of 100 MB over 8 ranks, each kernel ``kernel_us`` long, in a
    100 ms step."""
    events: list[dict[str, Any]] = [X("ProfilerStep#1", 0, 100_000, "user_annotation")]
    args = {
        "Collective name": "allreduce",
        "In msg nelems": NELEMS,
        "Out msg nelems": NELEMS,
        "dtype": "Float",
        "Process Group Name": "0",
        "Group size": 8,
    }
    for i in range(calls):
        t = 100 + i * 30_000
        corr = 100 + i
        events += [
            X("c10d::allreduce_", t, 50),
            X("record_param_comms", t + 1, 40, args=args),
            X("nccl:all_reduce", t + 2, 30),
            X("cudaLaunchKernel", t + 3, 5, "cuda_runtime", args={"correlation": corr}),
            X(NCCL, t + 10, kernel_us, "kernel", pid=0, tid=7, args={"correlation": corr}),
        ]
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": device}],
        "distributedInfo": {"rank": 0, "world_size": 8},
        "traceEvents": events,
    }


def _findings(tmp_path: Path, doc: dict[str, Any]) -> list[dict[str, Any]]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    found = analyze(path, roofline=False).to_dict()["findings"]
    return [f for f in found if f["kind"] == "comm_bandwidth"]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def test_fires_far_below_the_link_peak(tmp_path: Path) -> None:
    # 100 MB in 10 ms: algbw 10 GB/s, busbw 10 x 2 x 7 / 8 = 17.5 GB/s, 5.8 % of 300 GB/s
    (f,) = _findings(tmp_path, _doc(10_000))
    d = f["details"]
    assert d["busbw_gbps"] == pytest.approx(17.5, rel=1e-3)
    assert d["link_gbps"] == 300 and d["link_share"] == pytest.approx(17.5 / 300, rel=1e-3)
    # at stake: 30 ms less the time at 70 % of the peak (3 x 175 MB of bus traffic)
    assert f["time_at_stake_us"] == pytest.approx(30_000 - 3 * 175e6 / (0.7 * 300e3), rel=1e-3)
    assert f["confidence"] == "low"  # one rank: its durations include waits
    assert not d["small_messages"] and "NCCL_DEBUG=INFO" in f["recommendation"]


def test_quiet_when_fast_absent_or_the_link_is_unknown(tmp_path: Path) -> None:
    assert _findings(tmp_path, _doc(600)) == []  # busbw 292 GB/s: 97 % of the peak
    assert _findings(tmp_path, _doc(10_000, calls=0)) == []
    # no link figure: a device the peaks table does not know, one it knows without a link
    assert _findings(tmp_path, _doc(10_000, device="NVIDIA GeForce RTX 4090")) == []
    assert _findings(tmp_path, _doc(10_000, device="NVIDIA B200")) == []


@pytest.mark.parametrize(
    ("device", "link", "gbs"),
    [
        ("NVIDIA A100 80GB PCIe", "NVLink bridge (2 GPUs)", 300),
        ("NVIDIA A100-PCIE-40GB", "NVLink bridge (2 GPUs)", 300),
        ("NVIDIA A100-SXM4-40GB", "NVLink 3 (12 links)", 300),
        ("Tesla V100-SXM2-16GB", "NVLink 2 (6 links)", 150),
        ("NVIDIA H100 PCIe", "NVLink bridge (2 GPUs)", 300),
    ],
)
def test_the_link_of_more_devices(tmp_path: Path, device: str, link: str, gbs: float) -> None:
    # the same 17.5 GB/s of bus bandwidth, measured against each device's link per direction
    (f,) = _findings(tmp_path, _doc(10_000, device=device))
    d = f["details"]
    assert d["link_gbps"] == gbs and d["link_share"] == pytest.approx(17.5 / gbs, rel=1e-3)
    assert f"{link}'s {gbs} GB/s" in f["title"]
    assert "datasheet" in d["link_source"] and "each way" in d["link_source"]


@pytest.mark.parametrize("device", ["NVIDIA L40S", "NVIDIA L4"])
def test_pcie_only_devices(tmp_path: Path, device: str) -> None:
    # 17.5 GB/s is 55 % of PCIe Gen4's 32 GB/s each way: quiet; 100 MB in 25 ms (7 GB/s) fires
    assert _findings(tmp_path, _doc(10_000, device=device)) == []
    (f,) = _findings(tmp_path, _doc(25_000, device=device))
    assert f["details"]["link_gbps"] == 32
    assert f["details"]["link_share"] == pytest.approx(7.0 / 32, rel=1e-3)


def test_a_link_at_its_pcie_peak_is_quiet(tmp_path: Path) -> None:
    # 100 MB in 3.2 ms over 8 ranks: busbw 54.7 GB/s, above a V100 PCIe's 16 GB/s each way
    assert _findings(tmp_path, _doc(3_200, device="Tesla V100-PCIE-32GB")) == []


def test_the_title_says_what_its_count_counts(tmp_path: Path) -> None:
    """One rank: the op table's calls of the collective; a job: every rank's, said so."""
    (f,) = _findings(tmp_path, _doc(10_000))
    assert "(3 calls, median 100.00 MB)" in f["title"]
    job = tmp_path / "job"
    job.mkdir()
    for rank in (0, 1):
        doc = _doc(10_000)
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
        (job / f"rank{rank}.json").write_text(json.dumps(doc))
    rep = analyze(job, roofline=False).to_dict()
    by_rank = {f["rank"]: f for f in rep["findings"] if f["kind"] == "comm_bandwidth"}
    assert "(3 calls, median" in by_rank[0]["title"]  # a rank's own finding: its calls
    assert "(6 calls over 2 ranks, median" in by_rank[None]["title"]  # the job's
    assert {o["name"]: o["calls"] for o in rep["ops"]}["nccl:all_reduce"] == 6
