"""The ``distributed`` section: ranks, per-rank communication and overlap, collectives by
type with their bandwidths - checked by hand on small synthetic jobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.distributed import bus_factor, by_collective
from opscope.analysis.pipeline import analyze
from trace_checks import X


def _doc(rank: int, world: int | None, comm: list[tuple[float, float]]) -> dict[str, Any]:
    """Compute kernels at [0, 100) and [200, 300) us; NCCL kernels at ``comm`` spans."""
    events: list[dict[str, Any]] = [X("ProfilerStep#1", 0, 400, "user_annotation")]
    spans = [("gemm_kernel", 0.0, 100.0), ("gemm_kernel", 200.0, 100.0)]
    spans += [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)", s, d) for s, d in comm
    ]
    for i, (name, ts, dur) in enumerate(spans):
        corr = 10 + i
        events.append(X("aten::op", ts, 1, args={}))
        events.append(X("cudaLaunchKernel", ts, 1, "cuda_runtime", args={"correlation": corr}))
        events.append(X(name, ts, dur, "kernel", pid=0, tid=7, args={"correlation": corr}))
    doc: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    if world is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": world}
    return doc


def test_overlap_and_exposed_comm_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    # comm [50, 150) and [250, 260): 50 + 10 us under compute, 50 us exposed
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(_doc(0, 4, [(50, 100), (250, 10)])))
    d = analyze(path, findings=False, roofline=False).to_dict()
    s = d["summary"]
    assert s["comm_us"] == pytest.approx(110.0)
    assert s["exposed_comm_us"] == pytest.approx(50.0)
    assert s["overlap_share"] == pytest.approx(60.0 / 110.0)
    dist = d["distributed"]
    assert dist["world_size"] == 4 and dist["ranks"] == [0]
    assert dist["missing_ranks"] == [1, 2, 3]
    assert dist["rank_source"] == "distributedInfo"
    (row,) = dist["per_rank"]
    assert row["comm_us"] == pytest.approx(110.0) and row["exposed_comm_us"] == pytest.approx(50.0)
    assert row["compute_us"] == pytest.approx(200.0)
    assert row["wait_us"] is None  # no instance matched across ranks
    assert dist["clock"]["applied"] is False


def test_a_job_of_two_ranks_named_by_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    job = tmp_path / "job"
    job.mkdir()
    (job / "trace_rank_0.json").write_text(json.dumps(_doc(0, None, [(100, 100)])))
    (job / "trace_rank_1.json").write_text(json.dumps(_doc(1, None, [(120, 60)])))
    d = analyze(job, findings=False, roofline=False).to_dict()
    dist = d["distributed"]
    assert dist["ranks"] == [0, 1] and dist["world_size"] == 2 and dist["missing_ranks"] == []
    assert dist["rank_source"] == "filename"
    by_rank = {r["rank"]: r for r in dist["per_rank"]}
    assert by_rank[0]["exposed_comm_us"] == pytest.approx(100.0)  # [100, 200): no compute
    assert by_rank[1]["exposed_comm_us"] == pytest.approx(60.0)
    assert d["summary"]["exposed_comm_us"] == pytest.approx(160.0)
    assert d["summary"]["overlap_share"] == pytest.approx(0.0)
    assert any("no distributedInfo" in w and "file name" in w for w in dist["warnings"])
    assert not any("profiler steps" in w for w in dist["warnings"])


def test_ranks_with_other_steps_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    job = tmp_path / "job"
    job.mkdir()
    late = _doc(1, 3, [(100, 50)])
    late["traceEvents"][0]["name"] = "ProfilerStep#2"
    (job / "rank0.json").write_text(json.dumps(_doc(0, 3, [(100, 50)])))
    (job / "rank1.json").write_text(json.dumps(late))
    warnings = analyze(job, findings=False, roofline=False).to_dict()["distributed"]["warnings"]
    assert any("different profiler steps" in w for w in warnings)
    assert "1 of 3 ranks have no trace here" in warnings
    assert not any("distributedInfo" in w for w in warnings)


def test_no_communication_and_one_rank_has_no_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "one.json"
    path.write_text(json.dumps(_doc(0, None, [])))
    d = analyze(path, findings=False, roofline=False).to_dict()
    assert "distributed" not in d
    assert d["summary"]["exposed_comm_us"] is None and d["summary"]["overlap_share"] is None


def test_bus_bandwidth_factors() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    for name in ("all_gather", "reduce_scatter", "all_to_all"):
        assert bus_factor(name, 4) == pytest.approx(3 / 4)
    for name in ("broadcast", "reduce", "send", "recv"):
        assert bus_factor(name, 16) == 1.0
    assert bus_factor("barrier", 4) is None and bus_factor("all_reduce", None) is None


def test_by_collective_sums_and_bandwidths() -> None:
    records = [
        {"name": "all_reduce", "pg": "0", "pg_size": 4, "bytes": 4_000_000, "dur_us": 1000.0},
        {"name": "all_reduce", "pg": "0", "pg_size": 4, "bytes": 4_000_000, "dur_us": 3000.0},
        {"name": "broadcast", "pg": "0", "pg_size": 4, "bytes": None, "dur_us": 5.0},
    ]
    rows = by_collective(records)
    ar = rows[0]
    assert (ar["name"], ar["count"], ar["bytes"], ar["dur_us"]) == (
        "all_reduce",
        2,
        8_000_000,
        4000.0,
    )
    assert ar["algbw_gbps"] == pytest.approx(8e6 / 4e6)  # bytes / ns = GB/s
    assert ar["busbw_gbps"] == pytest.approx(2.0 * 1.5)
    assert rows[1]["name"] == "broadcast" and rows[1]["algbw_gbps"] is None


def test_report_of_a_job_shows_the_section_and_narrows_to_a_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from opscope.cli.main import main
    from opscope.render.text import render_text as render

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank0.json").write_text(json.dumps(_doc(0, 2, [(100, 100)])))
    (job / "rank1.json").write_text(json.dumps(_doc(1, 2, [(120, 60)])))
    text = render(analyze(job, findings=False, roofline=False).to_dict(), width=120)
    assert "Communication per rank (2 of 2, ranks from distributedInfo)" in text
    # per rank, max / median (rank 0: 100 us exposed, rank 1: 60 us), never their 160 us sum
    assert "communication per rank" in text and "exposed 100 µs / 80.0 µs (max / median)" in text
    out = tmp_path / "r1.json"
    assert main(["report", str(job), "--rank", "1", "--format", "json", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["source"]["ranks"] == [1]
    assert d["distributed"]["ranks"] == [1]
    assert d["summary"]["exposed_comm_us"] == pytest.approx(60.0)
    capsys.readouterr()
    assert main(["report", str(job), "--rank", "7"]) == 1
    assert "rank 7: not in this trace (its ranks: 0, 1)" in capsys.readouterr().err


def test_html_and_markdown_show_the_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opscope.render import html, markdown

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    job = tmp_path / "job"
    job.mkdir()
    (job / "rank0.json").write_text(json.dumps(_doc(0, 2, [(100, 100)])))
    (job / "rank1.json").write_text(json.dumps(_doc(1, 2, [(120, 60)])))
    d = analyze(job, findings=False, roofline=False).to_dict()
    d["distributed"]["rank_source"] = "<script>x</script>"  # trace-derived text is escaped
    page = html.sections(d)
    assert "<h2>Communication per rank</h2>" in page and "<script>x" not in page
    assert page.count("<tr>") >= 3
    md = markdown.render_markdown(d)
    assert "## Communication per rank" in md and "| 1 |" in md


def test_unrelated_traces_are_not_merged_into_one_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opscope.errors import OpscopeError

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    apart = tmp_path / "apart"
    apart.mkdir()
    late = _doc(0, None, [(100, 50)])
    for e in late["traceEvents"]:  # recorded a minute later
        e["ts"] += 60e6
    (apart / "run_a.json").write_text(json.dumps(_doc(0, None, [(100, 50)])))
    (apart / "run_b.json").write_text(json.dumps(late))
    with pytest.raises(OpscopeError, match=r"not ranks of one job.*60\.0 s apart"):
        analyze(apart, findings=False, roofline=False)
    together = tmp_path / "together"  # overlapping windows: taken as ranks, told by order
    together.mkdir()
    (together / "run_a.json").write_text(json.dumps(_doc(0, None, [(100, 50)])))
    (together / "run_b.json").write_text(json.dumps(_doc(0, None, [(120, 50)])))
    d = analyze(together, findings=False, roofline=False).to_dict()
    assert d["distributed"]["rank_source"] == "order"


def test_the_shared_dataloader_pair_is_refused() -> None:
    from opscope.errors import OpscopeError

    pair = Path(__file__).resolve().parents[2].parent / "shared/traces/cuda/dataloader_pair"
    if not pair.is_dir():
        pytest.skip("../shared/traces not present (a user's clone)")
    with pytest.raises(OpscopeError, match="not ranks of one job"):
        analyze(pair, findings=False, roofline=False)
