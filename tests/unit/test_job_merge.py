"""Per-rank units: a trace of several ranks is analysed rank by rank and merged from rank
reports alone (``analysis.job``, ``analysis.job_report.merge``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from opscope.analysis.job import RankReport
from opscope.analysis.job_report import merge, rank_report
from opscope.analysis.job_tables import TableFold
from opscope.analysis.optable import op_table
from opscope.analysis.pipeline import analyze
from opscope.analysis.rank_split import rank_traces
from opscope.trace import load
from trace_checks import X

CPU_PEAKS = {"devices": {"cpu": {"tflops": {"fp32": 1.0}, "bandwidth_gbs": 10.0}}}


def _rank_doc(rank: int, kernel_us: list[float], t0: float) -> dict[str, Any]:
    """One rank's step: an aten::mm per kernel, each launching one kernel on stream 7."""
    events: list[dict[str, Any]] = [
        X("ProfilerStep#3", t0, 1000, "user_annotation"),
    ]
    ts = t0 + 10
    for i, k in enumerate(kernel_us):
        corr = 100 + i
        dims = {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}
        events.append(X("aten::mm", ts, 20, args=dims))
        events.append(X("cudaLaunchKernel", ts + 2, 5, "cuda_runtime", args={"correlation": corr}))
        events.append(
            X("gemm_kernel", ts + 30, k, "kernel", pid=0, tid=7, args={"correlation": corr})
        )
        ts += 100
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 2, "backend": "nccl"},
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        "traceEvents": events,
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }


@pytest.fixture
def job_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank0.json").write_text(json.dumps(_rank_doc(0, [10, 20], 0)))
    (d / "rank1.json").write_text(json.dumps(_rank_doc(1, [40, 40, 40], 50)))
    return d


def test_a_job_is_the_merge_of_its_ranks(job_dir: Path) -> None:
    report = analyze(job_dir)
    d = report.to_dict()
    assert [r.rank for r in report.ranks] == [0, 1]
    assert d["source"]["ranks"] == [0, 1]
    (mm,) = [o for o in d["ops"] if o["name"] == "aten::mm"]
    assert mm["calls"] == 5
    assert mm["device_self_us"] == pytest.approx(10 + 20 + 40 * 3)
    (k,) = d["kernels"]
    assert (k["calls"], k["min_us"], k["max_us"]) == (5, 10, 40)
    assert k["mean_us"] == pytest.approx(150 / 5)
    # device figures summed over the ranks' devices; wall from the first event to the last
    assert d["summary"]["device_busy_us"] == pytest.approx(150)
    assert d["summary"]["wall_us"] == pytest.approx(1050)
    # one row per rank and step
    assert [(s["rank"], s["step"]) for s in d["steps"]] == [(0, 3), (1, 3)]
    assert [s["device_ops"] for s in d["steps"]] == [2, 3]
    ranks = {r["rank"]: r for r in d["ranks"]}
    assert ranks[1]["summary"]["device_busy_us"] == pytest.approx(120)
    assert ranks[0]["summary"]["device_busy_us"] == pytest.approx(30)
    # every finding names its rank; numbered anew over the job
    assert all("rank" in f for f in d["findings"])
    assert [f["id"] for f in d["findings"]] == [f"F{i}" for i in range(1, len(d["findings"]) + 1)]


def test_rank_reports_round_trip_and_merge_without_events(job_dir: Path) -> None:
    trace = load(job_dir)
    parts = [rank_report(analyze(t, peaks=CPU_PEAKS), t.meta.ranks[0]) for t in rank_traces(trace)]
    wire = [
        orjson.loads(orjson.dumps(p.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY)) for p in parts
    ]
    back = [RankReport.from_dict(w) for w in wire]
    assert [b.to_dict() for b in back] == wire
    local = merge(parts, trace=trace).to_dict()
    remote = merge(back).to_dict()  # no trace: rank reports only
    assert orjson.dumps(remote, option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(
        local, option=orjson.OPT_SERIALIZE_NUMPY
    )


def test_tables_folded_rank_by_rank_with_lean_ranks_give_the_same_report(job_dir: Path) -> None:
    """A coordinator folds each rank's tables as it arrives and keeps it lean: the job report
    is byte for byte the one merged from whole rank reports."""
    trace = load(job_dir)
    parts = [rank_report(analyze(t, peaks=CPU_PEAKS), t.meta.ranks[0]) for t in rank_traces(trace)]
    assert all(p.roofline and p.ops.by_shape and p.kernels for p in parts)
    acc = TableFold()
    for p in sorted(parts, key=lambda p: p.rank):
        acc.add(p)
    lean = [p.lean() for p in reversed(parts)]  # held in any order
    assert all(not p.ops.by_shape and not p.kernels and p.roofline is None for p in lean)
    assert all(p.ops.rows for p in lean)  # what a job's report still reads of a rank
    whole = merge(parts).to_dict()
    folded = merge(lean, tables=acc.tables()).to_dict()
    assert whole["roofline"] and whole["op_shapes"] and whole["kernels"]
    assert orjson.dumps(folded, option=orjson.OPT_SERIALIZE_NUMPY) == orjson.dumps(
        whole, option=orjson.OPT_SERIALIZE_NUMPY
    )
    # lean ranks without their folded tables are not the job: the tables are needed
    assert merge(lean).to_dict()["kernels"] == []


def test_merged_op_table_equals_the_whole_tables_aggregation(job_dir: Path) -> None:
    trace = load(job_dir)
    whole = op_table(trace)
    job = analyze(trace).ops
    assert [r.name for r in job.rows] == [r.name for r in whole.rows]
    for a, b in zip(job.rows, whole.rows, strict=True):
        assert (a.calls, a.device_calls, a.launching_calls) == (
            b.calls,
            b.device_calls,
            b.launching_calls,
        )
        for f in (
            "cpu_self_us",
            "cpu_total_us",
            "device_self_us",
            "device_total_us",
            "device_share",
        ):
            assert math.isclose(getattr(a, f), getattr(b, f), rel_tol=1e-12), (a.name, f)


def test_a_single_rank_is_a_job_of_one(job_dir: Path) -> None:
    one = load(job_dir / "rank1.json")
    report = analyze(one)
    assert report.ranks == [] and "ranks" not in report.to_dict()
    job = merge([rank_report(report)]).to_dict()
    d = report.to_dict()
    assert job["ops"] == d["ops"] and job["kernels"] == d["kernels"]
    assert job["summary"] == d["summary"]


def test_rank_report_refuses_other_documents() -> None:
    with pytest.raises(ValueError, match="not a rank report"):
        RankReport.from_dict({"schema": "opscope.report/1"})


def test_text_report_of_a_job_shows_its_ranks(job_dir: Path) -> None:
    from opscope.render import text

    out = text.render_text(analyze(job_dir).to_dict(), width=100)
    assert "a job of 2 ranks" in out and "Ranks (2)" in out
    assert "[rank " in out
    assert max(len(line) for line in out.splitlines()) <= 100
