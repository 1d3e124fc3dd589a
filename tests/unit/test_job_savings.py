"""The job's own findings measured against the job's critical path (``step_savings_us``),
on synthetic NCCL jobs whose answers are worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from distjobs import nccl_rank_doc
from opscope.analysis.pipeline import analyze


def _job(folder: Path, world: int = 3, edit: Any = None, **kw: Any) -> dict[str, Any]:
    kw.setdefault("sync", True)  # the step ends when the device is done (a loss read)
    kw.setdefault("comm_stream", 8)  # NCCL on its own stream
    for r in range(world):
        doc = nccl_rank_doc(r, world, **kw)
        if edit is not None:
            edit(r, doc)
        (folder / f"trace_rank_{r}.json").write_text(json.dumps(doc))
    return analyze(folder).to_dict()


def _job_finding(report: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [f for f in report["findings"] if f["kind"] == kind and f.get("rank") is None]
    return found


@pytest.mark.parametrize("late_us", [200.0, 300.0])
def test_a_straggler_saves_its_lateness_where_the_job_path_feels_it(
    tmp_path: Path, late_us: float
) -> None:
    """Rank 1's comm kernels start ``late_us`` late at each of 3 all_reduces; the others wait
    that long each time (time at stake: 3 x late_us).  Every rank's host resumes at fixed
    times, so an earlier arrival at the first two collectives moves nothing after them: only
    the last collective's lateness is on the job path, and of that only what the host does
    not cover: the host reaches its closing sync at 3100 us and the last transfer ends at
    3300, so the step (ending 10 us after it) can end at most 200 us sooner."""
    rep = _job(tmp_path, late_rank=1, late_us=late_us)
    f = _job_finding(rep, "straggler")
    assert f["time_at_stake_us"] == pytest.approx(3 * late_us)
    assert rep["critical_path"]["length_us"] == pytest.approx(3310.0)
    assert f["step_savings_us"] == pytest.approx(min(late_us, 200.0))


def test_load_imbalance_off_the_job_path_saves_nothing(tmp_path: Path) -> None:
    """Rank 1's gemms take 590 us instead of 400 (3 of them: 570 us at stake); they run on the
    compute stream beside the collectives (NCCL's own stream) and end long before the step's
    closing sync: the job path (rank 1's host up to its late last collective, the transfer
    and the sync) does not pass them, so the fix saves nothing."""

    def slow_gemms(rank: int, doc: dict[str, Any]) -> None:
        for e in doc["traceEvents"]:
            if rank == 1 and e["name"] == "gemm_kernel":
                e["dur"] = 590.0

    rep = _job(tmp_path, edit=slow_gemms, late_rank=1, late_us=200.0, steps=True)
    f = _job_finding(rep, "load_imbalance")
    assert f["time_at_stake_us"] == pytest.approx(570.0)
    assert rep["critical_path"]["length_us"] == pytest.approx(3310.0)
    assert rep["critical_path"]["by_rank_us"] == {"0": 110.0, "1": 3200.0}
    assert f["step_savings_us"] == pytest.approx(0.0)


def test_comm_bandwidth_saves_its_share_of_the_transfers_on_the_path(tmp_path: Path) -> None:
    """16 MiB all_reduces in 300 us on H100s: far below NVLink's 450 GB/s.  The finding says
    687 of its 900 us would go at the target share; of the three transfers only the last
    (300 us, 3000-3300) is on the job path, and it would end 229 us sooner, but the host
    reaches the step's closing sync only at 3100: the path saves 3300 - 3100 = 200 us."""

    def big_messages(rank: int, doc: dict[str, Any]) -> None:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
        for e in doc["traceEvents"]:
            if e.get("name") == "record_param_comms":
                e["args"]["In msg nelems"] = e["args"]["Out msg nelems"] = 4 * 1024 * 1024

    rep = _job(tmp_path, edit=big_messages)
    f = _job_finding(rep, "comm_bandwidth")
    assert f["details"]["time_us"] == pytest.approx(900.0)
    assert 300.0 * f["time_at_stake_us"] / 900.0 > 200.0
    assert f["step_savings_us"] == pytest.approx(200.0, abs=0.01)


def test_every_finding_of_a_job_has_savings_within_its_time_at_stake(tmp_path: Path) -> None:
    rep = _job(tmp_path, late_rank=2, late_us=250.0)
    assert rep["findings"]
    for f in rep["findings"]:
        assert f["step_savings_us"] is not None, f["kind"]
        assert 0 <= f["step_savings_us"] <= f["time_at_stake_us"] + 1e-6


def test_a_projection_solved_in_place_is_the_rebuilt_graphs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fix's projection swaps the changed ranks' edges into the solved job graph instead of
    joining every rank's part again; on the straggler, load-imbalance and bandwidth jobs
    above, every projection equals the rebuilt graph's length (the oracle), and the in-place
    path is the one taken."""
    from opscope.analysis.critical import job_savings, job_solve

    fast, rebuild = job_solve.projected_length, job_solve.window_length
    checked: list[tuple[int, int]] = []
    rebuilt: list[int] = []
    resized: list[bool] = []

    def counted(*a: Any) -> int:
        rebuilt.append(1)
        return rebuild(*a)

    def both(solved: Any, new: Any, members: Any) -> int:
        before = len(rebuilt)
        got = fast(solved, new, members)
        assert len(rebuilt) == before  # solved in place, not rebuilt
        oracle = rebuild([new.get(r, s) for r, s in solved.summaries.items()], members)
        resized.append(any(len(s.full) != len(solved.summaries[r].full) for r, s in new.items()))
        checked.append((got, oracle))
        return got

    monkeypatch.setattr(job_solve, "window_length", counted)
    monkeypatch.setattr(job_savings, "projected_length", both)

    def slow_gemms(rank: int, doc: dict[str, Any]) -> None:
        for e in doc["traceEvents"]:
            if rank == 1 and e["name"] == "gemm_kernel":
                e["dur"] = 590.0

    def big_messages(rank: int, doc: dict[str, Any]) -> None:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
        for e in doc["traceEvents"]:
            if e.get("name") == "record_param_comms":
                e["args"]["In msg nelems"] = e["args"]["Out msg nelems"] = 4 * 1024 * 1024

    for i, kw in enumerate(
        [
            {"late_rank": 1, "late_us": 300.0},
            {"edit": slow_gemms, "late_rank": 1, "late_us": 200.0, "steps": True},
            {"edit": big_messages},
        ]
    ):
        folder = tmp_path / f"job{i}"
        folder.mkdir()
        _job(folder, **kw)
    assert checked and all(got == oracle for got, oracle in checked), checked
    assert any(resized) and not all(resized)  # fixes that keep and that drop contracted edges
    assert len({oracle for _got, oracle in checked}) > 1  # the fixes moved the path
