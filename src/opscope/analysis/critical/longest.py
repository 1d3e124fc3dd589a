"""Longest paths in a weighted DAG: for every node, the longest path ending there.

:func:`longest_paths` takes the edges as three arrays (``src`` and ``dst`` int64, or int32
for a graph of narrow ids; ``weight`` int64) and returns ``dist`` (int64: the length of the
longest path ending at each node; a path may start anywhere, so ``dist >= 0``) and ``pred``
(the edge that path arrives by, -1 where it starts; int32 when ``src`` and ``dst`` are).
Nodes are visited in a topological order (Kahn's algorithm); of two equally long paths the
first found is kept.  A graph with a cycle is refused (:class:`CycleError`): the callers
build graphs whose edges follow the clock, so a cycle means an inconsistent trace and is
reported, never hidden.

The work is one pass over nodes and edges, done by the optional C extension ``_longest``
(built with the trace scanner, ``setup.py``); without it the same algorithm runs in Python,
slower (about a microsecond per edge) but identical.  :func:`path_to` walks ``pred`` back.
"""

from __future__ import annotations

from collections import deque
from types import ModuleType
from typing import Any

import numpy as np

from opscope.trace.arrays import row_dtype

_native: ModuleType | None
try:
    from opscope.analysis.critical import _longest as _native
except ImportError:  # built without a C compiler
    _native = None

AVAILABLE = _native is not None


class CycleError(ValueError):
    """The graph has a cycle: no longest path is defined."""


def _python(src: np.ndarray, dst: np.ndarray, w: np.ndarray, n: int) -> tuple[list[int], ...]:
    order = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order], np.arange(n + 1)).tolist()
    indeg = np.bincount(dst, minlength=n).tolist()
    dstl, wl, orderl = dst.tolist(), w.tolist(), order.tolist()
    dist = [0] * n
    pred = [-1] * n
    queue = deque(v for v in range(n) if indeg[v] == 0)
    reached = 0
    while queue:
        u = queue.popleft()
        reached += 1
        du = dist[u]
        for k in range(starts[u], starts[u + 1]):
            e = orderl[k]
            v = dstl[e]
            cand = du + wl[e]
            if cand > dist[v]:
                dist[v] = cand
                pred[v] = e
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    return dist, pred, [reached]


def ids_dtype(n_nodes: int, n_edges: int) -> type[np.signedinteger[Any]]:
    """The integer type of a graph's node and edge ids (``src``, ``dst``, the searches'
    ``pred``): int32, half the memory of int64, below 2**31 nodes and edges (the rule of
    :func:`~opscope.trace.arrays.row_dtype`)."""
    return row_dtype(max(n_nodes, n_edges))


def _ids_of(src: np.ndarray, dst: np.ndarray, n: int) -> type[np.signedinteger[Any]]:
    """int32 where ``src`` and ``dst`` are both int32 and the sizes allow it, else int64."""
    narrow = np.asarray(src).dtype == np.int32 and np.asarray(dst).dtype == np.int32
    return np.int32 if narrow and ids_dtype(n, len(src)) is np.int32 else np.int64


def longest_paths(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    n: int,
    *,
    keep: np.ndarray | None = None,
    factor: np.ndarray | None = None,
    native: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """``(dist, pred)`` over ``n`` nodes and the edges ``src[e] -> dst[e]`` of ``weight[e]``
    (only those where ``keep`` is True, when given: as if the others were not there; ``pred``
    names edges by their index in the whole arrays); raises :class:`CycleError` when the edges
    hold a cycle, ValueError when one names a node outside ``0..n-1``.  ``factor``: one
    int16 per edge, each edge searched with ``weight * factor`` (no array of those made by
    the C search).  ``native=False`` forces the Python implementation (for tests).
    ``src`` and ``dst`` both int32 (:func:`ids_dtype`) are searched as they are, and
    ``pred`` is then int32 too; other integer types as int64."""
    ids = _ids_of(src, dst, n)
    src = np.ascontiguousarray(src, dtype=ids)
    dst = np.ascontiguousarray(dst, dtype=ids)
    weight = np.ascontiguousarray(weight, dtype=np.int64)
    if not (len(src) == len(dst) == len(weight)):
        raise ValueError("src, dst and weight must have one length")
    if keep is not None:
        keep = np.ascontiguousarray(keep, dtype=bool)
        if len(keep) != len(src):
            raise ValueError("keep must have one value per edge")
    if factor is not None:
        factor = np.ascontiguousarray(factor, dtype=np.int16)
        if len(factor) != len(src):
            raise ValueError("factor must have one value per edge")
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise ValueError("an edge names a node outside the graph")
    if native and _native is not None:
        dist = np.empty(n, dtype=np.int64)
        pred = np.empty(n, dtype=ids)
        reached = _native.longest(src, dst, weight, dist, pred, keep, factor)
    elif factor is not None:
        return longest_paths(src, dst, weight * factor, n, keep=keep, native=False)
    elif keep is not None:
        sub = np.flatnonzero(keep)
        d, p, r = _python(src[sub], dst[sub], weight[sub], n)
        dist, p_sub, reached = np.asarray(d, dtype=np.int64), np.asarray(p, dtype=np.int64), r[0]
        pred = np.where(p_sub >= 0, sub[np.maximum(p_sub, 0)] if len(sub) else -1, -1)
        pred = pred.astype(ids)
    else:
        d, p, r = _python(src, dst, weight, n)
        dist, pred, reached = np.asarray(d, dtype=np.int64), np.asarray(p, dtype=ids), r[0]
    if reached != n:
        raise CycleError(f"the graph has a cycle ({n - reached} of {n} nodes on or after one)")
    return dist, pred


def paths_to(
    nodes: np.ndarray, pred: np.ndarray, src: np.ndarray, *, into: np.ndarray | None = None
) -> list[np.ndarray]:
    """The edges of the longest path ending at each of ``nodes``, first to last (of the type
    of ``pred`` and ``src``: int32 for a graph of narrow ids, else int64).  Meant for
    paths in disjoint parts of one graph (the steps' paths): their edges fit in one buffer of
    the node count; paths that share nodes are walked one by one.  ``into``: an int64 array
    of the node count, the caller's to give up (the search's ``dist`` once read), that one
    path is walked into instead of a new buffer."""
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    ids = _ids_of(pred, src, len(pred))  # the paths' edges come back in the graph's id type
    if _native is not None and len(nodes):
        # one path over n nodes has at most n - 1 edges
        own = (
            into is not None
            and len(nodes) == 1
            and into.dtype == np.int64
            and into.flags.owndata
            and into.flags.writeable
            and into.flags.c_contiguous
            and len(into) >= len(pred)
        )
        out = into if own and into is not None else np.empty(len(pred) + 1, dtype=np.int64)
        counts = np.empty(len(nodes), dtype=np.int64)
        try:
            _native.walk(
                np.ascontiguousarray(pred, dtype=ids),
                np.ascontiguousarray(src, dtype=ids),
                nodes,
                out,
                counts,
                np.dtype(ids).itemsize,
            )
        except ValueError:
            pass  # shared nodes overflowed the buffer: one by one below
        else:
            if len(nodes) == 1:  # one path (the window's): reversed in its own buffer
                return [_reversed_in_place(out, int(counts[0])).astype(ids, copy=False)]
            offs = np.concatenate([[0], np.cumsum(counts)])
            return [out[offs[i] : offs[i + 1]][::-1].astype(ids) for i in range(len(nodes))]
    return [path_to(int(v), pred, src).astype(ids) for v in nodes.tolist()]


#: elements swapped at a time by :func:`_reversed_in_place`
_SWAP = 1 << 18


def _reversed_in_place(buf: np.ndarray, count: int) -> np.ndarray:
    """``buf[:count][::-1]`` in ``buf``'s own memory, which is then cut to ``count``: a path
    of most of the graph's nodes is not copied to be turned round."""
    i, j = 0, count
    while j - i >= 2:
        k = min(_SWAP, (j - i) // 2)
        left = buf[i : i + k].copy()
        buf[i : i + k] = buf[j - k : j][::-1]
        buf[j - k : j] = left[::-1]
        i, j = i + k, j - k
    buf.resize(count, refcheck=False)  # no view of it was made: nothing reads the tail
    return buf


def path_to(node: int, pred: np.ndarray, src: np.ndarray) -> np.ndarray:
    """The edges of the longest path ending at ``node``, first to last."""
    out: list[int] = []
    v = int(node)
    e = int(pred[v])
    while e >= 0:
        out.append(e)
        v = int(src[e])
        e = int(pred[v])
    return np.asarray(out[::-1], dtype=np.int64)


__all__ = ["AVAILABLE", "CycleError", "ids_dtype", "longest_paths", "path_to", "paths_to"]
