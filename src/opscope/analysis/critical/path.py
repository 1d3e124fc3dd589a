"""The critical path of a graph (:mod:`.graph`): for the whole window and per profiler step.

The path is the longest path through the graph by weight (:mod:`.longest`): the chain of
dependent pieces of work that accounts for the most time.  Its **length** is the sum of its
edges' weights; time that nothing on the chain accounts for (a thread idle between two
top-level events, a host blocked while the path runs through the device) is not in it, so the
length is at most the window's wall time.  Per step, edges between events of different steps
are dropped and the same computation gives every step's own path at once.

:func:`solve` returns a :class:`Path`: its edges in order, the length and the time per label.
:func:`segments` merges a path's consecutive edges of one event and label into pieces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.critical.graph import LABELS, Graph
from opscope.analysis.critical.longest import longest_paths

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex


@dataclass(frozen=True)
class Path:
    """One path: ``edges`` (edge indices, first to last), ``length_ns`` and ``by_label``
    (ns per label, every label present)."""

    edges: np.ndarray
    length_ns: int
    by_label: dict[str, int]


def _by_label(graph: Graph, edges: np.ndarray, weight: np.ndarray) -> dict[str, int]:
    lab = graph.label[edges]
    w = weight[edges]
    ok = lab >= 0
    sums = np.bincount(lab[ok], weights=w[ok], minlength=len(LABELS)) if ok.any() else None
    return {
        name: (round(float(sums[i])) if sums is not None else 0) for i, name in enumerate(LABELS)
    }


def _walk(pred: np.ndarray, src: np.ndarray, node: int) -> np.ndarray:
    out: list[int] = []
    p = pred.tolist() if len(pred) < 4096 else pred
    s = src
    v = node
    e = int(p[v])
    while e >= 0:
        out.append(e)
        v = int(s[e])
        e = int(p[v])
    return np.asarray(out[::-1], dtype=np.int64)


def solve(graph: Graph, weight: np.ndarray | None = None, keep: np.ndarray | None = None) -> Path:
    """The longest path through ``graph`` (edge weights ``weight``, default the graph's;
    only the edges where ``keep`` is True)."""
    w = graph.weight if weight is None else weight
    src, dst = graph.src, graph.dst
    if keep is None:
        dist, pred = longest_paths(src, dst, w, graph.n_nodes)
    else:
        sub = np.flatnonzero(keep)
        dist, pred = longest_paths(src[sub], dst[sub], w[sub], graph.n_nodes)
        pred = np.where(pred >= 0, sub[np.maximum(pred, 0)] if len(sub) else -1, -1)
    if graph.n_nodes == 0:
        return Path(np.zeros(0, dtype=np.int64), 0, _by_label(graph, np.zeros(0, np.int64), w))
    end = int(np.argmax(dist))
    edges = _walk(pred, src, end)
    return Path(edges, int(dist[end]), _by_label(graph, edges, w))


def step_paths(
    graph: Graph, node_step: np.ndarray, weight: np.ndarray | None = None
) -> dict[int, Path]:
    """Each step's own path: ``{step: Path}`` over the edges whose two ends lie in that step
    (``node_step``: the step of each node, -1 none)."""
    w = graph.weight if weight is None else weight
    s_src, s_dst = node_step[graph.src], node_step[graph.dst]
    keep = (s_src == s_dst) & (s_src >= 0)
    sub = np.flatnonzero(keep)
    dist, pred_sub = longest_paths(graph.src[sub], graph.dst[sub], w[sub], graph.n_nodes)
    pred = np.where(pred_sub >= 0, sub[np.maximum(pred_sub, 0)] if len(sub) else -1, -1)
    out: dict[int, Path] = {}
    steps = np.unique(node_step[node_step >= 0])
    if not len(steps):
        return out
    # the node of largest dist per step
    order = np.lexsort((-dist, node_step))
    ns = node_step[order]
    first = np.searchsorted(ns, steps, side="left")
    for s, i in zip(steps.tolist(), first.tolist(), strict=True):
        node = int(order[i])
        edges = _walk(pred, graph.src, node)
        out[int(s)] = Path(edges, int(dist[node]), _by_label(graph, edges, w))
    return out


def segments(
    graph: Graph,
    path: Path,
    idx: EventIndex,
    weight: np.ndarray | None = None,
    rank_of_node: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """The path as pieces: consecutive edges of one event and label merged, edges that carry
    no time left out.  Each piece: ``rank``, ``label``, ``name``, ``event_id``, ``start_ns``
    (where the piece begins, on its rank's clock), ``dur_us``."""
    w = graph.weight if weight is None else weight
    e = path.edges
    e = e[(w[e] > 0) & (graph.label[e] >= 0)]
    if not len(e):
        return []
    row, lab = graph.edge_row[e], graph.label[e]
    rank = (
        rank_of_node[graph.src[e]]
        if rank_of_node is not None
        else np.full(len(e), graph.rank, dtype=np.int64)
    )
    new = np.ones(len(e), dtype=bool)
    new[1:] = (row[1:] != row[:-1]) | (lab[1:] != lab[:-1]) | (rank[1:] != rank[:-1])
    first = np.flatnonzero(new)
    sums = np.add.reduceat(w[e], first)
    t0 = graph.time[graph.src[e[first]]]
    rows = row[first]
    valid = rows >= 0
    ids = np.where(valid, idx.ids[np.maximum(rows, 0)], -1).tolist()
    codes = idx.name.codes[np.maximum(rows, 0)]
    values = [str(v) for v in idx.name.values.tolist()]
    name_of = [values[c] if c >= 0 else None for c in np.unique(codes).tolist()]
    uniq, inv = np.unique(codes, return_inverse=True)
    del uniq
    names = [name_of[i] for i in inv.tolist()]
    ok = valid.tolist()
    durs = np.round(sums / 1000.0, 3).tolist()
    out: list[dict[str, Any]] = [
        {
            "rank": rk,
            "label": LABELS[lb],
            "name": nm if v else None,
            "event_id": i if v else None,
            "start_ns": t,
            "dur_us": d,
        }
        for rk, lb, nm, i, t, d, v in zip(
            rank[first].tolist(),
            lab[first].tolist(),
            names,
            ids,
            t0.tolist(),
            durs,
            ok,
            strict=True,
        )
    ]
    return out


__all__ = ["Path", "segments", "solve", "step_paths"]
