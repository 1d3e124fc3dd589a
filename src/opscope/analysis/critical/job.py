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

The rank sections of a job are computed on the same graphs with the waits weighted
(``wait_for_peer``), since a rank alone cannot see past its wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.collective_match import instance_members
from opscope.analysis.critical.graph import CPU, JOIN, NONE, SPLIT, THREAD, Graph
from opscope.analysis.critical.longest import CycleError
from opscope.analysis.critical.path import Path, Pieces, Segments, pieces, solve, step_paths
from opscope.analysis.critical.section import (
    METHOD,
    TOP,
    _us,
    _wall,
    bound_by_us,
    parse_what_if,
    projection,
    rank_graph,
    scaled_weights,
    section,
)

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex
    from opscope.trace.model import Trace


def _first_work(trace: Trace, rec: Mapping[str, Any]) -> int:
    work = rec.get("work_event_ids") or []
    if not work:
        return -1
    idx = trace.index
    rows = idx.rows_of(np.asarray([int(w) for w in work], dtype=np.int64))
    rows = rows[rows >= 0]
    if not len(rows):
        return -1
    return int(rows[np.argmin(idx.start[rows])])


def _waits(
    traces: Mapping[int, Trace],
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
) -> tuple[dict[int, dict[int, int]], list[dict[int, int]]]:
    """Per rank ``{first work row: wait ns}``, and per instance ``{rank: first work row}``."""
    members = instance_members(records, instances)
    waits: dict[int, dict[int, int]] = {r: {} for r in traces}
    works: list[dict[int, int]] = []
    for inst, mem in zip(instances, members, strict=True):
        got: dict[int, int] = {}
        for rank, pos in mem.items():
            if rank not in traces:
                continue
            row = _first_work(traces[rank], records[rank][pos])
            if row < 0:
                continue
            got[rank] = row
            wait_us = (inst.get("wait_us") or {}).get(str(rank), 0.0) or 0.0
            waits[rank][row] = round(float(wait_us) * 1000.0)
        works.append(got)
    return waits, works


def _concat(graphs: Sequence[Graph]) -> tuple[Graph, np.ndarray, np.ndarray]:
    """One graph of several (node ids offset); the rank of each node and each graph's first
    node."""
    offs = np.cumsum([0] + [g.n_nodes for g in graphs])
    g = Graph(
        time=np.concatenate([x.time for x in graphs]),
        row=np.concatenate([x.row for x in graphs]),
        role=np.concatenate([x.role for x in graphs]),
        src=np.concatenate([x.src + o for x, o in zip(graphs, offs, strict=False)]),
        dst=np.concatenate([x.dst + o for x, o in zip(graphs, offs, strict=False)]),
        weight=np.concatenate([x.weight for x in graphs]),
        label=np.concatenate([x.label for x in graphs]),
        edge_row=np.concatenate([x.edge_row for x in graphs]),
        kind=np.concatenate([x.kind for x in graphs]),
        rank=-1,
    )
    ranks = np.concatenate([np.full(x.n_nodes, x.rank, dtype=np.int64) for x in graphs])
    return g, ranks, offs


@dataclass(frozen=True)
class Joined:
    """The ranks' graphs joined: ``graph`` (barrier nodes after the ranks' nodes, from
    ``first_barrier`` on), each node's rank and step, the instance of each barrier, and the
    ranks' own graphs (untraced step-loop time weighed) with their node offsets."""

    graph: Graph
    node_rank: np.ndarray
    node_step: np.ndarray
    barrier_inst: list[int]
    first_barrier: int
    parts: list[Graph]
    offsets: np.ndarray


def join(
    traces: Mapping[int, Trace], graphs: Sequence[Graph], works: Sequence[Mapping[int, int]]
) -> Joined:
    """One graph of the ranks' graphs, joined at every instance that two or more of them
    hold (``works``: per instance, ``{rank: row of its first work}``)."""
    parts = [_untraced_weighed(traces[gr.rank], gr) for gr in graphs]
    g, node_rank, offs = _concat(parts)
    mids: dict[tuple[int, int], int] = {}
    starts: dict[tuple[int, int], int] = {}
    for i, gr in enumerate(graphs):
        for node in np.flatnonzero(gr.role == 2).tolist():
            mids[(gr.rank, int(gr.row[node]))] = int(node + offs[i])
    for i, gr in enumerate(graphs):
        wanted = {row for (rk, row) in mids if rk == gr.rank}
        first = np.flatnonzero((gr.role == 0) & np.isin(gr.row, list(wanted)))
        for node, row in zip(first.tolist(), gr.row[first].tolist(), strict=True):
            starts.setdefault((gr.rank, row), int(node + offs[i]))
    src: list[int] = []
    dst: list[int] = []
    barrier_inst: list[int] = []
    barrier_first: list[int] = []
    n = g.n_nodes
    for k, got in enumerate(works):
        mem = [(r, row) for r, row in got.items() if (r, row) in mids and (r, row) in starts]
        if len(mem) < 2:
            continue
        b = n + len(barrier_inst)
        barrier_inst.append(k)
        barrier_first.append(starts[mem[0]])
        for key in mem:
            src += [starts[key], b]
            dst += [b, mids[key]]
    nb, ne = len(barrier_inst), len(src)
    job = Graph(
        time=np.concatenate([g.time, np.zeros(nb, dtype=np.int64)]),
        row=np.concatenate([g.row, np.full(nb, -1, dtype=np.int64)]),
        role=np.concatenate([g.role, np.full(nb, 3, dtype=np.int8)]),
        src=np.concatenate([g.src, np.asarray(src, dtype=np.int64)]),
        dst=np.concatenate([g.dst, np.asarray(dst, dtype=np.int64)]),
        weight=np.concatenate([np.where(g.kind == SPLIT, 0, g.weight), np.zeros(ne, np.int64)]),
        label=np.concatenate([g.label, np.full(ne, NONE, dtype=np.int64)]),
        edge_row=np.concatenate([g.edge_row, np.full(ne, -1, dtype=np.int64)]),
        kind=np.concatenate([g.kind, np.full(ne, JOIN, dtype=np.int64)]),
        rank=-1,
    )
    node_rank = np.concatenate([node_rank, np.full(nb, -1, dtype=np.int64)])
    # node steps: each rank's own; a barrier takes the step of its first member's arrival
    own = np.concatenate(
        [np.asarray(traces[gr.rank].index.step[gr.row], dtype=np.int64) for gr in graphs]
    )
    node_step = np.concatenate([own, own[np.asarray(barrier_first, dtype=np.int64)]])
    return Joined(job, node_rank, node_step, barrier_inst, n, parts, offs)


def joined_weights(
    traces: Mapping[int, Trace], joined: Joined, changes: Sequence[tuple[str, float]]
) -> np.ndarray:
    """The joined graph's weights with a what-if's changes applied on every rank."""
    per = [scaled_weights(traces[p.rank].index, p, changes) for p in joined.parts]
    w = np.concatenate([*per, np.zeros(joined.graph.n_edges - sum(len(x) for x in per), np.int64)])
    return np.where(joined.graph.kind == SPLIT, 0, w)


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
    :func:`opscope.analysis.critical.section.what_if` for one rank)."""
    changes = parse_what_if(spec)
    _ranks, graphs, works = _prepare(traces, records, instances, steps)
    joined = join(traces, graphs, works)
    g = joined.graph
    w = joined_weights(traces, joined, changes)
    answer, new = projection(g, joined.node_step, w, spec, changes)
    answer["by_rank_us"] = _by_rank(g, new, joined.node_rank)
    return answer


@dataclass(frozen=True)
class JobPaths:
    """The job's path section (None for fewer than two ranks), each rank's own section, and
    the joined graph the job section was solved on (None where there is none)."""

    job: dict[str, Any] | None
    per_rank: dict[int, dict[str, Any]]
    joined: Joined | None


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


def job_paths(
    traces: Mapping[int, Trace],
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
    steps: tuple[int, int] | None = None,
) -> JobPaths:
    """:func:`job_critical_path`, keeping the joined graph (for what-ifs and the job's
    findings' savings, :mod:`.job_savings`)."""
    ranks, graphs, works = _prepare(traces, records, instances, steps)
    per_rank = {r: section(traces[r], g) for r, g in zip(ranks, graphs, strict=True)}
    if len(ranks) < 2:
        return JobPaths(None, per_rank, None)
    joined = join(traces, graphs, works)
    job, node_rank = joined.graph, joined.node_rank
    try:
        path = solve(job)
        per_step = step_paths(job, joined.node_step)
    except CycleError as exc:
        failed = {
            "scope": "job",
            "length_us": None,
            "warnings": [f"no job path: the ranks' collectives do not line up ({exc})"],
        }
        return JobPaths(failed, per_rank, None)
    segs = _segments(job, path, traces, node_rank)
    jumps = _jumps(job, path, node_rank, (instances, joined.barrier_inst, joined.first_barrier))
    section_ = {
        "scope": "job",
        "ranks": ranks,
        "length_us": _us(path.length_ns),
        "wall_us": _us(_wall(job, path)),
        "bound_by_us": bound_by_us(path.by_label),
        "by_rank_us": _by_rank(job, path, node_rank),
        "steps": [
            {
                "step": s,
                "rank": None,
                "length_us": _us(p.length_ns),
                "wall_us": _us(_wall(job, p)),
                "bound_by_us": bound_by_us(p.by_label),
                "by_rank_us": _by_rank(job, p, node_rank),
            }
            for s, p in sorted(per_step.items())
        ],
        "segments": segs,
        "jumps": jumps,
        "top": _job_top(segs),
        "nodes": job.n_nodes,
        "edges": job.n_edges,
        "method": METHOD + "; ranks joined at each matched collective",
    }
    return JobPaths(section_, per_rank, joined)


def _untraced_weighed(trace: Trace, graph: Graph) -> Graph:
    """The graph with the step loop's untraced time weighed: on the thread that runs the
    profiler steps, a gap between two top-level events of one step counts as ``cpu`` (no
    event named).  A rank that arrives late at a collective because of work nobody traced
    (Python, I/O, a sleep) is what the others wait for; HTA, and the rank paths here, leave
    such gaps out."""
    idx = trace.index
    steps = np.flatnonzero(idx.kind.eq("step"))
    if not len(steps) or not graph.n_edges:
        return graph
    loop = np.unique(idx.thread[steps])
    srow, drow = graph.row[graph.src], graph.row[graph.dst]
    gap = (graph.kind == THREAD) & (graph.label == NONE)
    gap &= (
        np.isin(idx.thread[srow], loop) & (idx.step[srow] == idx.step[drow]) & (idx.step[srow] >= 0)
    )
    if not gap.any():
        return graph
    t = graph.time
    return replace(
        graph,
        weight=np.where(gap, t[graph.dst] - t[graph.src], graph.weight),
        label=np.where(gap, CPU, graph.label),
    )


def _by_rank(job: Graph, path: Path, node_rank: np.ndarray) -> dict[str, float]:
    e = path.edges
    r = node_rank[job.src[e]]
    out: dict[str, float] = {}
    for rank in np.unique(r[r >= 0]).tolist():
        out[str(rank)] = _us(int(job.weight[e[r == rank]].sum()))
    return out


def _job_top(segs: Segments) -> list[dict[str, Any]]:
    """The job path's pieces summed per (label, name) over the ranks, biggest first."""
    agg: dict[tuple[str, str | None], list[float]] = {}
    for parts, idx in segs.blocks:
        for t in parts.top(idx, len(parts)):
            a = agg.setdefault((t["label"], t["name"]), [0.0, 0])
            a[0] += t["dur_us"]
            a[1] += t["pieces"]
    rows = sorted(agg.items(), key=lambda kv: (-kv[1][0], kv[0][0], str(kv[0][1])))[:TOP]
    return [
        {"label": lab, "name": name, "dur_us": round(v[0], 3), "pieces": int(v[1])}
        for (lab, name), v in rows
    ]


def _segments(
    job: Graph,
    path: Path,
    traces: Mapping[int, Trace],
    node_rank: np.ndarray,
) -> Segments:
    """The job path's pieces, each run of one rank named through its rank's events."""
    e = path.edges
    r = node_rank[job.src[e]]
    blocks: list[tuple[Pieces, EventIndex]] = []
    if not len(e):
        return Segments.of_blocks(blocks)
    cut = np.flatnonzero(np.diff(r)) + 1
    for chunk in np.split(e, cut):
        rank = int(node_rank[job.src[chunk[0]]])
        if rank < 0:
            continue
        blocks.append((pieces(job, Path(chunk, 0, {}), rank_of_node=node_rank), traces[rank].index))
    return Segments.of_blocks(blocks)


def _jumps(
    job: Graph,
    path: Path,
    node_rank: np.ndarray,
    barriers: tuple[Sequence[Mapping[str, Any]], Sequence[int], int],
) -> list[dict[str, Any]]:
    """Where the path crosses ranks: at a collective's barrier, from the rank that arrived
    last to the rank whose transfer the path continues on."""
    instances, barrier_inst, first_barrier = barriers
    out: list[dict[str, Any]] = []
    e = path.edges
    for i in np.flatnonzero(job.dst[e] >= first_barrier).tolist():
        if i + 1 >= len(e):
            continue
        b = int(job.dst[e[i]])
        inst = instances[barrier_inst[b - first_barrier]]
        a, c = int(node_rank[job.src[e[i]]]), int(node_rank[job.dst[e[i + 1]]])
        out.append(
            {
                "collective": inst.get("name"),
                "pg": inst.get("pg"),
                "seq": inst.get("seq"),
                "from_rank": a,
                "to_rank": c,
                "last_rank": inst.get("last_rank"),
            }
        )
    return out


__all__ = [
    "JobPaths",
    "Joined",
    "job_critical_path",
    "job_paths",
    "job_what_if",
    "join",
    "joined_weights",
]
