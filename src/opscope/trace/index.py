"""The event index: the event table as NumPy arrays, built once per trace and shared.

Every analysis after ``load()`` (the derived ``ops``/``kernels`` tables, the finding rules, the
explorer's viewport and dependency chains) reads the events through one :class:`EventIndex`,
``Trace.index``.  Its arrays are indexed by **row** (an event's position in ``Trace.events``) and
computed on first use:

* ``ids`` and :meth:`EventIndex.rows_of`, which maps event ids to rows: by subtraction when the
  ids are the row positions (``contiguous``, what ingest writes), by binary search otherwise;
  no consumer assumes either;
* the string columns as :class:`~opscope.trace.arrays.Codes` (``source``, ``kind``, ``cat``,
  ``name``, ``pid``, ``tid``, ``lane``): integer codes into the sorted distinct values;
* ``rank``, ``start``, ``dur``, ``end``, ``step`` (-1 when none);
* links as rows (-1 when none): ``parent`` (``parent_id``), ``op`` (``op_id``), ``launch``
  (``launch_id``);
* the **op tree** (framework events of kind op, annotation and step nested with Python frames
  skipped; see :mod:`opscope.trace.derived`): ``tree_parent``, ``depth``, ``in_tree``,
  ``is_leaf``, ``child_dur`` (durations of the direct children, runtime calls included),
  ``self_ns`` and :meth:`EventIndex.subtree_sum`;
* ``thread`` - one code per (rank, pid, tid);
* ``shapes`` - the recorded ``Input Dims``/``Input type`` of each framework event
  (:class:`Shapes`, cut out of the ``args`` text by :func:`shape_texts`);
* inverse links: :meth:`EventIndex.pointing_at` gives the rows whose ``op``, ``launch``,
  ``parent`` or ``tree_parent`` is a given row (CSR-style, one stable sort per link).

Consumers keep what they derive from the index on it with :meth:`EventIndex.memo`, so a second
analysis of the same trace (another step window, the explorer) reuses it.  A step window is a
mask over the index (:meth:`EventIndex.in_steps`), never a copy.  :data:`DEVICE_WORK_KINDS` is
the one list of the kinds that count as device work.  :func:`sure_json` and
:func:`top_level_strings` read values off compact ``args`` texts where that is provably what
orjson would decode.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.arrays import Codes, bools, ints
from opscope.trace.schema import DEVICE_WORK_KINDS

if TYPE_CHECKING:
    from collections.abc import Callable

# Device events that are work (device time): kernels, copies, sets, collectives, Neuron
# executions.  Device annotations and stream waits are not.
# Framework kinds that form the op tree.
TREE_KINDS = ("op", "annotation", "step")

_MAX_JUMPS = 64  # pointer doubling: 2**64 ancestors, far beyond any call stack


@dataclass(frozen=True)
class Shapes:
    """``Input Dims`` and ``Input type`` of each event, as ``orjson.dumps`` writes them.

    ``code[row]`` indexes ``dims``/``types`` (the distinct pairs), -1 when the event's ``args``
    hold no ``"Input Dims"``; a pair member is None when the key is absent or null, or the args
    do not decode.
    """

    code: np.ndarray
    dims: list[str | None]
    types: list[str | None]


class EventIndex:
    """Per-trace arrays over the event table (see the module docstring)."""

    def __init__(self, events: pa.Table) -> None:
        self.events = events
        self.n = int(events.num_rows)
        self._memo: dict[str, Any] = {}

    def __len__(self) -> int:
        return self.n

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """``build()`` once per index under ``key``: arrays a consumer derives and shares."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    # -- ids and rows ------------------------------------------------------------------------
    @cached_property
    def ids(self) -> np.ndarray:
        return ints(self.events.column("id"))

    @cached_property
    def contiguous(self) -> bool:
        """Whether the ids are consecutive (``id - ids[0]`` is the row)."""
        ids = self.ids
        if self.n == 0:
            return True
        return bool(int(ids[-1]) - int(ids[0]) == self.n - 1 and (np.diff(ids) == 1).all())

    @cached_property
    def _id_order(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.ids, kind="stable")
        return order, self.ids[order]

    def rows_of(self, ids: np.ndarray | pa.ChunkedArray | pa.Array) -> np.ndarray:
        """Rows of event ids (an array, or an Arrow column whose nulls mean none); -1 where
        the id is null or not in the table."""
        if isinstance(ids, (pa.ChunkedArray, pa.Array)):
            null = ~bools(ids.is_valid()) if ids.null_count else None
            values = ints(ids, 0)
        else:
            null = None
            values = np.asarray(ids, dtype=np.int64)
        n = self.n
        if n == 0:
            return np.full(len(values), -1, dtype=np.int64)
        if self.contiguous:
            rows = values - int(self.ids[0])
            bad = (rows < 0) | (rows >= n)
        else:
            order, sorted_ids = self._id_order
            pos = np.minimum(np.searchsorted(sorted_ids, values), n - 1)
            bad = sorted_ids[pos] != values
            rows = order[pos]
        if null is not None:
            bad |= null
        return np.where(bad, -1, rows).astype(np.int64)

    def _link(self, column: str) -> np.ndarray:
        if column not in self.events.column_names:
            return np.full(self.n, -1, dtype=np.int64)
        return self.rows_of(self.events.column(column))

    @cached_property
    def parent(self) -> np.ndarray:
        """Row of the enclosing event (``parent_id``), -1 at top level."""
        return self._link("parent_id")

    @cached_property
    def op(self) -> np.ndarray:
        """Row of the issuing framework event (``op_id``), -1 when none."""
        return self._link("op_id")

    @cached_property
    def launch(self) -> np.ndarray:
        """Device rows: row of the launching runtime call (``launch_id``), -1 when none."""
        return self._link("launch_id")

    def _inverse(self, link: str) -> tuple[np.ndarray, np.ndarray]:
        """Rows sorted by the row a link points to (``op``, ``launch``...), and those targets:
        the rows pointing at ``r`` are ``order[lo:hi]`` for ``lo, hi`` the bounds of ``r``
        (CSR offsets, made on first use)."""

        def build() -> tuple[np.ndarray, np.ndarray]:
            target = getattr(self, link)
            order = np.argsort(target, kind="stable")
            return order, target[order]

        out: tuple[np.ndarray, np.ndarray] = self.memo(f"inverse.{link}", build)
        return out

    def pointing_at(self, link: str, row: int) -> np.ndarray:
        """Rows whose ``link`` (``op``, ``launch``, ``parent``, ``tree_parent``) is ``row``,
        in row order."""
        order, target = self._inverse(link)
        lo, hi = np.searchsorted(target, [row, row + 1])
        return np.asarray(order[lo:hi], dtype=np.int64)

    # -- columns -----------------------------------------------------------------------------
    def _codes(self, column: str) -> Codes:
        return Codes.of(self.events.column(column))

    @cached_property
    def source(self) -> Codes:
        return self._codes("source")

    @cached_property
    def kind(self) -> Codes:
        return self._codes("kind")

    @cached_property
    def cat(self) -> Codes:
        return self._codes("cat")

    @cached_property
    def name(self) -> Codes:
        return self._codes("name")

    @cached_property
    def pid(self) -> Codes:
        return self._codes("pid")

    @cached_property
    def tid(self) -> Codes:
        return self._codes("tid")

    @cached_property
    def lane(self) -> Codes:
        return self._codes("lane")

    @cached_property
    def rank(self) -> np.ndarray:
        return ints(self.events.column("rank"), 0)

    @cached_property
    def start(self) -> np.ndarray:
        return ints(self.events.column("start_ns"), 0)

    @cached_property
    def dur(self) -> np.ndarray:
        return ints(self.events.column("dur_ns"), 0)

    @cached_property
    def end(self) -> np.ndarray:
        return np.asarray(self.start + self.dur, dtype=np.int64)

    @cached_property
    def step(self) -> np.ndarray:
        """Profiler step of each event, -1 when none."""
        return ints(self.events.column("step"))

    def in_steps(self, steps: tuple[int, int] | None) -> np.ndarray:
        """The window mask: events whose step is in ``[first, last]`` (all when None)."""
        if steps is None:
            return np.ones(self.n, dtype=bool)
        lo, hi = steps
        return np.asarray((self.step >= lo) & (self.step <= hi), dtype=bool)

    # -- classes -----------------------------------------------------------------------------
    @cached_property
    def is_framework(self) -> np.ndarray:
        return self.source.eq("framework")

    @cached_property
    def is_runtime(self) -> np.ndarray:
        return self.source.eq("runtime")

    @cached_property
    def is_device(self) -> np.ndarray:
        return self.source.eq("device")

    @cached_property
    def is_work(self) -> np.ndarray:
        """Device executions: device events of a :data:`DEVICE_WORK_KINDS` kind."""
        return np.asarray(self.is_device & self.kind.isin(DEVICE_WORK_KINDS), dtype=bool)

    @cached_property
    def in_tree(self) -> np.ndarray:
        """Framework events of kind op, annotation or step: the op tree's nodes."""
        return np.asarray(self.is_framework & self.kind.isin(TREE_KINDS), dtype=bool)

    # -- the op tree -------------------------------------------------------------------------
    @cached_property
    def tree_parent(self) -> np.ndarray:
        """Parent row in the op tree: the nearest enclosing event that is not a Python frame
        (-1 at top level)."""
        parent = self.parent
        is_python = self.kind.eq("python")
        # up[r]: r itself unless it is a Python frame, else its nearest non-Python ancestor
        up = np.arange(self.n, dtype=np.int64)
        act = np.flatnonzero(is_python)
        up[act] = parent[act]
        for _ in range(_MAX_JUMPS):
            u = up[act]
            act = act[(u >= 0) & is_python[np.maximum(u, 0)]]
            if not len(act):
                break
            up[act] = up[up[act]]
        return np.where(parent >= 0, up[np.maximum(parent, 0)], -1).astype(np.int64)

    @cached_property
    def depth(self) -> np.ndarray:
        """Ancestors of each event in the op tree (``tree_parent`` hops to the top)."""
        anc = self.tree_parent.copy()
        depth: np.ndarray = (anc >= 0).astype(np.int64)
        act = np.flatnonzero(anc >= 0)
        for _ in range(_MAX_JUMPS):
            a = anc[act]
            act_up = anc[a]
            depth[act] += depth[a]
            anc[act] = act_up
            act = act[act_up >= 0]
            if not len(act):
                break
        return depth

    @cached_property
    def child_dur(self) -> np.ndarray:
        """Summed durations of each event's direct children in the op tree, runtime calls
        included (torch counts a launch as a child CPU event of its op)."""
        tp = self.tree_parent
        child = (self.is_runtime | self.in_tree) & (tp >= 0)
        return np.bincount(tp[child], weights=self.dur[child], minlength=self.n).astype(np.int64)

    @cached_property
    def self_ns(self) -> np.ndarray:
        """Duration minus :attr:`child_dur`."""
        return np.asarray(self.dur - self.child_dur, dtype=np.int64)

    @cached_property
    def tree_children(self) -> np.ndarray:
        """Op-tree children (op, annotation, step) of each event."""
        tp = self.tree_parent
        child = self.in_tree & (tp >= 0)
        return np.bincount(tp[child], minlength=self.n).astype(np.int64)

    @cached_property
    def is_leaf(self) -> np.ndarray:
        """Op-tree nodes without op-tree children."""
        return np.asarray(self.in_tree & (self.tree_children == 0), dtype=bool)

    def subtree_sum(self, values: np.ndarray) -> np.ndarray:
        """``values`` summed over each op-tree node's subtree (deepest first, each node adds
        its total to its parent); rows outside the tree keep their own value plus what their
        tree children pass them."""
        total = np.array(values, dtype=np.int64, copy=True)
        tp = self.tree_parent
        rows = np.flatnonzero(self.in_tree & (tp >= 0))
        if not len(rows):
            return total
        d = self.depth[rows]
        rows = rows[np.argsort(-d, kind="stable")]
        d = self.depth[rows]
        cuts = np.flatnonzero(np.diff(d)) + 1
        for level in np.split(rows, cuts):
            np.add.at(total, tp[level], total[level])
        return total

    # -- groups ------------------------------------------------------------------------------
    @cached_property
    def thread(self) -> np.ndarray:
        """One code per (rank, pid, tid), ordered like the triple (pid and tid as text)."""
        if self.n == 0:
            return np.zeros(0, dtype=np.int64)
        rank = self.rank - int(self.rank.min())
        pid = self.pid.text_codes().astype(np.int64) + 1
        tid = self.tid.text_codes().astype(np.int64) + 1
        n_pid, n_tid = len(self.pid.values) + 1, len(self.tid.values) + 1
        key = (rank * n_pid + pid) * n_tid + tid
        return np.asarray(np.unique(key, return_inverse=True)[1], dtype=np.int64).reshape(-1)

    # -- args --------------------------------------------------------------------------------
    def args_text(self, row: int) -> str | None:
        """The ``args`` text of one row."""
        value = self.events.column("args")[row].as_py()
        return None if value is None else str(value)

    @cached_property
    def shapes(self) -> Shapes:
        """The recorded input shapes of the framework events (:class:`Shapes`,
        :func:`shape_texts`); other events have none."""
        code = np.full(self.n, -1, dtype=np.int64)
        has, dims, types = _shapes_of(self.events.column("args"), self.is_framework)
        if not has.any():
            return Shapes(code=code, dims=[], types=[])
        d_codes = Codes.of(dims)
        t_codes = Codes.of(types)
        width = len(t_codes.values) + 1
        key = (d_codes.codes.astype(np.int64) + 1) * width + (t_codes.codes.astype(np.int64) + 1)
        uniq, inverse = np.unique(key, return_inverse=True)
        code[has] = inverse.reshape(-1)
        return Shapes(
            code=code,
            dims=[None if c < 0 else str(d_codes.values[c]) for c in (uniq // width - 1).tolist()],
            types=[None if c < 0 else str(t_codes.values[c]) for c in (uniq % width - 1).tolist()],
        )

    def shape_columns(self, rows: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """``input_dims`` and ``input_types`` of ``rows`` as string columns."""
        sh = self.shapes
        code = sh.code[rows]
        dims = pa.array([*sh.dims, None], pa.string())
        types = pa.array([*sh.types, None], pa.string())
        idx = pa.array(np.where(code >= 0, code, len(sh.dims)))
        return dims.take(idx), types.take(idx)


# -- Input Dims / Input type from the args text ------------------------------------------------

# A run of digits orjson would read as an infinite number (and refuse)
_HUGE_NUMBER = r"[0-9]{309}"
# Values the fast path copies verbatim, as orjson writes them back: lists of plain strings
# (types; dims are checked byte by byte, _plain_int_lists)
_TYPES_VALUE = r'^\[(?:"[^"]*"(?:,"[^"]*")*)?\]$'
# orjson refuses nesting deeper than 1024 levels: a text with this many ``[`` is left to it
# (a shorter text cannot hold them)
_DEEP = 1000


_PIECE_ROWS = 1 << 16  # texts per pass: buffers stay small and are reused, not faulted in anew
_MAX_THREADS = 8


def shape_texts(
    args: pa.ChunkedArray | pa.Array, rows: np.ndarray | None = None
) -> tuple[pa.ChunkedArray, pa.ChunkedArray, np.ndarray]:
    """``Input Dims`` and ``Input type`` of every ``args`` text (of the ``rows`` mask, when
    given; others get None), each as ``orjson.dumps`` writes the value of
    ``orjson.loads(text)``, plus the mask of the rows whose text contains ``"Input Dims"``
    (the others, and texts orjson refuses, give None/None).

    The text is valid, compact JSON (ingest checks it and removes whitespace outside strings).
    Where both values can be proven equal to what orjson would write - one object, no nested
    object, no escape, no number orjson might read otherwise, each key once, values that are
    lists of unsigned integers (dims) or of plain strings (types) - they are cut out of the
    text by a few vectorised passes (a slice of at most ``_PIECE_ROWS`` texts at a time, slices
    on as many threads as there are CPUs); the other texts are decoded with orjson one by one.
    """
    has, dims, types = _shapes_of(args, rows)
    on = pa.array(has)
    nulls = pa.nulls(len(has), pa.string())
    return (
        pa.chunked_array([pc.replace_with_mask(nulls, on, dims.combine_chunks())]),
        pa.chunked_array([pc.replace_with_mask(nulls, on, types.combine_chunks())]),
        has,
    )


def _shapes_of(
    args: pa.ChunkedArray | pa.Array, rows: np.ndarray | None
) -> tuple[np.ndarray, pa.ChunkedArray, pa.ChunkedArray]:
    """:func:`shape_texts` as (mask of the rows with ``"Input Dims"``, their dims, their
    types): the values of those rows only, in row order."""
    col = args if isinstance(args, pa.ChunkedArray) else pa.chunked_array([args], pa.string())
    pieces: list[tuple[pa.Array, np.ndarray | None]] = []
    at = 0
    for chunk in col.chunks:
        for lo in range(0, len(chunk), _PIECE_ROWS):
            piece = chunk.slice(lo, _PIECE_ROWS)
            pieces.append((piece, None if rows is None else rows[at : at + len(piece)]))
            at += len(piece)
    # the passes release the GIL: slices run side by side, as the ingest's runs do
    workers = min(len(pieces), os.cpu_count() or 1, _MAX_THREADS)
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            done = list(pool.map(lambda p: _shape_piece(*p), pieces))
    else:
        done = [_shape_piece(*p) for p in pieces]
    return (
        np.concatenate([h for h, _, _ in done]) if done else np.zeros(0, dtype=bool),
        pa.chunked_array([d for _, d, _ in done], pa.string()),
        pa.chunked_array([t for _, _, t in done], pa.string()),
    )


def _shape_piece(texts: pa.Array, want: np.ndarray | None) -> tuple[np.ndarray, pa.Array, pa.Array]:
    n = len(texts)
    has = np.zeros(n, dtype=bool)
    cand = np.arange(n) if want is None else np.flatnonzero(want)
    if len(cand) < n:
        texts = texts.take(pa.array(cand))
    hit = bools(pc.match_substring_regex(texts, '"Input Dims"')) if len(cand) else has[:0]
    has[cand[hit]] = True
    if not hit.any():
        empty = pa.array([], pa.string())
        return has, empty, empty
    sub = texts.filter(pa.array(hit))
    sure = sure_json(sub, nested=False)
    (dims, d_ok), (types, t_ok) = _values_after(
        sub, ("Dims", "type"), (_plain_int_lists, _plain_string_lists)
    )
    slow = np.flatnonzero(~(sure & d_ok & t_ok))
    if len(slow):
        decoded = [_decode_shape(t) for t in sub.take(pa.array(slow)).to_pylist()]
        mask = pa.array(np.isin(np.arange(len(sub)), slow))
        dims = pc.replace_with_mask(dims, mask, pa.array([d for d, _ in decoded], pa.string()))
        types = pc.replace_with_mask(types, mask, pa.array([t for _, t in decoded], pa.string()))
    return has, dims, types


_INT_LIST_BYTES = np.zeros(256, dtype=bool)
_INT_LIST_BYTES[[ord(c) for c in "[],0123456789"]] = True


def _plain_int_lists(values: pa.Array) -> np.ndarray:
    """Which texts are lists (of lists) of unsigned integers of at most 19 digits, brackets
    balanced: what orjson writes back byte for byte."""
    n = len(values)
    body, starts, ends = _string_buffers(values)
    ok = (ends - starts) >= 2
    if not len(body):
        return np.zeros(n, dtype=bool)
    ok &= body[np.minimum(starts, len(body) - 1)] == ord("[")
    ok &= body[np.maximum(ends - 1, 0)] == ord("]")

    def rows_at(pos: np.ndarray) -> np.ndarray:
        return np.asarray(np.searchsorted(starts, pos, side="right") - 1, dtype=np.int64)

    ok[rows_at(np.flatnonzero(~_INT_LIST_BYTES[body]))] = False
    depth = np.concatenate(
        ([0], np.cumsum((body == ord("[")).astype(np.int64) - (body == ord("]"))))
    )
    ok &= depth[ends] == depth[starts]
    digits = np.concatenate(([0], np.cumsum((body - ord("0")) < 10)))
    if len(body) >= 20:
        run = np.flatnonzero(digits[20:] - digits[:-20] == 20)
        ok[rows_at(run)] = False
    return np.asarray(ok, dtype=bool)


def _plain_string_lists(values: pa.Array) -> np.ndarray:
    """Which texts are lists of strings (no escapes in the text): what orjson writes back."""
    return bools(pc.match_substring_regex(values, _TYPES_VALUE))


def _string_buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes of all the texts, start and end of each text in them) of a string array."""
    n = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + n + 1]
    offsets = offsets.astype(np.int64)
    data = texts.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    lo = int(offsets[0]) if n else 0
    body = raw[lo : int(offsets[-1])] if n else raw[:0]
    return body, offsets[:-1] - lo, offsets[1:] - lo


_BLOCK = 1 << 20  # bytes per NumPy pass: temporaries stay small (no page faults per pass)


def _scan_bytes(body: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the backslashes, of the exponent marks (``e``/``E`` before a digit or a
    sign) and of the ``{`` in ``body``, a block at a time."""
    found: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    for lo in range(0, len(body), _BLOCK):
        b = body[lo : lo + _BLOCK + 1]  # one byte more: a mark at the end sees what follows
        head, nxt = b[:-1] if len(b) > _BLOCK else b, b[1:]
        found[0].append(np.flatnonzero(head == ord("\\")) + lo)
        mark = (b[: len(nxt)] | 0x20) == ord("e")
        follows = ((nxt - ord("0")) < 10) | (nxt == ord("+")) | (nxt == ord("-"))
        found[1].append(np.flatnonzero(mark & follows) + lo)
        found[2].append(np.flatnonzero(head == ord("{")) + lo)
    empty = np.zeros(0, dtype=np.int64)
    return tuple(np.concatenate(f) if f else empty for f in found)  # type: ignore[return-value]


def sure_json(texts: pa.Array, nested: bool = True) -> np.ndarray:
    """Which JSON object texts a fast path may read as orjson would (the texts must be valid
    JSON, as ingest writes ``args``): no escape (``\\``), no exponent and no run of 309 digits
    (orjson refuses infinite numbers), not nested 1000 deep, and with ``nested=False`` no
    inner object (every key at the top level).  One pass over the bytes with NumPy."""
    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=bool)
    body, starts, ends = _string_buffers(texts)
    bad = np.zeros(n, dtype=bool)

    def flag(pos: np.ndarray) -> None:
        bad[np.searchsorted(starts, pos, side="right") - 1] = True

    if len(body):
        first = body[np.minimum(starts, len(body) - 1)]
        bad |= (ends > starts) & (first != ord("{"))
        escapes, exponents, braces = _scan_bytes(body)
        flag(escapes)
        flag(exponents)
        if not nested:
            row = np.searchsorted(starts, braces, side="right") - 1
            bad[row[braces != starts[row]]] = True
    long = np.flatnonzero((ends - starts) >= min(_DEEP, 309))
    if len(long):
        some = texts.take(pa.array(long))
        deep = ints(pc.count_substring_regex(some, r"[\[{]"), 0) >= _DEEP
        huge = bools(pc.match_substring_regex(some, _HUGE_NUMBER))
        bad[long[deep | huge]] = True
    return ~bad


def top_level_strings(texts: pa.Array, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The string value of a top-level ``key`` in each JSON object text (None when absent or
    not a string) and where that answer is sure (the others need a decoder): the text is
    :func:`sure_json`, the key appears once, nothing opens before it but the object itself,
    and its value, when a string, has no escape (none in the text)."""
    n = len(texts)
    values = np.full(n, None, dtype=object)
    if n == 0:
        return values, np.zeros(0, dtype=bool)
    sure = sure_json(texts)
    quoted = '"' + key + '":'
    parts = pc.split_pattern(texts, quoted)
    count = ints(pc.list_value_length(parts), 1) - 1
    sure &= count <= 1
    once = np.flatnonzero(sure & (count == 1))
    if len(once):
        pick = pa.array(once)
        before = pc.list_element(parts.take(pick), 0)
        after = pc.list_element(parts.take(pick), 1)
        # only the object's own brace before the key: the key is at the top level
        top = ~bools(pc.match_substring_regex(before, r".[\[{]"))
        sure[once[~top]] = False
        ok = top & bools(pc.starts_with(after, '"'))
        if ok.any():
            quoted_value = after.filter(pa.array(ok))
            text = pc.list_element(pc.split_pattern(quoted_value, '"', max_splits=2), 1)
            values[once[ok]] = np.asarray(text.to_numpy(zero_copy_only=False), dtype=object)
    return values, sure


def _values_after(
    sub: pa.Array, keys: tuple[str, ...], checks: tuple[Callable[[pa.Array], np.ndarray], ...]
) -> list[tuple[pa.Array, np.ndarray]]:
    """For each ``"Input <key>":`` of ``keys``: its value in each text (null where the key is
    absent) and whether that value is sure - the key appears once and its value passes the
    key's check in ``checks`` (a mask over value texts).

    One split of the texts at ``"Input `` gives, after each such key, the piece up to the
    next one.  In valid compact JSON a list value is followed by ``,"`` (the next key) or by
    the closing ``}``: the value is cut at the first ``],"`` of its piece, or before the
    piece's last byte (``,`` before the next ``"Input ``, or the final ``}``); a cut that is
    not the value fails the check (strings checked whole, nested lists by their balance).  A
    text holding ``"Input `` elsewhere than in these keys (in a string) only leaves its values
    unsure.
    """
    n = len(sub)
    parts = pc.split_pattern(sub, '"Input ')
    list_offsets = np.frombuffer(parts.buffers()[1], dtype=np.int32)[parts.offset :][: n + 1]
    pieces = parts.values
    counts = np.diff(list_offsets)
    row_of = np.repeat(np.arange(n), counts)
    first_piece = np.zeros(len(pieces), dtype=bool)
    first_piece[list_offsets[:-1][counts > 0]] = True  # the text before the first key
    out: list[tuple[pa.Array, np.ndarray]] = []
    for key, check in zip(keys, checks, strict=True):
        head = key + '":'
        mine = np.flatnonzero(bools(pc.starts_with(pieces, head)) & ~first_piece)
        count = np.bincount(row_of[mine], minlength=n)
        ok = count == 0
        value = pa.nulls(n, pa.string())
        once = mine[count[row_of[mine]] == 1]
        if len(once):
            piece = pieces.take(pa.array(once))
            _, starts, ends = _string_buffers(piece)
            cut = ints(pc.find_substring(piece, '],"'), -1)
            lo = np.minimum(starts + len(head), ends)
            hi = np.maximum(np.where(cut >= 0, starts + cut + 1, ends - 1), lo)
            bounds = np.empty(2 * len(piece), dtype=np.int64)
            bounds[0::2], bounds[1::2] = lo, hi
            base = int(np.frombuffer(piece.buffers()[1], dtype=np.int32)[piece.offset])
            spans = pa.StringArray.from_buffers(
                len(bounds) - 1, pa.py_buffer((bounds + base).astype(np.int32)), piece.buffers()[2]
            )
            found = spans.take(pa.array(np.arange(0, len(bounds), 2)))
            rows = row_of[once]
            ok[rows] = check(found)
            mask = np.zeros(n, dtype=bool)
            mask[rows] = True
            value = pc.replace_with_mask(value, pa.array(mask), found)
        out.append((value, ok))
    return out


def _decode_shape(text: str | None) -> tuple[str | None, str | None]:
    if not text:
        return None, None
    try:
        d = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None, None
    dv = d.get("Input Dims")
    tv = d.get("Input type")
    return (
        orjson.dumps(dv).decode() if dv is not None else None,
        orjson.dumps(tv).decode() if tv is not None else None,
    )
