"""Job-level findings from rank reports: load imbalance fires on a rank that computes
clearly more than the median rank, and not on balanced ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.report import analyze
from trace_checks import X


def _rank(rank: int, kernel_us: float) -> dict[str, Any]:
    events: list[dict[str, Any]] = [X("ProfilerStep#1", 0, 2000, "user_annotation")]
    events.append(X("aten::mm", 0, 1, args={}))
    events.append(X("cudaLaunchKernel", 0, 1, "cuda_runtime", args={"correlation": 1}))
    events.append(X("gemm_kernel", 10, kernel_us, "kernel", pid=0, tid=7, args={"correlation": 1}))
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 3},
        "traceEvents": events,
    }


def _job(tmp_path: Path, kernels: list[float]) -> list[dict[str, Any]]:
    job = tmp_path / f"job{len(list(tmp_path.iterdir()))}"
    job.mkdir()
    for r, k in enumerate(kernels):
        (job / f"rank{r}.json").write_text(json.dumps(_rank(r, k)))
    return [
        f
        for f in analyze(job, roofline=False).to_dict()["findings"]
        if f["kind"] == "load_imbalance"
    ]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path.parent / (tmp_path.name + "-cache")))


def test_fires_on_the_rank_that_computes_more(tmp_path: Path) -> None:
    (f,) = _job(tmp_path, [1000, 1000, 1500])
    assert f["rank"] is None and f["details"]["rank"] == 2
    assert f["time_at_stake_us"] == pytest.approx(500.0)
    assert f["details"]["median_us"] == pytest.approx(1000.0)
    assert "rank 2" in f["title"] and "50 %" in f["title"]


def test_quiet_on_balanced_ranks(tmp_path: Path) -> None:
    assert _job(tmp_path, [1000, 1020, 1050]) == []  # 5 % above the median: under 10 %
    assert _job(tmp_path, [1000]) == []  # one rank


@pytest.mark.parametrize(
    "name", ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "Batches._next_data"]
)
def test_a_stragglers_cause_names_the_op_it_spends_longer_in(tmp_path: Path, name: str) -> None:
    from distjobs import nccl_rank_doc

    job = tmp_path / "loader-job"
    job.mkdir()
    for r in range(2):
        doc = nccl_rank_doc(r, 2, n=3, late_rank=1, late_us=400.0)
        if r == 1:  # its data loading takes 400 us before each collective
            for i in range(3):
                doc["traceEvents"].append(X(name, 550 + 1000 * i, 400, "user_annotation", tid=9))
        (job / f"rank{r}.json").write_text(json.dumps(doc))
    d = analyze(job, roofline=False).to_dict()
    (late,) = d["distributed"]["stragglers"]
    assert late["rank"] == 1
    assert name in late["cause"] and "data loading" in late["cause"]
    straggler = next(f for f in d["findings"] if f["kind"] == "straggler")
    assert "data loading" in straggler["recommendation"]
