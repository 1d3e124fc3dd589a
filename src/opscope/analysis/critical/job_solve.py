"""The job's critical path solved from the ranks' contractions (:mod:`.contract`).

Each rank sends a :class:`RankSummary`: its interfaces' times and steps, which of them are the
arrival and mid node of each matched collective, and its contracted edges (of the whole window
and of the steps' own edges).  :func:`job_section` joins the summaries at the collectives as
:mod:`.job` joins the ranks' graphs (a barrier per instance that two or more ranks hold:
each member's arrival -> the barrier -> each member's mid, of no weight), solves the longest
path, and asks ``expand`` for the path's pieces on each rank it crosses.  Locally ``expand``
runs in this process (:func:`opscope.analysis.critical.job.job_paths`); on a cluster, on the
workers (:mod:`opscope.analysis.cluster`): the coordinator never holds a rank's events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opscope.analysis.critical.contract import ANY, NLAB, Contracted, Contraction, cut_nodes
from opscope.analysis.critical.graph import LABELS, Graph
from opscope.analysis.critical.longest import longest_paths, paths_to
from opscope.analysis.critical.path import Segments, longest_edges, longest_per_step
from opscope.analysis.critical.section import (
    METHOD,
    TOP,
    _us,
    bound_by_us,
    no_longer,
    projection_answer,
)
from opscope.trace.arrays import unique_ints


@dataclass(frozen=True)
class RankSummary:
    """One rank's part of the job path: its graph's size, each interface's ``time`` and
    ``step``, ``joins`` (``{instance: (arrival's interface, mid's interface)}``) and the
    contracted edges of the window (``full``) and of the steps (``steps``)."""

    rank: int
    n_nodes: int
    n_edges: int
    time: np.ndarray
    step: np.ndarray
    joins: dict[int, tuple[int, int]]
    full: Contracted
    steps: Contracted

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "n_nodes": self.n_nodes,
            "n_edges": self.n_edges,
            "time": self.time,
            "step": self.step,
            "joins": {int(k): [int(a), int(b)] for k, (a, b) in self.joins.items()},
            "full": self.full.to_dict(),
            "steps": self.steps.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankSummary:
        return cls(
            rank=int(d["rank"]),
            n_nodes=int(d["n_nodes"]),
            n_edges=int(d["n_edges"]),
            time=np.asarray(d["time"], dtype=np.int64),
            step=np.asarray(d["step"], dtype=np.int64),
            joins={int(k): (int(v[0]), int(v[1])) for k, v in d["joins"].items()},
            full=Contracted.from_dict(d["full"]),
            steps=Contracted.from_dict(d["steps"]),
        )


def interface_nodes(part: Graph, joins: Mapping[int, tuple[int, int]]) -> np.ndarray:
    """A rank graph's interfaces: each matched instance's arrival and mid node, and the cuts
    at the arrivals' times (:func:`~opscope.analysis.critical.contract.cut_nodes`)."""
    ends = np.asarray([n for pair in joins.values() for n in pair], dtype=np.int64)
    arrivals = np.asarray([a for a, _m in joins.values()], dtype=np.int64)
    cuts = cut_nodes(part, part.time[arrivals])
    out: np.ndarray = unique_ints(np.concatenate([ends, cuts]))
    return out


def summarise(
    part: Graph,
    weight: np.ndarray,
    node_step: np.ndarray,
    joins: Mapping[int, tuple[int, int]],
    *,
    steps: bool = True,
) -> tuple[RankSummary, Contraction]:
    """A rank's summary and the contraction behind it (kept for :meth:`Contraction.expand`):
    ``part`` is the rank's graph as the job weighs it (``weight``), ``joins`` each matched
    instance's ``(arrival node, mid node)``; ``steps=False`` leaves the steps' edges out (a
    what-if needs the window only)."""
    interfaces = interface_nodes(part, joins)
    con = Contraction(part, weight, node_step, interfaces)
    pos = {int(n): i for i, n in enumerate(interfaces.tolist())}
    summary = RankSummary(
        rank=int(part.rank),
        n_nodes=part.n_nodes,
        n_edges=part.n_edges,
        time=part.time[interfaces].astype(np.int64),
        step=node_step[interfaces].astype(np.int64),
        joins={int(k): (pos[int(a)], pos[int(m)]) for k, (a, m) in joins.items()},
        full=con.contract(steps=False),
        steps=con.contract(steps=True) if steps else _no_edges(),
    )
    con.release()
    return summary, con


def _no_edges() -> Contracted:
    z = np.zeros(0, dtype=np.int64)
    return Contracted(z, z, z, np.zeros((0, NLAB), np.int64), z, z, z, z)


@dataclass
class _Joined:
    """The summaries' contracted graph, joined at the collectives: node ``time``, ``step``,
    ``rank``; edge ``src``, ``dst``, ``weight`` (what the search compares, the contracted
    edges' weight), ``by_label`` (ns; its sum per edge is the edge's time, :attr:`ns`),
    ``owner`` (the rank whose contracted edge it is, -1 a join edge) and ``local`` (its index
    there); the instance of each barrier (barrier nodes from ``first_barrier`` on)."""

    time: np.ndarray
    step: np.ndarray
    rank: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    by_label: np.ndarray
    owner: np.ndarray
    local: np.ndarray
    barrier_inst: list[int] = field(default_factory=list)
    first_barrier: int = 0
    join_edges: int = 0
    base: dict[int, int] = field(default_factory=dict)  # each rank's first node
    edge_base: dict[int, int] = field(default_factory=dict)  # each rank's first edge

    @property
    def ns(self) -> np.ndarray:
        """Each edge's time in ns."""
        out: np.ndarray = self.by_label.sum(axis=1) if len(self.by_label) else self.weight * 0
        return out


def _joined(
    summaries: Sequence[RankSummary], members: Sequence[Sequence[int]], steps: bool
) -> _Joined:
    """The contracted graph of ``summaries`` (the window's edges, or the steps' with
    ``steps``), a barrier per instance held by two or more ranks (``members``: each instance's
    ranks, in the matching's order)."""
    times, nsteps, ranks = [], [], []
    src, dst, wt, lab, owner, local = [], [], [], [], [], []
    base: dict[int, int] = {}
    edge_base: dict[int, int] = {}
    n = e = 0
    for s in summaries:
        c = s.steps if steps else s.full
        base[s.rank] = n
        edge_base[s.rank] = e
        k = len(s.time)
        times.append(s.time)
        nsteps.append(s.step)
        ranks.append(np.full(k, s.rank, dtype=np.int64))
        n += k
        m = len(c)
        e += m
        from_any, to_any = c.src == ANY, c.dst == ANY
        a = np.where(from_any, 0, c.src + base[s.rank])
        b = np.where(to_any, 0, c.dst + base[s.rank])
        na, nb = int(from_any.sum()), int(to_any.sum())
        a[from_any] = n + np.arange(na)
        b[to_any] = n + na + np.arange(nb)
        times += [c.t_first[from_any], c.t_last[to_any]]
        nsteps += [c.step[from_any], c.step[to_any]]
        ranks.append(np.full(na + nb, s.rank, dtype=np.int64))
        n += na + nb
        src.append(a)
        dst.append(b)
        wt.append(c.weight)
        lab.append(c.by_label)
        owner.append(np.full(m, s.rank, dtype=np.int64))
        local.append(np.arange(m, dtype=np.int64))
    node_step = np.concatenate(nsteps) if nsteps else np.zeros(0, np.int64)
    by_rank = {s.rank: s for s in summaries}
    jsrc: list[int] = []
    jdst: list[int] = []
    barrier_inst: list[int] = []
    barrier_step: list[int] = []
    for k, held in enumerate(members):
        mem = [
            (base[r] + by_rank[r].joins[k][0], base[r] + by_rank[r].joins[k][1])
            for r in held
            if r in by_rank and k in by_rank[r].joins
        ]
        if len(mem) < 2:
            continue
        bar = n + len(barrier_inst)
        barrier_inst.append(k)
        barrier_step.append(int(node_step[mem[0][0]]))
        for arrival, mid in mem:
            jsrc += [arrival, bar]
            jdst += [bar, mid]
    nb, ne = len(barrier_inst), len(jsrc)
    return _Joined(
        time=np.concatenate([*times, np.zeros(nb, np.int64)]).astype(np.int64),
        step=np.concatenate([node_step, np.asarray(barrier_step, np.int64)]).astype(np.int64),
        rank=np.concatenate([*ranks, np.full(nb, -1, np.int64)]).astype(np.int64),
        src=np.concatenate([*src, np.asarray(jsrc, np.int64)]).astype(np.int64),
        dst=np.concatenate([*dst, np.asarray(jdst, np.int64)]).astype(np.int64),
        weight=np.concatenate([*wt, np.zeros(ne, np.int64)]).astype(np.int64),
        by_label=np.concatenate([*lab, np.zeros((ne, NLAB), np.int64)]).astype(np.int64),
        owner=np.concatenate([*owner, np.full(ne, -1, np.int64)]).astype(np.int64),
        local=np.concatenate([*local, np.full(ne, -1, np.int64)]).astype(np.int64),
        barrier_inst=barrier_inst,
        first_barrier=n,
        join_edges=ne,
        base=base,
        edge_base=edge_base,
    )


@dataclass(frozen=True)
class _Path:
    edges: np.ndarray
    length_ns: int


def _labels(j: _Joined, edges: np.ndarray) -> dict[str, int]:
    sums = j.by_label[edges].sum(axis=0) if len(edges) else np.zeros(NLAB, np.int64)
    return {name: int(sums[i]) for i, name in enumerate(LABELS)}


def _by_rank(j: _Joined, edges: np.ndarray) -> dict[str, float]:
    r = j.rank[j.src[edges]]
    ns = j.ns[edges]
    return {str(k): _us(int(ns[r == k].sum())) for k in unique_ints(r[r >= 0]).tolist()}


def _wall(j: _Joined, edges: np.ndarray) -> int:
    if not len(edges):
        return 0
    return int(j.time[j.dst[edges[-1]]] - j.time[j.src[edges[0]]])


def _solve(j: _Joined) -> _Path:
    edges, _n = longest_edges(j.src, j.dst, j.weight, len(j.time))
    return _Path(edges, int(j.ns[edges].sum()))


def _step_paths(j: _Joined) -> dict[int, _Path]:
    """Each step's path over the edges whose two ends lie in the step."""
    ns = j.ns
    per = longest_per_step(j.src, j.dst, j.weight, j.step)
    return {s: _Path(e, int(ns[e].sum())) for s, (e, _n) in per.items()}


def window_length(summaries: Sequence[RankSummary], members: Sequence[Sequence[int]]) -> int:
    """The job path's length (ns) over the window, from the summaries."""
    return _solve(_joined(sorted(summaries, key=lambda s: s.rank), members, steps=False)).length_ns


def projected_length(
    solved: WindowSolution, new: Mapping[int, RankSummary], members: Sequence[Sequence[int]]
) -> int:
    """The job path's length (ns) over the window with ``new``'s ranks in place of the solved
    ones: :func:`window_length` of those summaries, made from the solved graph by swapping the
    changed ranks' contracted edges for their new ones (their interfaces and joins are the
    same: a fix changes weights; the edges to and from outside the window get nodes of their
    own at the end), so a projection costs a solve, not a rebuild of every rank's part.  A
    rank whose interfaces or joins differ makes it the rebuild."""
    whole, have = solved.joined, solved.summaries
    if not all(
        r in have and len(have[r].time) == len(s.time) and have[r].joins == s.joins
        for r, s in new.items()
    ):
        return window_length([new.get(r, s) for r, s in have.items()], members)
    keep = np.ones(len(whole.src), dtype=bool)
    src, dst, weight, by_label = [], [], [], []
    n = len(whole.time)
    for r, s in new.items():
        at = whole.edge_base[r]
        keep[at : at + len(have[r].full)] = False
        c, base = s.full, whole.base[r]
        from_any, to_any = c.src == ANY, c.dst == ANY
        a = np.where(from_any, 0, c.src + base)
        b = np.where(to_any, 0, c.dst + base)
        na, nb = int(from_any.sum()), int(to_any.sum())
        a[from_any] = n + np.arange(na)
        b[to_any] = n + na + np.arange(nb)
        n += na + nb
        src.append(a)
        dst.append(b)
        weight.append(c.weight)
        by_label.append(c.by_label)
    lab = np.concatenate([whole.by_label[keep], *by_label]).astype(np.int64)
    edges, _n = longest_edges(
        np.concatenate([whole.src[keep], *src]).astype(np.int64),
        np.concatenate([whole.dst[keep], *dst]).astype(np.int64),
        np.concatenate([whole.weight[keep], *weight]).astype(np.int64),
        n,
    )
    return int(lab[edges].sum()) if len(edges) else 0


@dataclass(frozen=True)
class WindowSolution:
    """The summaries' window graph solved once: the graph, each node's last edge on its
    longest path (``pred``) and the job path's length."""

    joined: _Joined
    summaries: dict[int, RankSummary]
    pred: np.ndarray
    length_ns: int


def solve_window(
    summaries: Sequence[RankSummary], members: Sequence[Sequence[int]]
) -> WindowSolution:
    """The window's job path of the summaries (see :class:`WindowSolution`)."""
    whole = _joined(sorted(summaries, key=lambda s: s.rank), members, steps=False)
    dist, pred = longest_paths(whole.src, whole.dst, whole.weight, len(whole.time))
    length = 0
    if len(dist):
        end = int(np.argmax(dist))
        length = int(whole.ns[paths_to(np.asarray([end]), pred, whole.src)[0]].sum())
    return WindowSolution(whole, {s.rank: s for s in summaries}, pred, length)


def arrival_preds(
    solved: WindowSolution, rank: int
) -> tuple[list[tuple[int, int] | None], dict[int, int]]:
    """For ``rank``, the job path's last edge into each of its interfaces when it is one of
    the rank's own contracted edges (as ``(src, end)``, what
    :meth:`~opscope.analysis.critical.contract.Contraction.expand` takes), else None; and each
    instance's barrier: ``{instance: rank's arrival interface}`` for the instances joined."""
    whole, mine = solved.joined, solved.summaries.get(rank)
    if mine is None:
        return [], {}
    base, c = whole.base[rank], mine.full
    out: list[tuple[int, int] | None] = []
    for i in range(len(mine.time)):
        e = int(solved.pred[base + i])
        if e >= 0 and int(whole.owner[e]) == rank:
            k = int(whole.local[e])
            out.append((int(c.src[k]), int(c.end[k])))
        else:
            out.append(None)
    joined = set(whole.barrier_inst)
    return out, {k: a for k, (a, _m) in mine.joins.items() if k in joined}


def job_projection(
    base: Sequence[RankSummary],
    new: Sequence[RankSummary],
    members: Sequence[Sequence[int]],
    what: tuple[str, Sequence[tuple[str, float]]],
) -> dict[str, Any]:
    """A job what-if's answer (:func:`~opscope.analysis.critical.section.projection_answer`,
    with ``by_rank_us`` of the projected path): the job path of ``base`` and of ``new`` (the
    summaries with the changes made); ``what``: the spec and its changes."""
    before = sorted(base, key=lambda s: s.rank)
    after = sorted(new, key=lambda s: s.rank)
    b_whole, n_whole = _joined(before, members, steps=False), _joined(after, members, steps=False)
    spec, changes = what
    b, n = _solve(b_whole), _solve(n_whole)
    graph_of_n = n_whole
    if no_longer(b, n, changes) is b:
        n, graph_of_n = b, b_whole
    b_steps = _step_paths(_joined(before, members, steps=True))
    n_steps = _step_paths(_joined(after, members, steps=True))
    n_steps = {
        k: no_longer(b_steps[k], p, changes) if k in b_steps else p for k, p in n_steps.items()
    }
    answer = projection_answer(
        spec,
        changes,
        paths=(b, n),
        steps=(b_steps, n_steps),
        by_label=_labels(graph_of_n, n.edges),
    )
    answer["by_rank_us"] = _by_rank(graph_of_n, n.edges)
    return answer


@dataclass(frozen=True)
class Chunk:
    """One run of the path on one rank, expanded: its ``segments`` (the report's dicts, or
    :class:`~opscope.analysis.critical.path.Segments`) and ``top`` (its pieces summed per
    label and name, :meth:`~opscope.analysis.critical.path.Pieces.top`)."""

    segments: Sequence[dict[str, Any]]
    top: list[dict[str, Any]]


Run = list[tuple[int, int]]
"""A run of contracted edges on one rank, each as :meth:`Contraction.expand` takes it:
``(its src: an interface's position or ANY, its path's last node)``."""
Expand = Callable[[dict[int, list[Run]]], dict[int, list[Chunk]]]
"""``expand({rank: [each of its runs]})`` -> ``{rank: [Chunk per run]}``."""


def _chunks(
    j: _Joined, edges: np.ndarray, summaries: Mapping[int, RankSummary]
) -> list[tuple[int, Run]]:
    """The path's runs on one rank, in order: ``(rank, its contracted edges)``."""
    if not len(edges):
        return []
    r = j.rank[j.src[edges]]
    out = []
    for chunk in np.split(edges, np.flatnonzero(np.diff(r)) + 1):
        rank = int(j.rank[j.src[chunk[0]]])
        own = chunk[j.owner[chunk] >= 0]
        if rank >= 0 and len(own):
            c = summaries[rank].full
            local = j.local[own]
            out.append((rank, list(zip(c.src[local].tolist(), c.end[local].tolist(), strict=True))))
    return out


def _segments(
    j: _Joined, edges: np.ndarray, summaries: Mapping[int, RankSummary], expand: Expand
) -> tuple[Sequence[Any], list[Any]]:
    runs = _chunks(j, edges, summaries)
    asked: dict[int, list[Run]] = {}
    for rank, local in runs:
        asked.setdefault(rank, []).append(local)
    got = expand(asked)
    taken = dict.fromkeys(got, 0)
    chunks: list[Chunk] = []
    for rank, _local in runs:
        chunks.append(got[rank][taken[rank]])
        taken[rank] += 1
    if all(isinstance(c.segments, Segments) for c in chunks):
        segs: Sequence[Any] = Segments.of_blocks(
            [b for c in chunks for b in c.segments.blocks]  # type: ignore[attr-defined]
        )
    else:
        segs = [d for c in chunks for d in c.segments]
    return segs, [c.top for c in chunks]


def _top(tops: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The runs' tops summed per (label, name) over the ranks, biggest first."""
    agg: dict[tuple[str, str | None], list[float]] = {}
    for top in tops:
        for t in top:
            a = agg.setdefault((t["label"], t["name"]), [0.0, 0])
            a[0] += t["dur_us"]
            a[1] += t["pieces"]
    rows = sorted(agg.items(), key=lambda kv: (-kv[1][0], kv[0][0], str(kv[0][1])))[:TOP]
    return [
        {"label": lab, "name": name, "dur_us": round(v[0], 3), "pieces": int(v[1])}
        for (lab, name), v in rows
    ]


def _jumps(j: _Joined, edges: np.ndarray, instances: Sequence[Mapping[str, Any]]) -> list[Any]:
    out: list[dict[str, Any]] = []
    for i in np.flatnonzero(j.dst[edges] >= j.first_barrier).tolist():
        if i + 1 >= len(edges):
            continue
        inst = instances[j.barrier_inst[int(j.dst[edges[i]]) - j.first_barrier]]
        out.append(
            {
                "collective": inst.get("name"),
                "pg": inst.get("pg"),
                "seq": inst.get("seq"),
                "from_rank": int(j.rank[j.src[edges[i]]]),
                "to_rank": int(j.rank[j.dst[edges[i + 1]]]),
                "last_rank": inst.get("last_rank"),
            }
        )
    return out


def job_section(
    summaries: Sequence[RankSummary],
    instances: Sequence[Mapping[str, Any]],
    members: Sequence[Sequence[int]],
    expand: Expand,
) -> dict[str, Any]:
    """The job's ``critical_path`` section from the ranks' summaries (``members``: each
    instance's ranks in the matching's order); raises
    :class:`~opscope.analysis.critical.longest.CycleError` when the joined graph has a
    cycle."""
    summaries = sorted(summaries, key=lambda s: s.rank)
    whole = _joined(summaries, members, steps=False)
    path = _solve(whole)
    stepj = _joined(summaries, members, steps=True)
    per_step = _step_paths(stepj)
    segs, tops = _segments(whole, path.edges, {s.rank: s for s in summaries}, expand)
    e = path.edges
    return {
        "scope": "job",
        "ranks": [s.rank for s in summaries],
        "length_us": _us(path.length_ns),
        "wall_us": _us(_wall(whole, e)),
        "bound_by_us": bound_by_us(_labels(whole, e)),
        "by_rank_us": _by_rank(whole, e),
        "steps": [
            {
                "step": s,
                "rank": None,
                "length_us": _us(p.length_ns),
                "wall_us": _us(_wall(stepj, p.edges)),
                "bound_by_us": bound_by_us(_labels(stepj, p.edges)),
                "by_rank_us": _by_rank(stepj, p.edges),
            }
            for s, p in sorted(per_step.items())
        ],
        "segments": segs,
        "jumps": _jumps(whole, e, instances),
        "top": _top(tops),
        "nodes": sum(s.n_nodes for s in summaries) + len(whole.barrier_inst),
        "edges": sum(s.n_edges for s in summaries) + whole.join_edges,
        "method": METHOD + "; ranks joined at each matched collective",
    }


__all__ = [
    "Chunk",
    "Expand",
    "RankSummary",
    "Run",
    "WindowSolution",
    "arrival_preds",
    "interface_nodes",
    "job_projection",
    "job_section",
    "projected_length",
    "solve_window",
    "summarise",
    "window_length",
]
