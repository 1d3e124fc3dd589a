"""Edges cut at the profiler steps' boundaries, so that each step's own path sees all of its
time (see :func:`opscope.analysis.critical.section.node_steps`).

A step's path is searched over the edges whose two ends lie in the step.  An edge that runs
across a boundary (a kernel that began before the step and ends in it, a host call still
running when the step ends, the gap of a thread between two steps) would be left out of both
steps, and the time it accounts for inside each with it.  So every such edge is cut at each
boundary it crosses: ``src -> a -> b -> dst`` where ``a`` (an end) and ``b`` (a start) are two
nodes at the boundary's time, ``a -> b`` weighs nothing, and the edge's weight is shared out
from its end backwards (an edge's weight is always the last part of its span: a blocked call
weighs what follows the work it waited for).  The halves keep the edge's label, row and kind,
so the window's path and its pieces are unchanged (consecutive pieces of one row and label
merge again)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from opscope.analysis.critical.longest import ids_dtype
from opscope.analysis.critical.model import Graph

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex


def step_bounds(idx: EventIndex) -> np.ndarray:
    """The distinct start and end times of the step markers (sorted)."""
    marks = np.flatnonzero(idx.kind.eq("step") & idx.is_framework & (idx.dur > 0))
    if not len(marks):
        return np.zeros(0, dtype=np.int64)
    out: np.ndarray = np.unique(np.concatenate([idx.start[marks], idx.end[marks]]))
    return out.astype(np.int64)


#: edges examined at a time when looking for those that cross a boundary (bounds the
#: temporaries: four int64 values an edge)
_CHUNK = 1 << 14


def _crossing(graph: Graph, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges that cross a bound and are cut (ascending), with the first bound after
    each one's start (``lo``) and the first at or after its end (``hi``)."""
    t = graph.time
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for a in range(0, graph.n_edges, _CHUNK):
        src, dst = graph.src[a : a + _CHUNK], graph.dst[a : a + _CHUNK]
        ts, td = t[src], t[dst]
        lo = np.searchsorted(bounds, ts, side="right")  # first bound after the edge's start
        hi = np.searchsorted(bounds, td, side="left")  # first bound at or after its end
        # an edge that weighs more than its span (clocks of host and device a little apart)
        # is left whole: its weight cannot be placed in time
        hit = np.flatnonzero((hi > lo) & (graph.weight[a : a + _CHUNK] <= td - ts))
        found.append((hit + a, lo[hit], hi[hit]))
    crossing, lo, hi = (np.concatenate([f[i] for f in found]) for i in range(3))
    return crossing, lo, hi


def cut_at_steps(graph: Graph, bounds: np.ndarray) -> Graph:
    """``graph`` with every edge that crosses one of ``bounds`` (times, sorted) cut there.
    The graph is cut in place (its arrays are replaced one by one, so that the old and the
    new graph are never held whole at once) and returned."""
    if not len(bounds) or not graph.n_edges:
        return graph
    crossing, lo, hi = _crossing(graph, bounds)
    if not len(crossing):
        return graph
    t = graph.time
    n_cut = hi - lo
    total = int(n_cut.sum())
    n0 = graph.n_nodes
    n_edges = graph.n_edges + 2 * total  # each cut adds two edges
    # the ids of the cut graph (32 bits where they fit), and of its edges
    ids = ids_dtype(n0 + 2 * total, n_edges)
    if graph.src.dtype == np.int32 and ids is np.int64:
        graph.src, graph.dst = graph.src.astype(np.int64), graph.dst.astype(np.int64)
    # one row per (edge, bound crossed), in edge order then time
    e = np.repeat(crossing.astype(ids), n_cut)
    first = np.repeat(np.cumsum(n_cut) - n_cut, n_cut)
    p = bounds[np.repeat(lo, n_cut) + (np.arange(total) - first)]
    del first, lo, hi
    a = (n0 + 2 * np.arange(total)).astype(ids)  # the end-like node at each cut
    b = a + 1  # the start-like node
    # the pieces of each crossing edge: src -> a1, b1 -> a2, ..., bk -> dst
    is_first = np.r_[True, e[1:] != e[:-1]]
    is_last = np.r_[e[1:] != e[:-1], True]
    ts, td = t[graph.src[e]], t[graph.dst[e]]
    piece_src = np.where(is_first, graph.src[e], np.roll(b, 1)).astype(graph.src.dtype)
    piece_t0 = np.where(is_first, ts, np.roll(p, 1))
    del ts
    # the weight is the last part of the edge's span: the time of each piece in it
    tail_from = td - graph.weight[e]  # where the weighted part begins
    piece_w = np.maximum(0, p - np.maximum(piece_t0, tail_from))
    del piece_t0
    last_w = np.maximum(0, td - np.maximum(p, tail_from))
    del td, tail_from
    src = np.concatenate([piece_src, a, b[is_last]])
    del piece_src
    dst = np.concatenate([a, b, graph.dst[e[is_last]]])
    del a, b
    weight = np.concatenate([piece_w, np.zeros(total, np.int64), last_w[is_last]])
    del piece_w, last_w
    e3 = np.concatenate([e, e, e[is_last]])
    keep = np.ones(graph.n_edges, dtype=bool)
    keep[crossing] = False
    row_of = np.where(graph.edge_row[e] >= 0, graph.edge_row[e], graph.row[graph.src[e]])
    nodes_row = np.empty(2 * total, dtype=graph.row.dtype)
    nodes_row[0::2] = row_of
    nodes_row[1::2] = row_of
    del row_of, e
    role = np.empty(2 * total, dtype=np.int8)
    role[0::2] = 1
    role[1::2] = 0
    zero = np.zeros(2 * total + int(is_last.sum()), dtype=bool)
    zero[total : 2 * total] = True  # the a -> b edges weigh nothing and carry no label
    label = np.where(zero, -1, graph.label[e3]).astype(graph.label.dtype)
    # each old array is let go as its new one is made
    graph.time = np.concatenate([t, np.repeat(p, 2)]).astype(np.int64, copy=False)
    del t
    graph.row = np.concatenate([graph.row, nodes_row]).astype(graph.row.dtype, copy=False)
    graph.role = np.concatenate([graph.role, role]).astype(graph.role.dtype, copy=False)
    graph.src = _joined(graph.src, keep, src)
    graph.dst = _joined(graph.dst, keep, dst)
    graph.weight = _joined(graph.weight, keep, weight)
    graph.label = _joined(graph.label, keep, label)
    graph.edge_row = _joined(graph.edge_row, keep, graph.edge_row[e3])
    graph.kind = _joined(graph.kind, keep, graph.kind[e3])
    if graph.tie is not None:
        graph.tie = _joined(graph.tie, keep, graph.tie[e3])
    graph.longest = None
    graph._factor = None
    return graph


def _joined(old: np.ndarray, keep: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``old[keep]`` followed by ``new``, in ``old``'s dtype, in one array made once."""
    kept = int(keep.sum())
    out = np.empty(kept + len(new), dtype=old.dtype)
    np.compress(keep, old, out=out[:kept])
    out[kept:] = new
    return out


__all__ = ["cut_at_steps", "step_bounds"]
