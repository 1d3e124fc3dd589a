"""The report's ``critical_path`` section of one rank, what-if projections and finding savings.

``critical_path`` (one rank; a job's is built by :mod:`.job` with the same keys)::

    {"scope": "rank", "rank", "length_us", "wall_us", "bound_by_us": {label: us, ...},
     "steps": [{"step", "rank", "length_us", "wall_us", "bound_by_us"}],
     "segments": [{"rank", "label", "name", "event_id", "start_ns", "dur_us"}],
     "top": [{"label", "name", "dur_us", "pieces"}], "nodes", "edges", "method", "notes"}

``length_us`` is the whole window's path; ``wall_us`` the window's span (first to last event
on the path's clock), so ``wall_us - length_us`` is time no traced work accounts for.
``segments`` is every piece of the window's path in order; ``top`` sums them per (label, name).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from opscope.analysis.critical.fixes import (
    Fix,
    FixError,
    FixPart,
    capped_saving,
    collective_rows,
    fix_savings,
    fix_weights,
    part_of_name,
)
from opscope.analysis.critical.graph import LABELS, Graph, acyclic, build
from opscope.analysis.critical.model import INFERRED, UNTRACED
from opscope.analysis.critical.path import Path, Segments, pieces, solve, step_paths
from opscope.trace.arrays import unique_ints
from opscope.trace.heap import between_parts

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex
    from opscope.trace.model import Trace

TOP = 10
METHOD = (
    "longest path through the window's dependency graph (host call order, launches, device "
    "streams, syncs, cross-stream waits, collectives); see docs/critical-path.md"
)


def _us(ns: float) -> float:
    return round(float(ns) / 1000.0, 3)


def bound_by_us(by_label: Mapping[str, int]) -> dict[str, float]:
    """Every label's time in µs (labels in their fixed order)."""
    return {k: _us(by_label.get(k, 0)) for k in LABELS}


def host_links(trace: Trace, records: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """``{gloo range row: its host call's row}`` from a rank's collective records: the work
    of a CPU backend that runs on its own thread (a framework range, not the call itself)."""
    idx = trace.index
    out: dict[int, int] = {}
    for rec in records:
        work = rec.get("work_event_ids") or []
        call = rec.get("event_id")
        if not work or call is None:
            continue
        rows = idx.rows_of(np.asarray([int(call), *[int(w) for w in work]], dtype=np.int64))
        c = int(rows[0])
        for w in rows[1:].tolist():
            if w >= 0 and c >= 0 and w != c and idx.is_framework[w]:
                out[int(w)] = c
    return out


def rank_graph(
    trace: Trace,
    steps: tuple[int, int] | None,
    records: Sequence[Mapping[str, Any]] = (),
    waits: Mapping[int, int] | None = None,
) -> Graph:
    """The graph of one rank's window (kept on the index for the same window and waits).
    ``waits``: ``{row of a collective's first work: its wait in ns}`` (from a job's match)."""
    idx = trace.index
    key = f"critical.graph:{steps}:{hash(tuple(sorted((waits or {}).items())))}"
    rank = int(trace.meta.ranks[0]) if trace.meta.ranks else 0

    def make() -> Graph:
        window = idx.in_steps(steps) if steps is not None else None
        return acyclic(
            build(
                idx,
                window,
                comm_work=dict(waits or {}),
                host_links=host_links(trace, records),
                rank=rank,
            )
        )

    graph: Graph = idx.memo(key, make)
    return graph


def _wall(graph: Graph, path: Path) -> int:
    if not len(path.edges):
        return 0
    t = graph.time
    return int(t[graph.dst[path.edges[-1]]] - t[graph.src[path.edges[0]]])


def node_steps(idx: EventIndex, graph: Graph) -> np.ndarray:
    """The profiler step each node lies in (-1 none): by time, within the span of its rank's
    step marker (``ProfilerStep#N``), so that a step's own path is what bounded that span
    and accounts for its wall: device work that a step launched but that ran while the next
    step was on the host lies in the next step.  A node at the boundary of two steps lies in
    the step it ends (an end node) or begins (a start node).  Where a rank's step markers
    overlap (several threads or processes stepping at once), each node lies in its event's
    step, as the event table has it."""
    # a gather makes a fresh array (int32, as the index holds steps): written below, never a
    # view of the index's
    out: np.ndarray = np.asarray(idx.step[graph.row], dtype=np.int32)
    marks = np.flatnonzero(idx.kind.eq("step") & idx.is_framework & (idx.dur > 0))
    if not len(marks) or not graph.n_nodes:
        return out
    ranks = unique_ints(idx.rank[marks])
    # every node's rank, where the markers are of several ranks (a job's graph); one rank's
    # markers take every node of a one-rank graph without a column of its rank
    one_rank = len(ranks) == 1 and int(idx.rank.min()) == int(idx.rank.max())
    node_rank = None if one_rank else idx.rank[graph.row]
    t, role = graph.time, graph.role
    for rank in ranks.tolist():
        m = marks[idx.rank[marks] == rank]
        m = m[np.argsort(idx.start[m], kind="stable")]
        s0, s1, num = idx.start[m], idx.end[m], idx.step[m].astype(np.int64)
        if len(m) > 1 and bool((s0[1:] < s1[:-1]).any()):
            continue  # overlapping markers: by event
        for a in range(0, graph.n_nodes, _BLOCK):  # a block of nodes at a time
            if node_rank is None:
                nodes = np.arange(a, min(a + _BLOCK, graph.n_nodes))
            else:
                nodes = a + np.flatnonzero(node_rank[a : a + _BLOCK] == rank)
            tn = t[nodes]
            ends = role[nodes] == 1
            k = np.searchsorted(s0, tn, side="right") - 1
            k[ends] = np.searchsorted(s0, tn[ends], side="left") - 1
            ok = k >= 0
            kk = np.maximum(k, 0)
            ok &= np.where(ends, tn <= s1[kk], tn < s1[kk])
            out[nodes] = np.where(ok, num[kk], -1)
    return out


#: nodes taken at a time by :func:`node_steps`
_BLOCK = 1 << 16


def step_walls(idx: EventIndex) -> dict[int, int]:
    """Each profiler step's wall (ns): its step marker's span, the report's
    ``steps[].wall_us`` (the longest where a step has several markers)."""
    marks = np.flatnonzero(idx.kind.eq("step") & idx.is_framework)
    out: dict[int, int] = {}
    for num, d in zip(idx.step[marks].tolist(), idx.dur[marks].tolist(), strict=True):
        if num >= 0:
            out[int(num)] = max(out.get(int(num), 0), int(d))
    return out


def explained_share(by_label: Mapping[str, int], wall_ns: int) -> float | None:
    """The share of a wall that the path explains with traced work: its length less its
    ``untraced`` time, over the wall (None without a wall)."""
    if wall_ns <= 0:
        return None
    traced = sum(v for k, v in by_label.items() if k != "untraced")
    return round(min(1.0, traced / wall_ns), 4)


def _notes(graph: Graph, path: Path) -> list[str]:
    out: list[str] = list(graph.notes)
    comm = path.by_label.get("gpu_comm", 0)
    waits_known = bool((graph.role == 2).any())
    if path.length_ns and comm > 0.5 * path.length_ns and not waits_known:
        out.append(
            "communication is most of the path, and a rank alone cannot tell a collective's "
            "wait for its peers from its transfer: analyse the job's folder of ranks to split "
            "them (wait_for_peer) and follow the path into the rank that arrived last"
        )
    wall = _wall(graph, path)
    if wall and path.length_ns < 0.5 * wall:
        out.append(
            f"the path accounts for {100 * path.length_ns / wall:.0f}% of the window: the rest "
            "is time no traced dependency explains"
        )
    out += untraced_notes(graph, path)
    return out


#: the share of a path above which its untraced time gets a note on what to record next
UNTRACED_NOTE_SHARE = 0.2


def untraced_notes(graph: Graph, path: Path) -> list[str]:
    """What to record next where much of the path is ``untraced``: for the host's time
    between its events, Python frames and ``record_function`` ranges (and, for a data loader
    with workers, their own traces); for device work that waited on something unseen, what it
    can have been."""
    untraced = path.by_label.get("untraced", 0)
    if not path.length_ns or untraced < UNTRACED_NOTE_SHARE * path.length_ns:
        return []
    e = path.edges
    on = e[(graph.label[e] == UNTRACED) & (graph.weight[e] > 0)]
    device_ns = int(graph.weight[on[graph.kind[on] == INFERRED]].sum())
    host_ns = int(graph.weight[on].sum()) - device_ns
    out: list[str] = []
    share = 100 * untraced / path.length_ns
    if host_ns >= device_ns:
        out.append(
            f"{share:.0f}% of the path is untraced host time (between the events of the thread "
            "that runs the steps: Python, I/O, a sleep, a lock): record what it is with "
            "torch.profiler.profile(with_stack=True) (Python frames name it) or "
            "torch.profiler.record_function('...') around your own code (opscope profile "
            "--with-stack); a DataLoader with num_workers > 0 waits on its workers, whose time "
            "is in their own processes: opscope.capture.profile_loader_workers(loader, "
            "'loader_traces/') records each worker's trace beside the main one, and the report "
            "breaks data_loading down by them (--loader-traces)"
        )
    else:
        out.append(
            f"{share:.0f}% of the path is device work that waited for something the trace does "
            "not record (an event recorded outside the window or by another process, a graph's "
            "internal dependency, the legacy default stream): each such piece names the events "
            "on either side (segments' evidence); profile a window that holds what they wait "
            "for"
        )
    return out


def section(
    trace: Trace,
    graph: Graph,
    weight: np.ndarray | None = None,
) -> dict[str, Any]:
    """The ``critical_path`` section of one rank (see the module docstring)."""
    idx = trace.index
    path = solve(graph, weight) if weight is not None else window_path(trace, graph)
    # the steps' paths first: their search's node and edge arrays then meet fewer of the
    # segments' (kept with the report), and the section's peak is the lower of the two
    per_step = step_paths(graph, node_steps(idx, graph), weight)
    between_parts()  # the steps' search let its arrays go: their pages back before the pieces
    parts = pieces(graph, path, weight)
    segs = Segments(parts, idx)
    walls = step_walls(idx)
    steps = [
        {
            "step": s,
            "rank": graph.rank,
            "length_us": _us(p.length_ns),
            "wall_us": _us(walls.get(s, _wall(graph, p))),
            "explained_share": explained_share(p.by_label, walls.get(s, _wall(graph, p))),
            "bound_by_us": bound_by_us(p.by_label),
        }
        for s, p in sorted(per_step.items())
    ]
    return {
        "scope": "rank",
        "rank": graph.rank,
        "length_us": _us(path.length_ns),
        "wall_us": _us(_wall(graph, path)),
        "explained_share": explained_share(path.by_label, _wall(graph, path)),
        "bound_by_us": bound_by_us(path.by_label),
        "steps": steps,
        "segments": segs,
        "top": parts.top(idx, TOP),
        "nodes": graph.n_nodes,
        "edges": graph.n_edges,
        "method": METHOD,
        "notes": _notes(graph, path),
    }


# -- what-if -----------------------------------------------------------------------------------

_SPEC = re.compile(r"^\s*(?P<name>.+?)\s*=\s*(?P<factor>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*$")


class WhatIfError(ValueError):
    """A what-if spec that cannot be read or names nothing in the trace."""


def parse_what_if(spec: str) -> list[tuple[str, float]]:
    """``"aten::mul=0.5,launch_overhead=0"`` -> ``[("aten::mul", 0.5), ...]``.  A factor
    scales the time of what the name selects (0: gone, 1: unchanged, 2: twice as long)."""
    out: list[tuple[str, float]] = []
    for part in spec.split(","):
        if not part.strip():
            continue
        m = _SPEC.match(part)
        if m is None:
            raise WhatIfError(
                f"what-if {part.strip()!r}: expected NAME=FACTOR (e.g. aten::mul=0.5, "
                "launch_overhead=0)"
            )
        factor = float(m.group("factor"))
        if not math.isfinite(factor) or factor < 0:
            raise WhatIfError(f"what-if {part.strip()!r}: the factor must be a number >= 0")
        out.append((m.group("name"), factor))
    if not out:
        raise WhatIfError("what-if: nothing to change (expected NAME=FACTOR[,NAME=FACTOR...])")
    return out


def scaled_weights(
    idx: EventIndex, graph: Graph, changes: Sequence[tuple[str, float]]
) -> np.ndarray:
    """The graph's weights with each change applied (:mod:`.fixes`).  A name is a label
    (every piece of that label), else an event name: an op's device work (the kernels it and
    the ops under it launched; its host time where it launched none; ``NAME@self``: only the
    work it launched itself), a runtime call's host time, or a kernel's own time."""
    try:
        w, _keep = fix_weights(idx, graph, [part_of_name(n, f) for n, f in changes])
    except FixError as exc:
        raise WhatIfError(f"what-if: {exc}") from None
    return w


def what_if(trace: Trace, graph: Graph, spec: str) -> dict[str, Any]:
    """The path recomputed with the spec's changes: ``{"spec", "changes", "length_us",
    "projected_us", "saved_us", "bound_by_us", "steps": [{"step", "length_us",
    "projected_us", "saved_us"}]}``."""
    idx = trace.index
    changes = parse_what_if(spec)
    w = scaled_weights(idx, graph, changes)
    answer, _new = projection(
        graph, node_steps(idx, graph), w, spec, changes, base=window_path(trace, graph)
    )
    return answer


def projection(
    graph: Graph,
    node_step: np.ndarray,
    weight: np.ndarray,
    spec: str,
    changes: Sequence[tuple[str, float]],
    *,
    base: Path | None = None,
) -> tuple[dict[str, Any], Path]:
    """A what-if answer: the graph's path and its steps' paths with their own weights and with
    ``weight`` (``base``: the graph's path when already solved).  Returns the answer and the
    projected path."""
    base = solve(graph) if base is None else base
    new = no_longer(base, solve(graph, weight), changes)
    b_steps, n_steps = step_paths(graph, node_step), step_paths(graph, node_step, weight)
    n_steps = {
        k: no_longer(b_steps[k], p, changes) if k in b_steps else p for k, p in n_steps.items()
    }
    answer = projection_answer(
        spec, changes, paths=(base, new), steps=(b_steps, n_steps), by_label=new.by_label
    )
    return answer, new


class _Solved(Protocol):
    """A solved path, of a rank's graph or of a job's joined summaries."""

    @property
    def length_ns(self) -> int: ...


_P = TypeVar("_P", bound=_Solved)


def no_longer(base: _P, new: _P, changes: Sequence[tuple[str, float]]) -> _P:
    """The projected path, or the path as it was where changes that only take time away
    (every factor at most 1) came out longer: the ties' tolerance (a causal route preferred
    to a filler one that is up to ~0.1 % longer) can pick a longer route once a cause is
    shortened; less work never lengthens the step."""
    if all(f <= 1.0 for _n, f in changes) and new.length_ns > base.length_ns:
        return base
    return new


def projection_answer(
    spec: str,
    changes: Sequence[tuple[str, float]],
    *,
    paths: tuple[_Solved, _Solved],
    steps: tuple[Mapping[int, _Solved], Mapping[int, _Solved]],
    by_label: Mapping[str, int],
) -> dict[str, Any]:
    """A what-if's answer from the path before and after, each step's path (``{step: path}``
    before, after) and the projected path's time per label (ns); for one rank
    (:func:`projection`) and a job (:func:`~.job_solve.job_projection`)."""
    (base, new), (b_steps, n_steps) = paths, steps
    return {
        "spec": spec,
        "changes": [{"name": n, "factor": f} for n, f in changes],
        "length_us": _us(base.length_ns),
        "projected_us": _us(new.length_ns),
        "saved_us": _us(base.length_ns - new.length_ns),
        "bound_by_us": bound_by_us(by_label),
        "steps": [
            {
                "step": s,
                "length_us": _us(b_steps[s].length_ns),
                "projected_us": _us(n_steps[s].length_ns),
                "saved_us": _us(b_steps[s].length_ns - n_steps[s].length_ns),
            }
            for s in sorted(b_steps)
            if s in n_steps
        ],
    }


# -- what each finding would save ----------------------------------------------------------------

# findings whose waste is the time between events (gaps), not the events' own time
_WINDOW_KINDS = frozenset({"idle_gaps", "launch_bound"})


class _OnPath:
    """The window path's timed edges, searchable by the framework op they lie under: each
    edge's *anchor* is its event if a framework event, else the op that issued it."""

    def __init__(self, idx: EventIndex, graph: Graph, path: Path) -> None:
        e = path.edges
        e = e[(graph.weight[e] > 0) & (graph.label[e] >= 0)]
        self.rows = graph.edge_row[e]
        self.w = graph.weight[e]
        self.t1 = graph.time[graph.dst[e]]
        self.t0 = self.t1 - self.w
        safe = np.maximum(self.rows, 0)
        anchor = np.where(idx.is_framework[safe], safe, idx.op[safe])
        anchor = np.where((self.rows >= 0) & (anchor >= 0), anchor, -1)
        ok = np.flatnonzero(anchor >= 0)
        a = anchor[ok]
        order = np.lexsort((idx.start[a], idx.thread[a]))
        self.edge_of = ok[order]  # timed-edge positions sorted by (anchor thread, start)
        self.a_thread = idx.thread[a][order]
        self.a_start = idx.start[a][order]
        self.a_end = idx.end[a][order]
        by_row = np.argsort(self.rows, kind="stable")
        self.by_row, self.sorted_rows = by_row, self.rows[by_row]
        self.idx = idx

    def inside(self, ranges: Sequence[tuple[int, int]]) -> int:
        """The timed edges' time inside the ranges ``(start_ns, end_ns)``, summed over the
        ranges (an edge in two ranges counts in both).  When the edges' starts and ends each
        come in order (a path runs forward in time), by prefix sums: the time of the edges
        before ``x`` is ``sum(x - t0 for t0 < x) - sum(x - t1 for t1 < x)``, so a range costs
        two binary searches, not a pass over the path; the same integers either way."""
        t0, t1 = self.t0, self.t1
        if not len(t0):
            return 0
        base = int(t0[0])
        r0, r1 = t0 - base, t1 - base
        ordered = bool((np.diff(r0) >= 0).all() and (np.diff(r1) >= 0).all())
        if not ordered or int(r0[0]) < 0 or int(r1[-1]) * len(r1) >= 2**62:
            return sum(
                int(np.clip(np.minimum(t1, b) - np.maximum(t0, a), 0, None).sum())
                for a, b in ranges
            )
        c0 = np.concatenate([[0], np.cumsum(r0)])
        c1 = np.concatenate([[0], np.cumsum(r1)])

        def before(x: int) -> int:
            k0 = int(np.searchsorted(r0, x, side="left"))
            k1 = int(np.searchsorted(r1, x, side="left"))
            return (k0 * x - int(c0[k0])) - (k1 * x - int(c1[k1]))

        return sum(before(b - base) - before(a - base) for a, b in ranges if b > a)

    def under(self, rows: np.ndarray) -> np.ndarray:
        """Positions of the timed edges attributed to ``rows`` or lying under them (the ops
        under a framework row and the work they launched)."""
        idx = self.idx
        hits: list[np.ndarray] = []
        for r in unique_ints(rows[rows >= 0]).tolist():
            lo = np.searchsorted(self.sorted_rows, r, side="left")
            hi = np.searchsorted(self.sorted_rows, r, side="right")
            hits.append(self.by_row[lo:hi])
            if not idx.is_framework[r]:
                continue
            th = idx.thread[r]
            t_lo = np.searchsorted(self.a_thread, th, side="left")
            t_hi = np.searchsorted(self.a_thread, th, side="right")
            s = self.a_start[t_lo:t_hi]
            k0 = t_lo + int(np.searchsorted(s, idx.start[r], side="left"))
            k1 = t_lo + int(np.searchsorted(s, idx.end[r], side="right"))
            inside = np.flatnonzero(self.a_end[k0:k1] <= idx.end[r]) + k0
            hits.append(self.edge_of[inside])
        return unique_ints(np.concatenate(hits)) if hits else np.zeros(0, dtype=np.int64)


def window_path(trace: Trace, graph: Graph) -> Path:
    """The graph's window path with its own weights (kept on the index with the graph)."""
    path: Path = trace.index.memo(f"critical.path:{id(graph)}", lambda: solve(graph))
    return path


def finding_savings(
    trace: Trace,
    graph: Graph,
    findings: Sequence[Mapping[str, Any]],
    fixes: Sequence[Fix | None] | None = None,
) -> list[float]:
    """For each finding, ``step_savings_us``: what its fix shortens the window's path by,
    its what-if (:func:`~opscope.analysis.critical.fixes.fix_savings`), at most its time at
    stake.  ``fixes``: one per finding (default: each finding's own ``fix``, None for a
    plain mapping).  A finding with no fix keeps the
    bound the path gives: its time at stake capped by the path time its evidence accounts
    for (the pieces attributed to its events and the work under them; for gaps, the pieces
    inside its time ranges); one with no evidence either, its time at stake."""
    idx = trace.index
    base = window_path(trace, graph)
    what_ifs = fix_savings(
        idx,
        graph,
        findings,
        list(fixes) if fixes is not None else [getattr(f, "fix", None) for f in findings],
        base.length_ns,
        base_edges=base.edges,
    )
    on_path: _OnPath | None = None
    out: list[float] = []
    for f, got in zip(findings, what_ifs, strict=True):
        if got is not None:
            out.append(got)
            continue
        if on_path is None:
            on_path = _OnPath(idx, graph, base)
        out.append(_evidence_bound(idx, on_path, f))
    return out


def _evidence_bound(idx: EventIndex, on_path: _OnPath, f: Mapping[str, Any]) -> float:
    at_stake = float(f.get("time_at_stake_us") or 0.0)
    ev = f.get("evidence") or []
    ids = [int(i) for x in ev for i in (x.get("event_ids") or [])]
    ranges = [
        (int(x["start_ns"]), int(x["end_ns"]))
        for x in ev
        if x.get("start_ns") is not None and x.get("end_ns") is not None
    ]
    if str(f.get("kind")) in _WINDOW_KINDS and ranges:
        on = float(on_path.inside(ranges))
    elif ids:
        hit = on_path.under(idx.rows_of(np.asarray(ids, dtype=np.int64)))
        on = float(on_path.w[hit].sum())
    else:
        return capped_saving(at_stake, at_stake)
    return capped_saving(on / 1000.0, at_stake)


def comm_bandwidth_fix(
    trace: Trace, records: Sequence[Mapping[str, Any]], finding: Mapping[str, Any]
) -> Fix | None:
    """A rank's ``comm_bandwidth`` finding as a fix: that collective's transfers at the
    finding's target link share (its time at stake off their time)."""
    d = finding.get("details") or {}
    time_us = float(d.get("time_us") or 0.0)
    at_stake = float(finding.get("time_at_stake_us") or 0.0)
    if time_us <= 0 or at_stake <= 0:
        return None
    rows = collective_rows(trace, records, d.get("collective"), d.get("pg"))
    if not len(rows):
        return None
    factor = max(0.0, 1.0 - at_stake / time_us)
    return Fix((FixPart(factor, rows=rows, labels=("gpu_comm",)),))


__all__ = [
    "WhatIfError",
    "bound_by_us",
    "comm_bandwidth_fix",
    "finding_savings",
    "host_links",
    "no_longer",
    "parse_what_if",
    "projection",
    "rank_graph",
    "scaled_weights",
    "section",
    "what_if",
    "window_path",
]
