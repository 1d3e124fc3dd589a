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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import orjson

from opscope.analysis.critical.graph import LABELS, Graph
from opscope.analysis.critical.longest import longest_paths, paths_to
from opscope.analysis.critical.model import UNTRACED
from opscope.trace.arrays import unique_ints

_pieces: ModuleType | None
try:
    from opscope.analysis.critical import _pieces
except ImportError:  # built without a C compiler: the dicts, through orjson
    _pieces = None

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex

#: edges taken at a time by the per-edge passes that would otherwise make temporaries of the
#: whole graph
_BLOCK = 1 << 20
#: segments per piece of :meth:`Segments.json_chunks` (about 1 MB of JSON): a piece is held
#: three times while it is written (the C writer's array, its inside, the separator before
#: it), so 65,536 (about 8 MB a piece) kept 20 MB more at the peak of a 103k-event report
#: (owlv2_large, 186 -> 167 MB) for no time saved
JSON_CHUNK = 8_192


@dataclass(frozen=True)
class Path:
    """One path: ``edges`` (edge indices, first to last), ``length_ns`` and ``by_label``
    (ns per label, every label present)."""

    edges: np.ndarray
    length_ns: int
    by_label: dict[str, int]


def _by_label(graph: Graph, edges: np.ndarray, weight: np.ndarray) -> dict[str, int]:
    """ns per label over ``edges`` (a block of edges at a time: a path of most of the graph
    makes no temporaries of its own length)."""
    sums = np.zeros(len(LABELS), dtype=np.float64)
    for a in range(0, len(edges), _BLOCK):
        e = edges[a : a + _BLOCK]
        lab = graph.label[e]
        ok = lab >= 0
        if ok.any():
            sums += np.bincount(lab[ok], weights=weight[e[ok]], minlength=len(LABELS))
    return {name: round(float(sums[i])) for i, name in enumerate(LABELS)}


def _sum_at(weight: np.ndarray, edges: np.ndarray) -> int:
    """``weight[edges].sum()`` a block of edges at a time."""
    return sum(int(weight[edges[a : a + _BLOCK]].sum()) for a in range(0, len(edges), _BLOCK))


def longest_edges(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    n: int,
    keep: np.ndarray | None = None,
    *,
    solved: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, int]:
    """The edges (first to last) and length of the longest path over ``n`` nodes and the
    edges ``src -> dst`` of ``weight`` (only those where ``keep`` is True); ``solved``: the
    ``longest_paths`` of them, when known, used up (the path is walked into its ``dist``)."""
    if solved is not None:  # the caller's: of these edges (and keep)
        dist, pred = solved
    elif keep is None:
        dist, pred = longest_paths(src, dst, weight, n)
    else:
        dist, pred = longest_paths(src, dst, weight, n, keep=keep)
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    end = int(np.argmax(dist))
    length = int(dist[end])
    # dist is read: the path is walked into its memory (at 10M events 170 MB not made again)
    return paths_to(np.asarray([end], dtype=np.int64), pred, src, into=dist)[0], length


def longest_per_step(
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    node_step: np.ndarray,
    *,
    factor: np.ndarray | None = None,
) -> dict[int, tuple[np.ndarray, int]]:
    """Each step's longest path, ``{step: (edges, length)}``, over the edges whose two ends
    lie in that step (``node_step``: the step of each node, -1 none); ``factor``: each edge's
    weight multiplier (the lengths are then of ``weight * factor``)."""
    dist, pred = longest_paths(
        src, dst, weight, len(node_step), keep=_in_one_step(src, dst, node_step), factor=factor
    )
    ends, steps = _step_ends(dist, node_step)
    if not len(steps):
        return {}
    walks = paths_to(ends, pred, src)
    return {
        int(s): (edges, int(dist[node]))
        for s, node, edges in zip(steps.tolist(), ends.tolist(), walks, strict=True)
    }


def _in_one_step(src: np.ndarray, dst: np.ndarray, node_step: np.ndarray) -> np.ndarray:
    """Per edge, whether its two ends lie in one step (a block at a time: no per-edge int64
    temporaries of the whole graph)."""
    keep = np.empty(len(src), dtype=bool)
    for a in range(0, len(src), _BLOCK):
        s_src = node_step[src[a : a + _BLOCK]]
        keep[a : a + _BLOCK] = (s_src == node_step[dst[a : a + _BLOCK]]) & (s_src >= 0)
    return keep


def _step_ends(dist: np.ndarray, node_step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per step (sorted), its node of largest ``dist``, the first such node on a tie: where
    ``np.lexsort((-dist, node_step))`` puts each step's first node, by one maximum and one
    minimum per step instead of a sort of every node (a block of nodes at a time)."""
    steps = unique_ints(node_step[node_step >= 0])
    if not len(steps):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    best = np.full(len(steps), np.iinfo(np.int64).min, dtype=np.int64)
    first = np.full(len(steps), len(node_step), dtype=np.int64)
    blocks = range(0, len(node_step), _BLOCK)
    for a in blocks:
        ns = node_step[a : a + _BLOCK]
        at = np.flatnonzero(ns >= 0)
        np.maximum.at(best, np.searchsorted(steps, ns[at]), dist[a : a + _BLOCK][at])
    for a in blocks:
        ns = node_step[a : a + _BLOCK]
        at = np.flatnonzero(ns >= 0)
        code = np.searchsorted(steps, ns[at])
        top = dist[a : a + _BLOCK][at] == best[code]
        np.minimum.at(first, code[top], a + at[top])
    return first, steps


def solve(graph: Graph, weight: np.ndarray | None = None, keep: np.ndarray | None = None) -> Path:
    """The longest path through ``graph`` (edge weights ``weight``, default the graph's;
    only the edges where ``keep`` is True)."""
    w = graph.weight if weight is None else weight
    edges = _path_edges(graph, w, keep)
    return Path(edges, _sum_at(w, edges), _by_label(graph, edges, w))


def solve_length(graph: Graph, weight: np.ndarray, keep: np.ndarray | None = None) -> int:
    """:func:`solve`'s ``length_ns`` alone (a what-if's: no time per label)."""
    return _sum_at(weight, _path_edges(graph, weight, keep))


def _path_edges(graph: Graph, w: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """The edges of the longest path with weights ``w`` (edges ``keep``), searched with the
    tie factors applied as the search goes (at 10M events an array of effective weights is
    170 MB)."""
    solved = graph.solved(w) if keep is None else None
    if solved is not None:
        graph.longest = None  # used once: its two node arrays are not kept with the graph
    else:
        solved = longest_paths(
            graph.src, graph.dst, w, graph.n_nodes, keep=keep, factor=graph.factors()
        )
    edges, _n = longest_edges(graph.src, graph.dst, w, graph.n_nodes, keep, solved=solved)
    return edges


def step_paths(
    graph: Graph, node_step: np.ndarray, weight: np.ndarray | None = None
) -> dict[int, Path]:
    """Each step's own path: ``{step: Path}`` over the edges whose two ends lie in that step
    (``node_step``: the step of each node, -1 none)."""
    w = graph.weight if weight is None else weight
    per = longest_per_step(graph.src, graph.dst, w, node_step, factor=graph.factors())
    return {s: Path(e, int(w[e].sum()), _by_label(graph, e, w)) for s, (e, _n) in per.items()}


@dataclass(frozen=True)
class Pieces:
    """A path's pieces, columnar: consecutive edges of one event, label and rank merged, edges
    that carry no time left out.  ``row`` is the event's row (-1: none, untraced time),
    ``start_ns`` where the piece begins on its rank's clock, ``dur_ns`` its time."""

    rank: np.ndarray
    label: np.ndarray
    row: np.ndarray
    start_ns: np.ndarray
    dur_ns: np.ndarray
    #: for an ``untraced`` piece, the rows of the events on either side of it (its first
    #: edge's source and its last edge's destination; -1 elsewhere): its evidence.  One per
    #: piece, or with :attr:`gap_at` one per piece it names (few pieces are untraced: the
    #: others hold nothing)
    before: np.ndarray | None = None
    after: np.ndarray | None = None
    #: the pieces (ascending) that :attr:`before` and :attr:`after` are of; None: every piece
    gap_at: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.row)

    def slice(self, lo: int, hi: int) -> Pieces:
        """Pieces ``lo`` to ``hi`` (views, no copy)."""
        return self.take(np.s_[lo:hi])

    def take(self, at: Any) -> Pieces:
        """The pieces at ``at`` (a slice: views; or positions)."""
        before, after, gap_at = self.before, self.after, self.gap_at
        if gap_at is not None and isinstance(at, slice) and at.step in (None, 1):
            lo, hi, _step = at.indices(len(self))
            a, b = np.searchsorted(gap_at, [lo, hi])
            gap_at = gap_at[a:b] - lo
            before = None if before is None else before[a:b]
            after = None if after is None else after[a:b]
        elif gap_at is not None:  # positions: the evidence one per piece taken
            dense_before, dense_after = self._sides()
            before, after, gap_at = dense_before[at], dense_after[at], None
        else:
            before = None if before is None else before[at]
            after = None if after is None else after[at]
        return Pieces(
            self.rank[at],
            self.label[at],
            self.row[at],
            self.start_ns[at],
            self.dur_ns[at],
            before,
            after,
            gap_at,
        )

    def _sides(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`before` and :attr:`after`, one per piece (-1: none)."""
        n = len(self)
        before, after = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        if self.gap_at is None:
            if self.before is not None:
                before = self.before
            if self.after is not None:
                after = self.after
        elif self.before is not None and self.after is not None:
            before[self.gap_at] = self.before
            after[self.gap_at] = self.after
        return before, after

    def evidence(self, idx: EventIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """Per piece, the ids of the events before and after it (-1 none), the position of
        its thread in the list of threads returned (-1: a piece that is not ``untraced``)."""
        n = len(self)
        before, after = self._sides()
        some = (before >= 0) | (after >= 0)
        if not some.any():
            none = np.full(n, -1, np.int64)
            return none, none, none, []
        b_id = np.where(before >= 0, idx.ids[np.maximum(before, 0)], -1)
        a_id = np.where(after >= 0, idx.ids[np.maximum(after, 0)], -1)
        at = np.where(before >= 0, before, after)
        codes = np.where(some, idx.tid.codes[np.maximum(at, 0)], -1)
        used, inv = np.unique(codes, return_inverse=True)
        base = 1 if len(used) and used[0] < 0 else 0
        thread = np.where(codes >= 0, inv.astype(np.int64) - base, -1)
        values = idx.tid.values.tolist()
        names = [str(values[c]) for c in used.tolist() if c >= 0]
        return b_id, a_id, thread, names

    def dicts(self, idx: EventIndex) -> list[dict[str, Any]]:
        """The pieces as the report's ``segments``: ``rank``, ``label``, ``name``,
        ``event_id``, ``start_ns``, ``dur_us``."""
        if not len(self):
            return []
        row = self.row
        valid = row >= 0
        safe = np.maximum(row, 0)
        ids = np.where(valid, idx.ids[safe], -1).tolist()
        codes = np.where(valid, idx.name.codes[safe], -1)
        values = idx.name.values.tolist()
        uniq, inv = np.unique(codes, return_inverse=True)
        name_of = [str(values[c]) if c >= 0 else None for c in uniq.tolist()]
        names = [name_of[k] for k in inv.tolist()]
        labels = [LABELS[k] for k in self.label.tolist()]
        durs = np.round(self.dur_ns / 1000.0, 3).tolist()
        out = [
            {
                "rank": rk,
                "label": lb,
                "name": nm,
                "event_id": i if i >= 0 and nm is not None else None,
                "start_ns": t,
                "dur_us": d,
            }
            for rk, lb, nm, i, t, d in zip(
                self.rank.tolist(), labels, names, ids, self.start_ns.tolist(), durs, strict=True
            )
        ]
        b_id, a_id, thread, threads = self.evidence(idx)
        for k in np.flatnonzero(thread >= 0).tolist():
            out[k]["evidence"] = {
                "thread": threads[int(thread[k])],
                "before_event_id": int(b_id[k]) if b_id[k] >= 0 else None,
                "after_event_id": int(a_id[k]) if a_id[k] >= 0 else None,
            }
        return out

    def top(self, idx: EventIndex, n: int) -> list[dict[str, Any]]:
        """The pieces summed per (label, event name), biggest first: ``label``, ``name``,
        ``dur_us``, ``pieces``."""
        if not len(self):
            return []
        codes = np.where(self.row >= 0, idx.name.codes[np.maximum(self.row, 0)], -1)
        key = self.label.astype(np.int64) * (len(idx.name.values) + 1) + (codes + 1)
        weights = self.dur_ns.astype(np.float64)
        bins = len(LABELS) * (len(idx.name.values) + 1)
        if bins <= 4 * len(key) + 65536:  # the keys' range is small: counted in place, no sort
            count = np.bincount(key, minlength=bins)
            uniq = np.flatnonzero(count)
            total = np.bincount(key, weights=weights, minlength=bins)[uniq]
            count = count[uniq]
        else:
            uniq, inv = np.unique(key, return_inverse=True)
            total = np.bincount(inv, weights=weights)
            count = np.bincount(inv)
        values = idx.name.values.tolist()
        out = []
        for k in np.lexsort((uniq, -total))[:n].tolist():
            lab, code = divmod(int(uniq[k]), len(values) + 1)
            out.append(
                {
                    "label": LABELS[lab],
                    "name": str(values[code - 1]) if code > 0 else None,
                    "dur_us": round(float(total[k]) / 1000.0, 3),
                    "pieces": int(count[k]),
                }
            )
        return out


class Segments(Sequence[dict[str, Any]]):
    """The report's ``segments`` kept columnar (a sequence of dicts, built on first use).

    A large path has a piece per host event (1.3M on an 800k-event CPU-bound trace): a report
    rendered as text or served to the explorer never builds them, and JSON writers take
    :meth:`json` (written in one C pass; see :func:`json_default`).  Reading it as a sequence
    (``len``, indexing, iteration, ``list(...)``) gives the dicts :meth:`Pieces.dicts` makes."""

    def __init__(self, parts: Pieces, idx: EventIndex) -> None:
        self.blocks: list[tuple[Pieces, EventIndex]] = [(parts, idx)]
        self._list: list[dict[str, Any]] | None = None

    @classmethod
    def of_blocks(cls, blocks: Sequence[tuple[Pieces, EventIndex]]) -> Segments:
        """Several runs of pieces, each named through its own index (a job's ranks), read as
        one sequence in order."""
        out = cls.__new__(cls)
        out.blocks = [(p, i) for p, i in blocks if len(p)]
        out._list = None
        return out

    def __len__(self) -> int:
        return sum(len(p) for p, _i in self.blocks)

    def _items(self) -> list[dict[str, Any]]:
        if self._list is None:
            self._list = self.fresh()
        return self._list

    def fresh(self) -> list[dict[str, Any]]:
        """Every segment's dict made anew (reading the sequence gives the dicts it keeps: a
        document that is changed must not change them)."""
        return [d for p, i in self.blocks for d in p.dicts(i)]

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        return self._items()[i]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self._items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Segments):
            return self._items() == other._items()
        if isinstance(other, list):
            return self._items() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Segments({len(self)} pieces)"

    def take(self, positions: np.ndarray) -> list[dict[str, Any]]:
        """The dicts of the segments at ``positions`` (in that order; none of the others is
        built)."""
        if self._list is not None:
            return [self._list[k] for k in positions.tolist()]
        starts = np.cumsum([0] + [len(p) for p, _i in self.blocks])
        which = np.searchsorted(starts, positions, side="right") - 1
        out: list[dict[str, Any] | None] = [None] * len(positions)
        for b in unique_ints(which).tolist():
            at = np.flatnonzero(which == b)
            p, idx = self.blocks[b]
            local = positions[at] - starts[b]
            sub = p.take(local)
            for k, d in zip(at.tolist(), sub.dicts(idx), strict=True):
                out[k] = d
        return [d for d in out if d is not None]

    def durations_us(self) -> np.ndarray:
        """Each segment's ``dur_us`` (as the dicts hold it), without building them."""
        if not self.blocks:
            return np.zeros(0)
        return np.round(np.concatenate([p.dur_ns for p, _i in self.blocks]) / 1000.0, 3)

    def json(self) -> bytes:
        """The segments as a JSON array, as ``orjson.dumps(list(self))`` writes it."""
        return b"".join(self.json_chunks())

    def json_chunks(self, per_chunk: int | None = None) -> Iterator[bytes]:
        """:meth:`json` in pieces of at most ``per_chunk`` segments each (default
        :data:`JSON_CHUNK`; a path of a million segments is over 100 MB of JSON: written piece
        by piece, it is never held whole)."""
        per_chunk = JSON_CHUNK if per_chunk is None else max(1, per_chunk)
        if _pieces is None or not len(self):
            yield orjson.dumps(self._items())
            return
        yield b"["
        sep = b""
        for p, idx in self.blocks:
            for lo in range(0, len(p), per_chunk):
                yield sep + _block_json(p.slice(lo, lo + per_chunk), idx)[1:-1]
                sep = b","
        yield b"]"


def _block_json(p: Pieces, idx: EventIndex) -> bytes:
    """One block's pieces as a JSON array, in one pass of the C writer."""
    assert _pieces is not None
    valid = p.row >= 0
    safe = np.maximum(p.row, 0)
    codes = np.where(valid, idx.name.codes[safe], -1)
    uniq, inv = np.unique(codes, return_inverse=True)
    values = idx.name.values.tolist()
    used = [c for c in uniq.tolist() if c >= 0]
    names = tuple(orjson.dumps(str(values[c])) for c in used)
    base = 1 if len(uniq) and uniq[0] < 0 else 0
    name = np.where(codes >= 0, inv.astype(np.int64) - base, -1)
    eid = np.where(valid & (codes >= 0), idx.ids[safe], -1)
    b_id, a_id, thread, threads = p.evidence(idx)
    out: bytes = _pieces.dumps(
        np.ascontiguousarray(p.rank, dtype=np.int64),
        np.ascontiguousarray(p.label, dtype=np.int64),
        np.ascontiguousarray(name, dtype=np.int64),
        np.ascontiguousarray(eid, dtype=np.int64),
        np.ascontiguousarray(p.start_ns, dtype=np.int64),
        np.ascontiguousarray(p.dur_ns, dtype=np.int64),
        tuple(orjson.dumps(x) for x in LABELS),
        names,
        (
            np.ascontiguousarray(b_id, dtype=np.int64),
            np.ascontiguousarray(a_id, dtype=np.int64),
            np.ascontiguousarray(thread, dtype=np.int64),
            tuple(orjson.dumps(x) for x in threads),
        ),
    )
    return out


def json_default(obj: Any) -> Any:
    """``default=`` for ``orjson.dumps`` of report data: :class:`Segments` as their JSON."""
    if isinstance(obj, Segments):
        return orjson.Fragment(obj.json())
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


_LEAVES = frozenset({str, int, float, bool, type(None)})


def plain(data: Any) -> Any:
    """``data`` with every :class:`Segments` made a list of new dicts (for ``json``, ``==``
    and pickling); dicts and lists (subclasses too) are copied as plain ones, everything
    else is kept.

    A report holds a few hundred thousand scalars: they are passed over by their exact type,
    with no call or ``isinstance`` each."""
    t = type(data)
    if t is dict:
        return {k: v if type(v) in _LEAVES else plain(v) for k, v in data.items()}
    if t is list:
        return [v if type(v) in _LEAVES else plain(v) for v in data]
    if isinstance(data, Segments):
        return data.fresh()
    if isinstance(data, dict):
        return {k: plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [plain(v) for v in data]
    return data


def pieces(
    graph: Graph,
    path: Path,
    weight: np.ndarray | None = None,
    rank_of_node: np.ndarray | None = None,
) -> Pieces:
    """The path's :class:`Pieces` (``rank_of_node``: each node's rank, for a job's graph)."""
    w = graph.weight if weight is None else weight
    # the path's edge-sized arrays are let go as soon as the pieces' own are made (the path
    # is about as long as the graph: these are the critical-path section's largest arrays)
    e = path.edges
    we = w[e]
    on = (we > 0) & (graph.label[e] >= 0)
    e, we = e[on], we[on]
    del on
    row, lab = graph.edge_row[e], graph.label[e]
    new = np.ones(len(e), dtype=bool)
    new[1:] = (row[1:] != row[:-1]) | (lab[1:] != lab[:-1])
    rank = None
    if rank_of_node is not None:
        rank = rank_of_node[graph.src[e]]
        new[1:] |= rank[1:] != rank[:-1]
    first = np.flatnonzero(new)
    del new
    # one rank: its number read through a view of one value, not a column of copies
    ranks = (
        rank[first]
        if rank is not None
        else np.broadcast_to(np.asarray(graph.rank, dtype=np.int64), (len(first),))
    )
    del rank
    sums = np.add.reduceat(we, first) if len(e) else np.zeros(0, dtype=np.int64)
    w_first = we[first]
    del we
    row, lab = row[first], lab[first]
    last = np.r_[first[1:] - 1, len(e) - 1] if len(e) else first
    e_first, e_last = e[first], e[last]
    del e, first, last
    # a piece begins where its time begins: its first edge's end less that edge's weight
    t0 = graph.time[graph.dst[e_first]] - w_first
    del w_first
    gap = lab == UNTRACED
    before = np.where(gap, graph.row[graph.src[e_first]], -1)
    after = np.where(gap, graph.row[graph.dst[e_last]], -1)
    del e_first, e_last, gap
    # the evidence's two columns only where a piece has one (the untraced pieces, a few in
    # a hundred), the rows and durations in half the memory where they fit: the pieces are
    # kept for the report's segments until it is written
    gap_at = np.flatnonzero((before >= 0) | (after >= 0))
    before, after = before[gap_at], after[gap_at]
    if (
        len(row)
        and max(int(before.max(initial=0)), int(after.max(initial=0)), int(row.max())) < 2**31
    ):
        before, after = before.astype(np.int32), after.astype(np.int32)
        row = row.astype(np.int32)
        gap_at = gap_at.astype(np.int32)
    if len(sums) and int(sums.min()) >= 0 and int(sums.max()) < 2**31:
        sums = sums.astype(np.int32)
    return Pieces(ranks, lab, row, t0, sums, before, after, gap_at)


def segments(
    graph: Graph,
    path: Path,
    idx: EventIndex,
    weight: np.ndarray | None = None,
    rank_of_node: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """The path as the report's ``segments`` (see :meth:`Pieces.dicts`)."""
    return pieces(graph, path, weight, rank_of_node).dicts(idx)


__all__ = [
    "Path",
    "Pieces",
    "Segments",
    "json_default",
    "longest_edges",
    "longest_per_step",
    "pieces",
    "plain",
    "segments",
    "solve",
    "solve_length",
    "step_paths",
]
