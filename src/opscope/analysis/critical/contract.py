"""A rank's graph contracted to its *interface* nodes, and the contracted paths expanded again.

The job's critical path (:mod:`.job`) joins the ranks' graphs at their collectives.  To solve
it without every rank's events in one process (a cluster run, :mod:`opscope.analysis
.cluster`), each rank's graph is reduced to the few nodes the join touches, and the joined
graph of those is solved on the coordinator:

* **interfaces**: each joined collective's arrival (its first work's start node) and mid
  node, and *cuts*: on every thread and stream, the first node at or after each joined
  collective's arrival time (the dst of a ``thread``/``stream`` edge that crosses that time).
  Cuts change no path; they keep each interface's region (below) to the slab of time until
  the next collective, so the work is about linear in the graph, not quadratic;
* **contracted edges** (:class:`Contracted`): for each interface ``u`` and each interface
  ``v`` that ``u`` reaches without passing another interface, the longest such path
  ``u -> v``; from each interface the longest path to a node that is not one (``u -> end``);
  to each interface the longest path from anywhere that passes no other (``start -> v``); and
  the longest path that passes none at all (``start -> end``).  Each carries its weight, its
  time per label, and its first and last node's times.

A longest path of the joined graph runs from interface to interface, so it is a path of
contracted edges, and back: the contracted graph's longest path has the joined graph's length,
time per label and per rank.  :meth:`Contraction.expand` turns contracted edges back into the
rank graph's own edges (its pieces), by running the same searches again; every search is
deterministic, so the expansion is the path the contraction measured.

The same is done on the graph of each step's own edges (``steps=True``, for the job's
``steps``).  The searches are :func:`region` (the C extension ``_longest.region``, or the same
algorithm in Python).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opscope.analysis.critical.longest import _native
from opscope.analysis.critical.model import (
    LABELS,
    STREAM,
    THREAD,
    TIE_CLASSES,
    Graph,
    class_labels,
    effective,
    true_by_label,
)
from opscope.trace.arrays import unique_ints

NLAB = len(LABELS)
NCODE = NLAB * TIE_CLASSES  # a search's columns: time per label and tie class
ANY = -1
"""A contracted edge's end that is no interface: the path starts (src) or ends (dst) there."""


class Searcher:
    """Longest-path searches over the edges of ``graph`` where ``keep`` holds, weighted by
    ``weight``, that do not cross ``stop`` nodes (see :func:`region`)."""

    def __init__(
        self,
        graph: Graph,
        weight: np.ndarray,
        keep: np.ndarray | None,
        stop: np.ndarray,
        *,
        native: bool = True,
    ) -> None:
        sub = np.arange(graph.n_edges) if keep is None else np.flatnonzero(keep)
        self.sub = sub.astype(np.int64)
        self.src = np.ascontiguousarray(graph.src[sub], dtype=np.int64)
        self.dst = np.ascontiguousarray(graph.dst[sub], dtype=np.int64)
        tie = None if graph.tie is None else graph.tie[sub]
        label = graph.label[sub]
        # searched with the ties' weights (model.effective), time summed per label and tie
        # class (model.class_labels): Contraction.contract gives it back in ns per label
        self.w = np.ascontiguousarray(effective(weight[sub], label, tie), dtype=np.int64)
        self.label = np.ascontiguousarray(class_labels(label, tie), dtype=np.int64)
        n = graph.n_nodes
        self.n = n
        self.order = np.ascontiguousarray(np.argsort(self.src, kind="stable"), dtype=np.int64)
        self.indptr = np.ascontiguousarray(
            np.searchsorted(self.src[self.order], np.arange(n + 1)), dtype=np.int64
        )
        self.stop = np.ascontiguousarray(stop, dtype=np.uint8)
        # the C search trusts these ranges (it must cost its region only): checked once here
        if len(self.src) and (
            min(self.src.min(), self.dst.min()) < 0 or max(self.src.max(), self.dst.max()) >= n
        ):
            raise ValueError("an edge names a node outside the graph")
        if len(self.label) and (self.label.min() < -1 or self.label.max() >= NCODE):
            raise ValueError("an edge's label is not one of LABELS")
        if len(self.stop) != n:
            raise ValueError("stop must have one entry per node")
        self.native = native and _native is not None
        self.dist = np.zeros(n, dtype=np.int64)
        self.pred = np.zeros(n, dtype=np.int64)
        self.origin = np.zeros(n, dtype=np.int64)
        self.lab = np.zeros((n, NCODE), dtype=np.int64)
        self._indeg = np.zeros(n, dtype=np.int64)
        self._seen = np.zeros(n, dtype=np.uint8)
        self._out = np.zeros(n, dtype=np.int64)
        self._walked = np.zeros(n + 1, dtype=np.int64)

    def run(self, source: int) -> np.ndarray:
        """The search from ``source`` (a node), or from anywhere (``source < 0``): the
        region's nodes in the order taken.  Per node of the region, the searcher's buffers
        then hold the path's length (``dist``), the edge it arrives by (``pred``, a position
        in ``sub``; -1 where it starts), the node it starts at (``origin``) and its time per
        label (a row of ``lab``), until the next search."""
        if self.native:
            assert _native is not None
            taken = _native.region(
                self.indptr,
                self.order,
                self.src,
                self.dst,
                self.w,
                self.label,
                self.stop,
                int(source),
                NCODE,
                self.dist,
                self.pred,
                self.lab,
                self.origin,
                self._indeg,
                self._seen,
                self._out,
            )
            return self._out[:taken]
        return _region_python(self, int(source))


def _region_python(s: Searcher, source: int) -> np.ndarray:
    """:func:`_longest.region` in Python (identical, slower): writes ``s``'s node buffers."""
    indptr, order, dst = s.indptr.tolist(), s.order.tolist(), s.dst.tolist()
    w, label, stop = s.w.tolist(), s.label.tolist(), s.stop.tolist()
    n = s.n
    indeg: dict[int, int] = {}
    if source >= 0:
        listed = [source]
        seen = {source}
        i = 0
        while i < len(listed):
            x = listed[i]
            i += 1
            if x != source and stop[x]:
                continue
            for k in range(indptr[x], indptr[x + 1]):
                v = dst[order[k]]
                indeg[v] = indeg.get(v, 0) + 1
                if v not in seen:
                    seen.add(v)
                    listed.append(v)
    else:
        listed = list(range(n))
        for x in listed:
            if stop[x]:
                continue
            for k in range(indptr[x], indptr[x + 1]):
                v = dst[order[k]]
                indeg[v] = indeg.get(v, 0) + 1
    dist = dict.fromkeys(listed, 0)
    pred = dict.fromkeys(listed, -1)
    queue: deque[int] = deque([source] if source >= 0 else [x for x in listed if x not in indeg])
    taken: list[int] = []
    while queue:
        u = queue.popleft()
        taken.append(u)
        if u != source and stop[u]:
            continue
        du = dist[u]
        for k in range(indptr[u], indptr[u + 1]):
            e = order[k]
            v = dst[e]
            cand = du + w[e]
            if cand > dist[v]:
                dist[v] = cand
                pred[v] = e
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    src = s.src.tolist()
    for x in listed:
        s.dist[x] = dist[x]
        s.pred[x] = pred[x]
        s.origin[x] = x
        s.lab[x] = 0
    for v in taken:
        e = pred[v]
        if e < 0:
            continue
        u = src[e]
        s.origin[v] = s.origin[u]
        s.lab[v] = s.lab[u]
        if label[e] >= 0:
            s.lab[v, label[e]] += w[e]
    return np.asarray(taken, dtype=np.int64)


@dataclass(frozen=True)
class Contracted:
    """Contracted edges (columns): ``src``/``dst`` an interface's position or :data:`ANY`,
    ``weight`` (the path's length in the weights it was searched with,
    :func:`~opscope.analysis.critical.model.effective`: what the job's search compares),
    ``by_label`` (ns per label, one row per edge: their sum is the length in ns),
    ``t_first``/``t_last`` (the times of the path's first and last node), ``step`` (the step
    of its nodes, -1 none) and ``end`` (the path's last node in the rank's graph; for an edge
    to :data:`ANY`)."""

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    by_label: np.ndarray
    t_first: np.ndarray
    t_last: np.ndarray
    step: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.src)

    def to_dict(self) -> dict[str, Any]:
        """The columns, each in int32 where its values fit (what a cluster's worker sends:
        about half the bytes); :meth:`from_dict` makes them int64 again."""
        return {k: _narrow(getattr(self, k)) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Contracted:
        return cls(**{k: np.asarray(data[k], dtype=np.int64) for k in cls.__dataclass_fields__})


def _narrow(a: np.ndarray) -> np.ndarray:
    info = np.iinfo(np.int32)
    if len(a) and (a.min() < info.min or a.max() > info.max):
        return a
    out: np.ndarray = a.astype(np.int32)
    return out


def cut_nodes(graph: Graph, times: np.ndarray) -> np.ndarray:
    """The first node on each thread and stream at or after each of ``times`` (the dst of a
    ``thread`` or ``stream`` edge whose span holds the time)."""
    if not len(times) or not graph.n_edges:
        return np.zeros(0, dtype=np.int64)
    bounds = unique_ints(times)
    chain = (graph.kind == THREAD) | (graph.kind == STREAM)
    ts, td = graph.time[graph.src[chain]], graph.time[graph.dst[chain]]
    crosses = np.searchsorted(bounds, ts, side="right") < np.searchsorted(bounds, td, side="right")
    out: np.ndarray = unique_ints(graph.dst[chain][crosses])
    return out


class Contraction:
    """A rank graph's contraction (see the module docstring): ``interfaces`` (node ids of
    ``graph``), the contracted edges of the whole window and of the steps' own edges."""

    def __init__(
        self,
        graph: Graph,
        weight: np.ndarray,
        node_step: np.ndarray,
        interfaces: np.ndarray,
        *,
        native: bool = True,
    ) -> None:
        self.graph = graph
        self.weight = weight
        self.node_step = node_step
        self.interfaces = np.asarray(interfaces, dtype=np.int64)
        stop = np.zeros(graph.n_nodes, dtype=bool)
        stop[self.interfaces] = True
        self._stop = stop
        self._native = native
        s_src, s_dst = node_step[graph.src], node_step[graph.dst]
        self._keeps: dict[bool, np.ndarray | None] = {
            False: None,
            True: (s_src == s_dst) & (s_src >= 0),
        }
        self._searchers: dict[bool, Searcher] = {}

    def release(self) -> None:
        """Drop the searchers' buffers (about 110 bytes a node); the next search makes them
        again.  A job keeps every rank's contraction for the path's expansion, which needs
        only the ranks the path crosses."""
        self._searchers.clear()

    def searcher(self, steps: bool) -> Searcher:
        if steps not in self._searchers:
            self._searchers[steps] = Searcher(
                self.graph, self.weight, self._keeps[steps], self._stop, native=self._native
            )
        return self._searchers[steps]

    def contract(self, steps: bool) -> Contracted:
        """The contracted edges (of the steps' own edges with ``steps``)."""
        s = self.searcher(steps)
        g, t, nstep = self.graph, self.graph.time, self.node_step
        pos = np.full(g.n_nodes, -1, dtype=np.int64)
        pos[self.interfaces] = np.arange(len(self.interfaces))
        cols: dict[str, list[Any]] = {k: [] for k in Contracted.__dataclass_fields__}

        def add(a: np.ndarray | int, b: np.ndarray, v: np.ndarray) -> None:
            cols["src"].append(np.broadcast_to(a, v.shape))
            cols["dst"].append(b)
            cols["weight"].append(s.dist[v])
            cols["by_label"].append(s.lab[v])
            cols["t_first"].append(s.origin[v])
            cols["end"].append(v)

        stop = self._stop
        # from anywhere: to each interface, and the best path that passes none (per step)
        nodes = s.run(-1)
        reached = nodes[s.dist[nodes] > 0]
        v = reached[stop[reached]]
        best = _best(s, reached[~stop[reached]], nstep if steps else None)
        add(ANY, np.concatenate([pos[v], np.full(len(best), ANY)]), np.concatenate([v, best]))
        # from each interface: to the interfaces it reaches, and its best end
        if s.native and len(self.interfaces):
            self._contract_native(s, pos, cols)
        else:
            self._contract_python(s, pos, add)
        if not cols["src"]:
            z = np.zeros(0, dtype=np.int64)
            return Contracted(z, z, z, np.zeros((0, NLAB), np.int64), z, z, z, z)
        out = {k: np.concatenate(v).astype(np.int64) for k, v in cols.items() if v}
        out["by_label"] = true_by_label(out["by_label"].reshape(-1, NCODE))
        out["t_first"] = t[out["t_first"]]  # the times of the paths' first nodes
        out["t_last"] = t[out["end"]]
        out["step"] = nstep[out["end"]]
        return Contracted(**out)

    def _contract_native(self, s: Searcher, pos: np.ndarray, cols: dict[str, list[Any]]) -> None:
        """The searches from every interface in one call of ``_longest.contract``."""
        assert _native is not None
        ints, labs = _native.contract(
            s.indptr,
            s.order,
            s.src,
            s.dst,
            s.w,
            s.label,
            s.stop,
            NCODE,
            np.ascontiguousarray(self.interfaces, dtype=np.int64),
            np.ascontiguousarray(pos, dtype=np.int64),
            s.dist,
            s.pred,
            s.lab,
            s.origin,
            s._indeg,
            s._seen,
            s._out,
        )
        rows = np.frombuffer(ints, dtype=np.int64).reshape(-1, 5)
        cols["src"].append(rows[:, 0])
        cols["dst"].append(rows[:, 1])
        cols["end"].append(rows[:, 2])
        cols["weight"].append(rows[:, 3])
        cols["t_first"].append(rows[:, 4])
        cols["by_label"].append(np.frombuffer(labs, dtype=np.int64).reshape(-1, NCODE))

    def _contract_python(self, s: Searcher, pos: np.ndarray, add: Callable[..., None]) -> None:
        """:meth:`_contract_native`'s edges, a search at a time."""
        stop, dist, positions = self._stop, s.dist, pos
        for i, u in enumerate(self.interfaces.tolist()):
            nodes = s.run(u)
            is_stop = stop[nodes]
            ends = nodes[is_stop]
            free = nodes[~is_stop]
            free = free[dist[free] > 0]
            if len(free):
                d = dist[free]
                top = free[d == d.max()].min()  # the longest; ties: the lowest node
                ends = np.append(ends[ends != u], top)
                add(i, np.append(positions[ends[:-1]], ANY), ends)
            else:
                ends = ends[ends != u]
                add(i, positions[ends], ends)

    def expand(self, edges: Sequence[tuple[int, int]]) -> np.ndarray:
        """The rank graph's edges of contracted ``edges`` of the window (in order, each as
        ``(its src: an interface's position or ANY, its ``end`` node)``), first to last."""
        s = self.searcher(False)
        out: list[np.ndarray] = []
        last: int | None = None
        for a, end in edges:
            source = -1 if a < 0 else int(self.interfaces[a])
            if source != last:
                s.run(source)  # leaves its answer in the searcher's node buffers
                last = source
            out.append(s.sub[_walk(s, int(end))])
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _walk(s: Searcher, end: int) -> np.ndarray:
    """The searcher's last path to ``end`` (its edges, positions in ``s.sub``), first to
    last."""
    if s.native:
        assert _native is not None
        counts = np.empty(1, dtype=np.int64)
        _native.walk(s.pred, s.src, np.asarray([end], dtype=np.int64), s._walked, counts)
        walked: np.ndarray = s._walked[: int(counts[0])][::-1].copy()
        return walked
    walk: list[int] = []
    p = int(s.pred[end])
    while p >= 0:
        walk.append(p)
        p = int(s.pred[int(s.src[p])])
    return np.asarray(walk[::-1], dtype=np.int64)


def _best(s: Searcher, nodes: np.ndarray, node_step: np.ndarray | None) -> np.ndarray:
    """Of ``nodes`` (of the searcher's last search), the end of the longest path (ties: the
    lowest node), per step of the nodes (steps >= 0) or, without ``node_step``, over all."""
    if not len(nodes):
        return nodes
    d = s.dist[nodes]
    if node_step is None:
        return nodes[np.lexsort((nodes, -d))[:1]]
    st = node_step[nodes]
    ok = st >= 0
    nodes, d, st = nodes[ok], d[ok], st[ok]
    order = np.lexsort((nodes, -d, st))
    first = np.flatnonzero(np.r_[True, st[order][1:] != st[order][:-1]]) if len(order) else order
    out: np.ndarray = nodes[order[first]]
    return out


__all__ = ["ANY", "NLAB", "Contracted", "Contraction", "Searcher", "cut_nodes"]
