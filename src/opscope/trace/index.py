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
* ``rank``, ``start``, ``dur``, ``end``, ``step`` (-1 when none); ``ids``, ``start`` and
  ``dur`` are read-only views of the table's buffers (:class:`~opscope.trace.model.Trace`
  keeps those columns in one chunk), and ``rank`` of a one-rank table is one value repeated,
  so none of them is held twice;
* links as rows (-1 when none): ``parent`` (``parent_id``), ``op`` (``op_id``), ``launch``
  (``launch_id``);
* the **op tree** (framework events of kind op, annotation and step nested with Python frames
  skipped; see :mod:`opscope.trace.derived`): ``tree_parent``, ``depth``, ``in_tree``,
  ``is_leaf``, ``child_dur`` (durations of the direct children, runtime calls included),
  ``self_ns`` and :meth:`EventIndex.subtree_sum`;
* ``thread`` - one code per (rank, pid, tid);
* ``shapes`` - the recorded ``Input Dims``/``Input type`` of each framework event
  (:class:`Shapes`), and ``layouts`` - its ``Input Strides``/``Concrete Inputs``, both read
  off the ``args`` text once (``arg_values``, :mod:`opscope.trace.argtexts`);
* inverse links: :meth:`EventIndex.pointing_at` gives the rows whose ``op``, ``launch``,
  ``parent`` or ``tree_parent`` is a given row (CSR-style, one stable sort per link).

Consumers keep what they derive from the index on it with :meth:`EventIndex.memo`, so a second
analysis of the same trace (another step window, the explorer) reuses it.  A step window is a
mask over the index (:meth:`EventIndex.in_steps`), never a copy.  :data:`DEVICE_WORK_KINDS` is
the one list of the kinds that count as device work.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.argtexts import ArgValues, arg_values
from opscope.trace.arrays import Codes, ints, row_dtype, unique_inverse, valid
from opscope.trace.packed import PackedText
from opscope.trace.schema import DEVICE_WORK_KINDS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# Device events that are work (device time): kernels, copies, sets, collectives, Neuron
# executions.  Device annotations and stream waits are not.
# Framework kinds that form the op tree.
TREE_KINDS = ("op", "annotation", "step")
#: the string columns every analysis reads as codes (:meth:`EventIndex.share_codes`)
SHARED_CODES = ("source", "kind", "cat", "name", "pid", "tid")
#: the link columns and the index's rows of them (:meth:`EventIndex.hold_links`)
LINKS = {"parent_id": "parent", "op_id": "op", "launch_id": "launch"}

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
        # the ``args`` column when it is kept packed (:meth:`use_packed_args`), else None
        self._packed_args: PackedText | None = None
        # the link columns held as rows, out of the table (:meth:`hold_links`)
        self._held_links: set[str] = set()
        self._memo: dict[str, Any] = {}
        self._memo_locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def __len__(self) -> int:
        return self.n

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """``build()`` once per index under ``key``: arrays a consumer derives and shares.

        Threads asking for one key at once wait for the first one's build (the report's
        critical path runs on a thread of its own: :mod:`opscope.analysis.beside`)."""
        if key in self._memo:
            return self._memo[key]
        with self._guard:
            lock = self._memo_locks.setdefault(key, threading.Lock())
        with lock:
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

    def rows_of(
        self, ids: np.ndarray | pa.ChunkedArray | pa.Array, dtype: Any = np.int64
    ) -> np.ndarray:
        """Rows of event ids (an array, or an Arrow column whose nulls mean none); -1 where
        the id is null or not in the table.  ``dtype``: of the rows (:func:`row_dtype` of the
        table's size is enough)."""
        if isinstance(ids, (pa.ChunkedArray, pa.Array)):
            null = ~valid(ids) if ids.null_count else None
            values = ints(ids, 0)
        else:
            null = None
            values = np.asarray(ids, dtype=np.int64)
        n = self.n
        if n == 0:
            return np.full(len(values), -1, dtype=dtype)
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
        out: np.ndarray = np.where(bad, -1, rows).astype(dtype, copy=False)
        return out

    @property
    def row_dtype(self) -> type[np.signedinteger[Any]]:
        """The integer type of this index's row links (:attr:`parent`, :attr:`op`,
        :attr:`launch`, :attr:`tree_parent`): int32 below 2**31 rows (:func:`row_dtype`)."""
        return row_dtype(self.n)

    def _link(self, column: str) -> np.ndarray:
        if column in self._held_links:  # made before the column went (hold_links)
            raise RuntimeError(f"{column} is held by the index: its rows are read first")
        if column not in self.events.column_names:
            return np.full(self.n, -1, dtype=self.row_dtype)
        return self.rows_of(self.events.column(column), self.row_dtype)

    @cached_property
    def parent(self) -> np.ndarray:
        """Row of the enclosing event (``parent_id``), -1 at top level.  Read-only: it is
        also :attr:`tree_parent` where no Python frames are skipped."""
        rows = self._link("parent_id")
        rows.flags.writeable = False
        return rows

    @cached_property
    def op(self) -> np.ndarray:
        """Row of the issuing framework event (``op_id``), -1 when none."""
        return self._link("op_id")

    @cached_property
    def launch(self) -> np.ndarray:
        """Device rows: row of the launching runtime call (``launch_id``), -1 when none."""
        return self._link("launch_id")

    def hold_links(self) -> pa.Table:
        """The event table without the link columns (:data:`LINKS`) whose every id is a row
        this index holds (:attr:`parent`, :attr:`op`, :attr:`launch`), kept as
        :attr:`events`; :meth:`link_ids` gives their ids back.  A column holding an id that
        is no row of the table (only another tool's links could) stays in the table."""
        events = self.events
        for column, attr in LINKS.items():
            if column not in events.column_names:
                continue
            rows: np.ndarray = getattr(self, attr)
            if events.column(column).null_count != int(np.count_nonzero(rows < 0)):
                continue
            events = events.drop_columns([column])
            self._held_links.add(column)
        self.events = events
        return events

    def held_links(self) -> tuple[str, ...]:
        """The link columns this index holds out of the table (:meth:`hold_links`)."""
        return tuple(c for c in LINKS if c in self._held_links)

    def link_ids(self, column: str, rows: np.ndarray | None = None) -> pa.ChunkedArray:
        """A link column's ids (``parent_id``, ``op_id``, ``launch_id``) of ``rows`` (None:
        every row), null where none: the table's, or once held (:meth:`hold_links`) the ids
        of the rows the index holds."""
        if column not in self._held_links:
            col = self.events.column(column)
            return col if rows is None else col.take(pa.array(rows, pa.int64()))
        target: np.ndarray = getattr(self, LINKS[column])
        if rows is not None:
            target = target[np.asarray(rows, dtype=np.int64)]
        none = target < 0
        ids = np.zeros(len(target), dtype=np.int64)
        if len(target):
            np.take(self.ids, target, out=ids, mode="clip")
        return pa.chunked_array(
            [pa.array(ids, pa.int64(), mask=none if none.any() else None)], pa.int64()
        )

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

    def share_codes(self) -> pa.Table:
        """The event table with its string columns (those of :data:`SHARED_CODES`, and
        ``lane`` once read) made of this index's codes (each column one chunk of sorted
        values, its indices the :class:`Codes` array itself) and kept as :attr:`events`: the
        table's own indices (about 4 bytes an event a column) were a second copy of them.  The
        strings each row reads are the same; the dictionaries' order is not."""
        events = self.events
        lane = ("lane",) if "lane" in self.__dict__ else ()
        for column in (*SHARED_CODES, *lane):
            at = events.schema.get_field_index(column)
            if at < 0 or not pa.types.is_dictionary(events.schema.field(at).type):
                continue
            field = events.schema.field(at)
            codes: Codes = getattr(self, column)
            nulls = codes.codes < 0
            indices = pa.array(codes.codes, mask=nulls if nulls.any() else None)
            del nulls
            shared = pa.DictionaryArray.from_arrays(indices, codes.arrow_values)
            events = events.set_column(at, field, pa.chunked_array([shared], field.type))
        self.events = events
        return events

    @cached_property
    def rank(self) -> np.ndarray:
        """Rank of each event; one read-only value repeated (no memory) when the table has one
        rank."""
        col = self.events.column("rank")
        if self.n and not col.null_count:
            bounds = pc.min_max(col)
            lo, hi = int(bounds["min"].as_py()), int(bounds["max"].as_py())
            if lo == hi:
                return np.broadcast_to(np.int64(lo), (self.n,))
        return ints(col, 0)

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
        """Profiler step of each event, -1 when none (int32, as the table holds it)."""
        return ints(self.events.column("step"), dtype=np.int32)

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
        (-1 at top level); :attr:`parent` itself when the trace has no Python frames."""
        parent = self.parent
        is_python = self.kind.eq("python")
        if not is_python.any():  # no frames to skip: the parents themselves, not a copy
            return parent
        # up[r]: r itself unless it is a Python frame, else its nearest non-Python ancestor
        up = np.arange(self.n, dtype=parent.dtype)
        act = np.flatnonzero(is_python)
        up[act] = parent[act]
        for _ in range(_MAX_JUMPS):
            u = up[act]
            act = act[(u >= 0) & is_python[np.maximum(u, 0)]]
            if not len(act):
                break
            up[act] = up[up[act]]
        out: np.ndarray = np.where(parent >= 0, up[np.maximum(parent, 0)], -1)
        return out.astype(parent.dtype, copy=False)

    @cached_property
    def depth(self) -> np.ndarray:
        """Ancestors of each event in the op tree (``tree_parent`` hops to the top)."""
        anc = self.tree_parent.copy()
        depth: np.ndarray = (anc >= 0).astype(np.int32)
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

    @property
    def child_dur(self) -> np.ndarray:
        """Summed durations of each event's direct children in the op tree, runtime calls
        included (torch counts a launch as a child CPU event of its op).  Computed on each
        use, not kept: :attr:`self_ns` is kept."""
        tp = self.tree_parent
        child = (self.is_runtime | self.in_tree) & (tp >= 0)
        return np.bincount(tp[child], weights=self.dur[child], minlength=self.n).astype(np.int64)

    @cached_property
    def self_ns(self) -> np.ndarray:
        """Duration minus :attr:`child_dur`."""
        return np.asarray(self.dur - self.child_dur, dtype=np.int64)

    @property
    def tree_children(self) -> np.ndarray:
        """Op-tree children (op, annotation, step) of each event; computed on each use, not
        kept (:attr:`is_leaf` is)."""
        tp = self.tree_parent
        child = self.in_tree & (tp >= 0)
        return np.bincount(tp[child], minlength=self.n).astype(np.int64)

    @cached_property
    def is_leaf(self) -> np.ndarray:
        """Op-tree nodes without op-tree children."""
        return np.asarray(self.in_tree & (self.tree_children == 0), dtype=bool)

    @cached_property
    def _levels(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The op tree's non-root nodes, deepest level first: per level the rows (grouped
        by parent), each parent once, and where each parent's rows start."""
        tp = self.tree_parent
        rows = np.flatnonzero(self.in_tree & (tp >= 0)).astype(tp.dtype)
        if not len(rows):
            return []
        # by depth (deepest first), then by parent: one sort
        order = np.lexsort((tp[rows], -self.depth[rows]))
        rows = rows[order]
        d = self.depth[rows]
        out = []
        for level in np.split(rows, np.flatnonzero(np.diff(d)) + 1):
            par = tp[level]
            starts = np.flatnonzero(np.concatenate(([True], par[1:] != par[:-1])))
            out.append((level, par[starts], starts))
        return out

    def subtree_sum(self, values: np.ndarray) -> np.ndarray:
        """``values`` summed over each op-tree node's subtree (deepest first, each node adds
        its total to its parent); rows outside the tree keep their own value plus what their
        tree children pass them."""
        total = np.array(values, dtype=np.int64, copy=True)
        for level, parents, starts in self._levels:
            total[parents] += np.add.reduceat(total[level], starts)
        return total

    # -- groups ------------------------------------------------------------------------------
    @cached_property
    def thread(self) -> np.ndarray:
        """One code per (rank, pid, tid), ordered like the triple (pid and tid as text);
        int32."""
        if self.n == 0:
            return np.zeros(0, dtype=np.int32)
        rank = self.rank - int(self.rank.min())
        pid = self.pid.text_codes().astype(np.int64) + 1
        tid = self.tid.text_codes().astype(np.int64) + 1
        n_pid, n_tid = len(self.pid.values) + 1, len(self.tid.values) + 1
        key = (rank * n_pid + pid) * n_tid + tid
        return unique_inverse(key)[1].astype(np.int32)

    # -- args --------------------------------------------------------------------------------
    # Every reader of the ``args`` text goes through these three: the column may be kept
    # packed (Trace.pack_args), out of the event table.
    def args_text(self, row: int) -> str | None:
        """The ``args`` text of one row."""
        if self._packed_args is not None:
            return self._packed_args.value(row)
        value = self.events.column("args")[row].as_py()
        return None if value is None else str(value)

    def args_take(self, rows: np.ndarray | pa.Array | list[int]) -> pa.Array:
        """The ``args`` text of ``rows`` (in that order) as one string array."""
        if self._packed_args is not None:
            return self._packed_args.take(rows)
        got = self.events.column("args").take(
            rows if isinstance(rows, pa.Array) else pa.array(rows, pa.int64())
        )
        return got.combine_chunks() if isinstance(got, pa.ChunkedArray) else got

    def args_column(self) -> pa.ChunkedArray:
        """The whole ``args`` column (unpacked again when it is kept packed)."""
        if self._packed_args is not None:
            return self._packed_args.column()
        return self.events.column("args")

    def args_chunks(self) -> Iterator[pa.Array]:
        """The ``args`` column a piece at a time, in row order (a packed column one block
        at a time: a pass over every row never holds the whole text)."""
        if self._packed_args is not None:
            yield from self._packed_args.blocks()
        else:
            yield from self.events.column("args").chunks

    @property
    def packed_args(self) -> PackedText | None:
        """The ``args`` column when it is kept packed (:meth:`use_packed_args`), else None."""
        return self._packed_args

    def use_packed_args(self, packed: PackedText, events: pa.Table) -> None:
        """Read ``args`` from ``packed`` from now on; ``events``: the event table without
        the column (the index lets the one with it go)."""
        if len(packed) != self.n or events.num_rows != self.n:
            raise ValueError("the packed args and the table are not of this index's rows")
        self._packed_args = packed
        self.events = events

    def forget_args(self) -> None:
        """Let go of what was read off the ``args`` text (:attr:`arg_values`,
        :attr:`shapes`, :attr:`layouts`: about 26 bytes an event) once its readers (the
        tables and rules) are done and the memory is wanted; a later read makes them again
        from the text."""
        for name in ("arg_values", "shapes", "layouts"):
            self.__dict__.pop(name, None)

    @cached_property
    def arg_values(self) -> ArgValues:
        """The shape and layout values of the framework events' ``args``
        (:func:`opscope.trace.argtexts.arg_values`); other events have none."""
        return arg_values(self.args_column(), self.is_framework)

    @cached_property
    def shapes(self) -> Shapes:
        """The recorded input shapes of the framework events (:class:`Shapes`); other events
        have none."""
        code = np.full(self.n, -1, dtype=np.int64)
        av = self.arg_values
        has = av.has
        if not has.any():
            return Shapes(code=code, dims=[], types=[])
        d_all = Codes.of(av.dims)
        d_codes = d_all.codes[has]
        t_codes = Codes.of(av.types)
        width = len(t_codes.values) + 1
        key = (d_codes.astype(np.int64) + 1) * width + (t_codes.codes[has].astype(np.int64) + 1)
        uniq, inverse = unique_inverse(key)
        code[has] = inverse
        d_values = d_all.values
        return Shapes(
            code=code,
            dims=[None if c < 0 else str(d_values[c]) for c in (uniq // width - 1).tolist()],
            types=[None if c < 0 else str(t_codes.values[c]) for c in (uniq % width - 1).tolist()],
        )

    @cached_property
    def layouts(self) -> tuple[Codes, Codes]:
        """``Input Strides`` and ``Concrete Inputs`` of the events as codes (null: -1)."""
        av = self.arg_values
        return Codes.of(av.strides), Codes.of(av.concrete)

    def shape_columns(self, rows: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """``input_dims`` and ``input_types`` of ``rows`` as dictionary-encoded string
        columns (distinct, sorted dictionary values; null where none)."""
        sh = self.shapes
        code = sh.code[rows]
        return _dictionary(sh.dims, code), _dictionary(sh.types, code)


def _dictionary(values: list[str | None], code: np.ndarray) -> pa.DictionaryArray:
    """``values[code]`` per row (code -1 or a None value: null) as a dictionary array."""
    distinct = sorted({v for v in values if v is not None})
    at = {v: i for i, v in enumerate(distinct)}
    pos = np.array([-1 if v is None else at[v] for v in values] + [-1], dtype=np.int32)
    idx = pos[np.where(code >= 0, code, len(values))]
    return pa.DictionaryArray.from_arrays(
        pa.array(idx, pa.int32(), mask=idx < 0), pa.array(distinct, pa.string())
    )
