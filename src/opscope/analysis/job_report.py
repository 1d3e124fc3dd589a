"""A job's report from its ranks' reports: each rank's :class:`RankReport`, the ranks'
collectives matched across the job (:func:`matching`), and :func:`merge`, which needs no events.

A job's own findings (stragglers, load imbalance, collectives below the link's peak:
:mod:`opscope.analysis.job_findings`) are made here from the matched ranks and ranked with
every rank's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from opscope.analysis import clocks, job
from opscope.analysis.collective_match import match_collectives, stragglers
from opscope.analysis.distributed import distributed_section, has_distributed
from opscope.analysis.instance_table import Instances
from opscope.analysis.job import RankReport
from opscope.analysis.job_findings import (
    discount_waits,
    job_findings,
    straggler_why,
    window_notes,
    worst_arrivals,
)
from opscope.analysis.job_tables import JobTables, fold
from opscope.analysis.report import Report
from opscope.analysis.steps import step_compute
from opscope.trace import Trace


def rank_report(report: Report, rank: int | None = None) -> RankReport:
    """The :class:`RankReport` of a one-rank report (its events are not kept)."""
    head = report.head()
    src = head["source"]
    rank = int(rank if rank is not None else (src["ranks"] or [0])[0])
    source = {k: src[k] for k in ("paths", "format", "events", "warnings", "skipped")}
    if report.trace is not None:
        meta = report.trace.meta
        source["rank_source"] = meta.rank_origin.get(rank, "order")
        info = meta.distributed_info or {}
        world = info.get("world_size") if isinstance(info, dict) else None
        source["world_size"] = world if isinstance(world, int) and world > 0 else None
    return RankReport(
        rank=rank,
        source=source,
        device=head["device"],
        window=head["window"],
        ops=report.ops,
        kernels=report.kernels,
        timeline=report.timeline,
        steps=[s for s in report.steps if report.in_window(s.step)],
        findings=report.findings,
        roofline=report.roofline,
        collectives=list(report.collectives),
        extra={k: v for k, v in report.extra.items() if k != "distributed"},
        step_compute_us=_step_compute(report),
    )


def _step_compute(report: Report) -> dict[int, float]:
    """Each step of the report's window: its compute (none without the trace)."""
    got = report.step_compute_us
    if got is None:
        if report.trace is None:
            return {}
        got = step_compute(report.trace)
    return {k: v for k, v in got.items() if report.in_window(k)}


def merge(
    ranks: list[RankReport],
    *,
    trace: Trace | None = None,
    window_steps: tuple[int, int] | None = None,
    run_info: dict[str, Any] | None = None,
    unreadable: Sequence[dict[str, Any]] = (),
    matched: Matching | None = None,
    tables: JobTables | None = None,
) -> Report:
    """The job report of rank reports (see :mod:`opscope.analysis.job`): no events needed;
    ``trace``, when given, is kept for renderers that draw the timeline.  ``unreadable``: the
    job's files that could not be read (``TraceMeta.unreadable``), named in ``source`` and,
    where their rank is known, in ``distributed.missing_ranks``.  ``matched``: the
    :func:`matching` of these ranks, when the caller has made it (else it is made here).
    ``tables``: the ranks' tables folded in rank order as they arrived
    (:class:`~opscope.analysis.job_tables.TableFold`; the ranks may then be
    :meth:`~opscope.analysis.job.RankReport.lean`), else folded here."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    if tables is None:
        tables = fold(ranks)
    ops = tables.ops
    timeline = job.merge_timelines([r.timeline for r in ranks])
    steps = job.merge_steps(ranks)
    report = Report(
        trace=trace,
        ops=ops,
        kernels=tables.kernels,
        timeline=timeline,
        steps=steps,
        window_steps=window_steps,
        findings=[],
        run_info=run_info,
        roofline=tables.roofline,
        ranks=ranks,
    )
    if has_distributed(ranks):
        report.extra["distributed"] = _distributed(ranks, matched)
    dist = report.extra.get("distributed") or {}
    waits = {r["rank"]: r.get("wait_us") for r in dist.get("per_rank") or []}
    found_in = [replace(r, findings=discount_waits(r, waits.get(r.rank))) for r in ranks]
    report.findings = job.merge_findings(
        found_in, job_findings(ranks, timeline.wall_us, dist.get("stragglers") or [], dist)
    )
    report.job = {
        "source": job.merge_sources(ranks),
        "device": job.merge_devices(ranks),
        "window": {
            "start_ns": timeline.start_ns,
            "end_ns": timeline.end_ns,
            "steps": sorted({s.step for s in steps}),
            "selection": None if window_steps is None else list(window_steps),
        },
    }
    note_unreadable(report, unreadable)
    return report


def note_unreadable(report: Report, unreadable: Sequence[dict[str, Any]]) -> None:
    """Name the job's files that could not be read: ``source.unreadable`` and their ranks (from
    the file names) among ``distributed.missing_ranks`` (the world size names the others)."""
    if not unreadable:
        return
    if report.job is not None:
        report.job["source"]["unreadable"] = [dict(u) for u in unreadable]
    dist = report.extra.get("distributed")
    if isinstance(dist, dict):
        known = {int(u["rank"]) for u in unreadable if u.get("rank") is not None}
        present = set(dist.get("ranks") or [])
        dist["missing_ranks"] = sorted((set(dist.get("missing_ranks") or []) | known) - present)


class Matching(NamedTuple):
    """A job's collectives matched across its ranks (:func:`matching`)."""

    records: dict[int, list[dict[str, Any]]]  # each rank's, on one clock where applied
    instances: Instances
    warnings: list[str]
    clock: dict[str, Any]


def matching(ranks: Sequence[RankReport]) -> Matching:
    """The ranks' collective records (on one clock where the data support it), matched."""
    records = {r.rank: r.collectives for r in ranks}
    clock = clocks.estimate(records)
    if clock["applied"]:
        records = clocks.corrected(records, clock["offsets_us"])
    instances, warnings = match_collectives(records)
    return Matching(records, instances, warnings, clock)


def matched(ranks: list[RankReport]) -> tuple[dict[int, list[dict[str, Any]]], Instances]:
    """The ranks' collective records (clock-corrected where applied) and their instances."""
    got = matching(ranks)
    return got.records, got.instances


def _distributed(ranks: list[RankReport], got: Matching | None = None) -> dict[str, Any]:
    """The ``distributed`` section of a job: its ranks' collectives matched into instances
    (``got``: that matching, when the caller has it already)."""
    records, instances, warnings, clock = got if got is not None else matching(ranks)
    late = [{**s, **straggler_why(int(s["rank"]), ranks)} for s in stragglers(instances)]
    if late:
        worst = worst_arrivals(records, instances, [int(s["rank"]) for s in late])
        late = [{**s, "worst": worst.get(int(s["rank"]))} for s in late]
    notes = list(warnings) + window_notes(ranks, instances)
    return distributed_section(ranks, instances, late, notes, clock=clock)


__all__ = [
    "Matching",
    "matched",
    "matching",
    "merge",
    "note_unreadable",
    "rank_report",
]
