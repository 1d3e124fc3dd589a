"""Job-level findings from rank reports: load imbalance fires on a rank that computes
clearly more than the median rank, and not on balanced ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.pipeline import analyze
from trace_checks import X


def _rank(rank: int, kernel_us: float | list[float], steps: int = 3) -> dict[str, Any]:
    """One rank of ``steps`` steps of 2 ms, each with one gemm of ``kernel_us`` (or the list's
    value for that step)."""
    per_step = kernel_us if isinstance(kernel_us, list) else [kernel_us] * steps
    events: list[dict[str, Any]] = []
    for i, k in enumerate(per_step):
        t = 2000.0 * i
        events.append(X(f"ProfilerStep#{i + 1}", t, 2000, "user_annotation"))
        events.append(X("aten::mm", t, 1, args={}))
        args = {"correlation": i + 1}
        events.append(X("cudaLaunchKernel", t, 1, "cuda_runtime", args=args))
        events.append(X("gemm_kernel", t + 10, k, "kernel", pid=0, tid=7, args=args))
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 3},
        "traceEvents": events,
    }


def _analyze(tmp_path: Path, kernels: list[Any], steps: int = 3) -> dict[str, Any]:
    job = tmp_path / f"job{len(list(tmp_path.iterdir()))}"
    job.mkdir()
    for r, k in enumerate(kernels):
        (job / f"rank{r}.json").write_text(json.dumps(_rank(r, k, steps)))
    return analyze(job, roofline=False).to_dict()


def _job(tmp_path: Path, kernels: list[Any], steps: int = 3) -> list[dict[str, Any]]:
    found = _analyze(tmp_path, kernels, steps)["findings"]
    return [f for f in found if f["kind"] == "load_imbalance"]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path.parent / (tmp_path.name + "-cache")))


def test_fires_on_the_rank_that_computes_more(tmp_path: Path) -> None:
    (f,) = _job(tmp_path, [1000, 1000, 1500])
    assert f["rank"] is None and f["details"]["rank"] == 2
    assert f["time_at_stake_us"] == pytest.approx(3 * 500.0)
    assert f["details"]["median_us"] == pytest.approx(3 * 1000.0)
    assert "rank 2" in f["title"] and "50 %" in f["title"]
    seen = f["details"]["evidence"]
    assert seen["steps"] == 3 and seen["steps_above_noise"] == 3
    assert "noise" in seen["test"]


def test_quiet_on_balanced_ranks(tmp_path: Path) -> None:
    assert _job(tmp_path, [1000, 1020, 1050]) == []  # 5 % above the median: under 10 %
    assert _job(tmp_path, [1000]) == []  # one rank


def test_one_slow_step_is_noise_not_an_imbalance(tmp_path: Path) -> None:
    """Rank 2 computes 60 % more in total, all of it in one step (a rank descheduled once):
    its excess is above the noise in one step of three, no claim."""
    assert _job(tmp_path, [1000, 1000, [1000, 1000, 2800]]) == []
    # the same excess spread over every step is one
    assert len(_job(tmp_path, [1000, 1000, [1600, 1600, 1600]])) == 1


def test_one_step_cannot_tell_an_imbalance_and_says_so(tmp_path: Path) -> None:
    doc = _analyze(tmp_path, [1000, 1000, 1500], steps=1)
    assert not [f for f in doc["findings"] if f["kind"] == "load_imbalance"]
    notes = doc["distributed"]["warnings"]
    assert any("too short a window to tell a load imbalance" in n for n in notes)


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


def test_one_collective_is_too_short_a_window_to_name_a_straggler(tmp_path: Path) -> None:
    from distjobs import nccl_rank_doc

    job = tmp_path / "short"
    job.mkdir()
    for r in range(2):
        doc = nccl_rank_doc(r, 2, n=1, late_rank=1, late_us=400.0)
        (job / f"rank{r}.json").write_text(json.dumps(doc))
    d = analyze(job, roofline=False).to_dict()
    assert d["distributed"]["stragglers"] == []
    assert any("too short a window to name a straggler" in w for w in d["distributed"]["warnings"])


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "data_loading"),
        ("cudaStreamSynchronize", "host_sync"),
        ("aten::item", "host_sync"),
        ("aten::mm", "compute"),
        ("## wait_for_batch ##", "region"),
        ("slow_rank_sleep", "region"),
    ],
)
def test_what_an_op_suggests(name: str, kind: str) -> None:
    from opscope.analysis.job_findings import op_kind

    assert op_kind(name) == kind


def test_a_straggler_gets_the_advice_of_its_cause() -> None:
    from opscope.analysis.job_findings import straggler

    row = {"rank": 3, "times_last": 5, "caused_wait_us": 3000.0, "own_wait_us": 0.0}
    by_kind = {
        k: straggler({**row, "cause_kind": k, "cause_op": "OP"}, 4, 10_000.0)["recommendation"]
        for k in ("data_loading", "compute", "host_sync", "region", "untraced", None)
    }
    assert "num_workers" in by_kind["data_loading"] and "pin_memory" in by_kind["data_loading"]
    assert "sequence" in by_kind["compute"] and "shard" in by_kind["compute"]
    assert ".item()" in by_kind["host_sync"] and "OP" in by_kind["host_sync"]
    assert "record_function" in by_kind["region"] and "sync" not in by_kind["region"]
    assert "record" in by_kind["untraced"] and "py-spy" in by_kind["untraced"]
    assert len(set(by_kind.values())) == 6


def test_one_rank_of_a_job_shows_its_role_in_the_job(tmp_path: Path) -> None:
    """``--rank N`` of a job: the chosen rank's part (the job's straggler or not, its
    waits), no warning about the ranks left out on purpose; the straggler's own finding."""
    from distjobs import write_nccl_job
    from opscope.service import Workspace

    job = tmp_path / "job"
    write_nccl_job(job, world=3, late_rank=1, late_us=200.0)
    late = Workspace().open(job, rank=1).data
    role = late["distributed"]["job_role"]
    assert role["straggler"] and role["rank"] == 1 and role["ranks"] == [0, 1, 2]
    assert role["others_wait_us_each"] == pytest.approx(3 * 200.0)
    assert role["evidence"]["late_instances"] == 3
    notes = late["distributed"]["warnings"]
    assert not any("have no trace here" in n for n in notes)
    assert any("reported alone (--rank): the job's straggler" in n for n in notes)
    (f,) = [f for f in late["findings"] if f["kind"] == "straggler"]
    assert f["rank"] == 1 and "rank 1" in f["title"]
    other = Workspace().open(job, rank=0).data
    assert not other["distributed"]["job_role"]["straggler"]
    assert other["distributed"]["job_role"]["wait_us"] == pytest.approx(3 * 200.0)
    assert not [f for f in other["findings"] if f["kind"] == "straggler"]


def test_a_jobs_header_gives_figures_per_rank_never_sums(tmp_path: Path) -> None:
    """A job's header: each figure's max and median over the ranks (a sum of walls or spans
    over ranks is no time anyone waited); the stragglers table gives the wait of each other
    rank, as the finding does."""
    import io

    from rich.console import Console

    from distjobs import write_nccl_job
    from opscope.render import text

    job = tmp_path / "job"
    write_nccl_job(job, world=3, late_rank=1, late_us=200.0)
    d = analyze(job, roofline=False).to_dict()
    per = d["summary"]["per_rank"]
    walls = [r["summary"]["wall_us"] for r in d["ranks"]]
    assert per["wall_us"]["max"] == pytest.approx(max(walls))
    assert per["wall_us"]["median"] == pytest.approx(sorted(walls)[1])
    spans = [r["summary"]["device_span_us"] for r in d["ranks"]]
    assert d["summary"]["device_span_us"] == pytest.approx(sum(spans))  # the JSON sum stays
    out = io.StringIO()
    text.print_text(Console(file=out, width=200), d)
    page = out.getvalue()
    assert "per rank (max / median): wall" in page
    assert f"device span {text.us(sum(spans))}" not in page
    assert "others' wait each" in page and "600 µs" in page  # 3 x 200 us for each other rank


def test_a_stragglers_evidence_is_its_latest_arrival_on_every_rank(tmp_path: Path) -> None:
    """What the explorer's "show in timeline" zooms to: the collective where the straggler
    arrived latest after the others, from the others' first arrival to its own, with every
    rank's record of it."""
    from distjobs import write_nccl_job

    job = tmp_path / "job"
    write_nccl_job(job, world=3, late_rank=1, late_us=200.0)
    d = analyze(job, roofline=False).to_dict()
    (f,) = [f for f in d["findings"] if f["kind"] == "straggler"]
    (ev,) = f["evidence"]
    assert ev["t1"] - ev["t0"] == pytest.approx(200_000, abs=1)  # ns: 200 us late
    worst = d["distributed"]["stragglers"][0]["worst"]
    assert worst["late_us"] == pytest.approx(200.0) and worst["name"] == "all_reduce"
    rep = analyze(job, roofline=False)
    assert rep.trace is not None
    ids = rep.trace.events.column("id").to_pylist()
    ranks = rep.trace.events.column("rank").to_pylist()
    rank_of = dict(zip(ids, ranks, strict=True))
    assert {rank_of[i] for i in ev["event_ids"]} == {0, 1, 2}  # every rank's record of it
    assert "rank 1 arrives 200 µs after the others" in ev["note"]


def test_stalls_in_most_steps_are_noise_not_an_imbalance(tmp_path: Path) -> None:
    """Rank 2 is descheduled for 1.5-2.5 ms in 3 of 5 steps of 1 ms (gloo ranks on shared
    cores): its excess is over twice the others' spread in those steps, yet it swings by as
    much as it amounts to, so it is within the rank's own noise. The same steps 0.6 ms
    longer each time are an imbalance."""
    calm = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
    stalled = [3000.0, 1000.0, 2500.0, 995.0, 3500.0]
    assert _job(tmp_path, [calm, [1002.0, 1008.0, 992.0, 1000.0, 1001.0], stalled], steps=5) == []
    (f,) = _job(tmp_path, [calm, calm, [v + 600.0 for v in calm]], steps=5)
    assert f["details"]["rank"] == 2 and f["details"]["evidence"]["steps_above_noise"] == 5
