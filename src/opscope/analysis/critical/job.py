"""The job's critical path: the ranks' graphs joined at their collectives.

Each rank's graph (:mod:`.graph`) splits a collective's first work at the last rank's arrival
(its wait, from the job's matching, :mod:`opscope.analysis.collective_match`).  Here the
ranks' graphs are put side by side and every matched instance gets a *barrier* node: each
member's arrival (the start of its first work) -> the barrier -> each member's mid node, all
of no weight, while the members' waits weigh nothing either.  A collective's transfer then
begins, on every rank, after the longest chain to any rank's arrival: the path runs through
the rank that arrived last and jumps from it to the transfer (a ``jumps`` entry), never
through the others' waits.  Times stay on each rank's clock: the join edges carry no time, so
no clock alignment enters the length.

The joined graph is never built whole: each rank's graph is contracted to the nodes the join
touches (:mod:`.contract`) and the contractions are joined and solved (:mod:`.job_solve`),
here or on a cluster; the path's pieces, the job findings' savings (:mod:`.job_savings`) and
what-ifs come from the same contractions.

The rank sections of a job are computed on the same graphs with the waits weighted
(``wait_for_peer``), since a rank alone cannot see past its wait.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.collective_match import member_waits
from opscope.analysis.critical.contract import Contraction
from opscope.analysis.critical.graph import SPLIT, Graph
from opscope.analysis.critical.job_savings import (
    Change,
    changed_weights,
    collective_rows,
    job_finding_savings,
)
from opscope.analysis.critical.job_solve import (
    Chunk,
    RankSummary,
    Run,
    interface_nodes,
    job_projection,
    job_section,
    summarise,
)
from opscope.analysis.critical.longest import CycleError
from opscope.analysis.critical.path import Path, Segments, pieces
from opscope.analysis.critical.section import (
    _us,
    node_steps,
    parse_what_if,
    rank_graph,
    scaled_weights,
    section,
)
from opscope.trace.arrays import unique_ints

if TYPE_CHECKING:
    from opscope.trace.model import Trace


def first_works(trace: Trace, recs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """The row of each collective record's first work event: the earliest start among its
    ``work_event_ids`` (ties: the first in its list; -1 where none is in the trace).  One id
    lookup for all the records (a job of 10^5 collectives on 64 ranks asks for 6.4M)."""
    out = np.full(len(recs), -1, dtype=np.int64)
    lists = [rec.get("work_event_ids") or [] for rec in recs]
    lens = np.fromiter((len(w) for w in lists), dtype=np.int64, count=len(lists))
    if not lens.sum():
        return out
    ids = np.fromiter((int(w) for ws in lists for w in ws), dtype=np.int64, count=int(lens.sum()))
    idx = trace.index
    rows = idx.rows_of(ids)
    owner = np.repeat(np.arange(len(recs), dtype=np.int64), lens)
    ok = rows >= 0
    rows, owner = rows[ok], owner[ok]
    order = np.lexsort((np.arange(len(rows)), idx.start[rows], owner))
    first = np.ones(len(order), dtype=bool)
    first[1:] = owner[order[1:]] != owner[order[:-1]]
    pick = order[first]
    out[owner[pick]] = rows[pick]
    return out


def _waits(
    traces: Mapping[int, Trace],
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
) -> tuple[dict[int, dict[int, int]], list[dict[int, int]]]:
    """Per rank ``{first work row: wait ns}``, and per instance ``{rank: first work row}``."""
    members = member_waits(records, instances)
    asked: dict[int, list[int]] = {r: [] for r in traces}  # per rank: record positions
    for mem in members:
        for rank, pos, _wait in mem:
            if rank in asked:
                asked[rank].append(pos)
    rows = {
        r: iter(first_works(traces[r], [records[r][p] for p in asked[r]]).tolist()) for r in traces
    }
    waits: dict[int, dict[int, int]] = {r: {} for r in traces}
    works: list[dict[int, int]] = []
    for mem in members:  # in the order the records were asked for: each rank's rows in turn
        got: dict[int, int] = {}
        for rank, _pos, wait_us in mem:
            if rank not in rows:
                continue
            row = next(rows[rank])
            if row < 0:
                continue
            got[rank] = row
            waits[rank][row] = round(wait_us * 1000.0)
        works.append(got)
    return waits, works


def _prepare(
    traces: Mapping[int, Trace],
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
    steps: tuple[int, int] | None,
) -> tuple[list[int], list[Graph], list[dict[int, int]]]:
    ranks = sorted(traces)
    waits, works = _waits(traces, records, instances)
    graphs = [rank_graph(traces[r], steps, records.get(r, ()), waits[r]) for r in ranks]
    return ranks, graphs, works


def job_what_if(
    traces: Mapping[int, Trace],
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
    spec: str,
    steps: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The job path recomputed with ``spec``'s changes on every rank (as
    :func:`opscope.analysis.critical.section.what_if` for one rank): each rank contracted
    with its weights scaled, the summaries solved again."""
    changes = parse_what_if(spec)
    _ranks, graphs, works = _prepare(traces, records, instances, steps)
    base: list[RankSummary] = []
    new: list[RankSummary] = []
    for gr in graphs:
        mine = {k: got[gr.rank] for k, got in enumerate(works) if gr.rank in got}
        before, after = what_if_summaries(traces[gr.rank], gr, mine, changes)
        base.append(before)
        new.append(after)
    return job_projection(base, new, [list(got) for got in works], (spec, changes))


def what_if_summaries(
    trace: Trace, part: Graph, works: Mapping[int, int], changes: Sequence[tuple[str, float]]
) -> tuple[RankSummary, RankSummary]:
    """A rank's summaries for a job what-if (``part``: its graph with its waits; ``works`` as
    :func:`rank_summary` takes them): as the job weighs the graph, and with ``changes`` made
    to its weights (:func:`~opscope.analysis.critical.section.scaled_weights`; a collective's
    wait weighs nothing in either).  A cluster's worker computes them for its rank."""
    node_step = node_steps(trace.index, part)
    joins = rank_joins(part, works)
    scaled = np.where(part.kind == SPLIT, 0, scaled_weights(trace.index, part, changes))
    return (
        summarise(part, job_weights(part), node_step, joins)[0],
        summarise(part, scaled, node_step, joins)[0],
    )


@dataclass(frozen=True)
class JobPaths:
    """The job's path section (None for fewer than two ranks), each rank's own section, and
    what measures the job's findings against the job path (``measure(findings)`` ->
    ``step_savings_us`` of each, :func:`.job_savings.job_finding_savings`; None where there
    is no job path)."""

    job: dict[str, Any] | None
    per_rank: dict[int, dict[str, Any]]
    measure: Callable[[Sequence[Mapping[str, Any]]], list[float | None]] | None


def job_critical_path(
    traces: Mapping[int, Trace],
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
    steps: tuple[int, int] | None = None,
) -> tuple[dict[str, Any] | None, dict[int, dict[str, Any]]]:
    """``(job section, {rank: rank section})`` of a job's ranks (each rank's trace, its
    collective records and the matched instances); the job section is None for fewer than
    two ranks, or with a warning when the joined graph is inconsistent (a cycle)."""
    paths = job_paths(traces, records, instances, steps)
    return paths.job, paths.per_rank


def rank_joins(graph: Graph, works: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """``{instance: (arrival node, mid node)}`` of a rank's graph (``works``: ``{instance:
    row of its first work}``), for the instances whose work has both nodes."""
    mids = {int(graph.row[v]): int(v) for v in np.flatnonzero(graph.role == 2).tolist()}
    rows = np.asarray([r for r in works.values() if r in mids], dtype=np.int64)
    starts: dict[int, int] = {}
    first = np.flatnonzero((graph.role == 0) & np.isin(graph.row, rows))
    for node, row in zip(first.tolist(), graph.row[first].tolist(), strict=True):
        starts.setdefault(int(row), int(node))
    return {k: (starts[r], mids[r]) for k, r in works.items() if r in mids and r in starts}


def job_weights(part: Graph) -> np.ndarray:
    """A rank's graph's weights as the job weighs them: a collective's wait carries none (the
    job path goes through the rank that arrived last instead)."""
    out: np.ndarray = np.where(part.kind == SPLIT, 0, part.weight)
    return out


def rank_summary(
    trace: Trace, part: Graph, works: Mapping[int, int]
) -> tuple[RankSummary, Contraction]:
    """A rank's :class:`~.job_solve.RankSummary` (``part``: its graph with the untraced step
    loop weighed; ``works``: ``{instance: row of its first work}``) and its contraction."""
    return summarise(
        part, job_weights(part), node_steps(trace.index, part), rank_joins(part, works)
    )


def rank_contraction(trace: Trace, part: Graph, works: Mapping[int, int]) -> Contraction:
    """The contraction :func:`rank_summary` summarises, not yet contracted: what a cluster's
    worker expands the job path's runs with, or contracts again with a fix made."""
    joins = rank_joins(part, works)
    return Contraction(
        part, job_weights(part), node_steps(trace.index, part), interface_nodes(part, joins)
    )


def expand_runs(
    trace: Trace, part: Graph, contraction: Contraction, runs: Sequence[Run]
) -> list[Chunk]:
    """The job path's runs on one rank, expanded to the rank's pieces."""
    idx = trace.index
    w = job_weights(part)
    out = []
    for run in runs:
        p = pieces(part, Path(contraction.expand(run), 0, {}), w)
        out.append(Chunk(Segments.of_blocks([(p, idx)]), p.top(idx, len(p))))
    return out


def recontracted(
    trace: Trace,
    part: Graph,
    contraction: Contraction,
    *,
    records: Sequence[Mapping[str, Any]],
    works: Mapping[int, int],
    changes: Sequence[Change],
) -> list[RankSummary | None]:
    """The rank's summary (the window only) with each of ``changes`` made to its weights
    (None where one changes nothing), for the job findings' savings; ``works`` as
    :func:`rank_summary` takes them."""
    weight = job_weights(part)
    node_step = node_steps(trace.index, part)
    joins = rank_joins(part, works)
    out: list[RankSummary | None] = []
    for change in changes:
        rows = None
        if change["kind"] == "scale_comm":
            rows = collective_rows(trace, records, change["collective"], change["pg"])
        w = changed_weights(part, weight, contraction, change, rows)
        out.append(None if w is None else summarise(part, w, node_step, joins, steps=False)[0])
    return out


def job_paths(
    traces: Mapping[int, Trace],
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
    steps: tuple[int, int] | None = None,
) -> JobPaths:
    """:func:`job_critical_path`, with what measures the job's findings against the job path.
    The job section is solved from the ranks' contractions (:mod:`.job_solve`), as a cluster
    run solves it."""
    ranks, graphs, works = _prepare(traces, records, instances, steps)
    per_rank = {r: section(traces[r], g) for r, g in zip(ranks, graphs, strict=True)}
    if len(ranks) < 2:
        return JobPaths(None, per_rank, None)
    summaries: list[RankSummary] = []
    held: dict[int, tuple[Graph, Contraction]] = {}
    mine: dict[int, dict[int, int]] = {}
    for gr in graphs:
        part = gr
        mine[part.rank] = {k: got[part.rank] for k, got in enumerate(works) if part.rank in got}
        summary, con = rank_summary(traces[part.rank], part, mine[part.rank])
        summaries.append(summary)
        held[part.rank] = (part, con)

    def expand(asked: dict[int, list[Run]]) -> dict[int, list[Chunk]]:
        return {r: expand_runs(traces[r], *held[r], runs) for r, runs in asked.items()}

    def recontract(asked: dict[int, list[Change]]) -> dict[int, list[RankSummary | None]]:
        return {
            r: recontracted(
                traces[r], *held[r], records=records.get(r, ()), works=mine[r], changes=changes
            )
            for r, changes in asked.items()
        }

    members = [list(got) for got in works]
    try:
        section_ = job_section(summaries, instances, members, expand)
    except CycleError as exc:
        return JobPaths(cycle_section(exc), per_rank, None)

    def measure(findings: Sequence[Mapping[str, Any]]) -> list[float | None]:
        return job_finding_savings(summaries, members, instances, findings, recontract)

    return JobPaths(section_, per_rank, measure)


def cycle_section(exc: CycleError) -> dict[str, Any]:
    """The job section when the joined graph has a cycle."""
    return {
        "scope": "job",
        "length_us": None,
        "warnings": [f"no job path: the ranks' collectives do not line up ({exc})"],
    }


def _by_rank(job: Graph, path: Path, node_rank: np.ndarray) -> dict[str, float]:
    e = path.edges
    r = node_rank[job.src[e]]
    out: dict[str, float] = {}
    for rank in unique_ints(r[r >= 0]).tolist():
        out[str(rank)] = _us(int(job.weight[e[r == rank]].sum()))
    return out


__all__ = [
    "JobPaths",
    "cycle_section",
    "expand_runs",
    "job_critical_path",
    "job_paths",
    "job_weights",
    "job_what_if",
    "rank_contraction",
    "rank_joins",
    "rank_summary",
    "recontracted",
    "what_if_summaries",
]
