"""What the critical path's graph is made of: its labels and edge kinds, the :class:`Graph`,
and the pieces the edge builders share (see :mod:`opscope.analysis.critical.graph`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex

LABELS = (
    "cpu",
    "data_loading",
    "launch_overhead",
    "gpu_compute",
    "gpu_comm",
    "kernel_kernel_gap",
    "sync",
    "wait_for_peer",
    "untraced",
)
CPU, DATA, LAUNCH, COMPUTE, COMM, GAP, SYNC, WAIT, UNTRACED = range(len(LABELS))
# Ties between routes that explain the same time go to the one that names the cause.  Each
# edge has a *tie class*: 0 work (an op, a runtime call, device work and its launches), 1 a
# range's time under no op (a ``record_function`` range, a Python frame: named, but not the
# work itself; a thread blocked inside ``## backward ##`` while the backward thread works),
# 2 ``untraced`` time, 3 a blocked call's ``sync``, 4 a ``wait_for_peer``.  The longest path
# is searched with each edge's weight times ``TIE_SCALE - class``: a route of a higher class
# loses to one of a lower class that is as long, or shorter by less than about 0.1% of its
# time per class.  Every figure reported is of the weights themselves (a class's effective
# time divides exactly by its factor: :func:`true_by_label`).
TIE_SCALE = 1024
RANGE_TIE = 1
TIE_CLASSES = 5
TIE_FACTOR = TIE_SCALE - np.arange(TIE_CLASSES, dtype=np.int64)
LABEL_TIE = np.asarray(
    [{"untraced": 2, "sync": 3, "wait_for_peer": 4}.get(x, 0) for x in LABELS], dtype=np.int8
)
# The labels' counterparts in HTA's CriticalPathAnalysis ``bound_by`` (``sync`` and
# ``wait_for_peer`` have none: HTA gives those edges no weight); docs/critical-path.md.
HTA_BOUND_BY = {
    "cpu": "cpu_bound",
    "data_loading": "data_loading",
    "gpu_compute": "gpu_compute_bound",
    "gpu_comm": "gpu_communication_bound",
    "kernel_kernel_gap": "gpu_kernel_kernel_overhead",
    "launch_overhead": "gpu_kernel_launch_overhead",
}
NONE = -1  # an edge that carries no time (ordering only)


def tie_classes(label: np.ndarray, tie: np.ndarray | None = None) -> np.ndarray:
    """Each edge's tie class: ``tie`` where given, else its label's (0 for no label)."""
    base = np.where(label >= 0, LABEL_TIE[np.maximum(label, 0)], 0).astype(np.int8)
    if tie is None:
        return base
    out: np.ndarray = np.maximum(base, np.asarray(tie, dtype=np.int8))
    return out


def effective(weight: np.ndarray, label: np.ndarray, tie: np.ndarray | None = None) -> np.ndarray:
    """The weights the longest path is searched with: ``weight`` times its tie class's factor
    (:data:`TIE_FACTOR`)."""
    out: np.ndarray = np.asarray(weight, dtype=np.int64) * TIE_FACTOR[tie_classes(label, tie)]
    return out


def class_labels(label: np.ndarray, tie: np.ndarray | None = None) -> np.ndarray:
    """Each edge's label and tie class as one code (``label * TIE_CLASSES + class``; -1 for no
    label): searches that sum time per label sum it per code, each code's effective time then
    divides exactly by its factor (:func:`true_by_label`)."""
    cls = tie_classes(label, tie).astype(np.int64)
    out: np.ndarray = np.where(label >= 0, label.astype(np.int64) * TIE_CLASSES + cls, -1)
    return out


def true_by_label(by_code: np.ndarray) -> np.ndarray:
    """Effective time per code (the last axis: ``len(LABELS) * TIE_CLASSES`` columns, as
    :func:`class_labels` numbers them) back in ns per label."""
    a = np.asarray(by_code, dtype=np.int64)
    shaped = a.reshape(*a.shape[:-1], len(LABELS), TIE_CLASSES)
    out: np.ndarray = (shaped // TIE_FACTOR).sum(axis=-1)
    return out


# Edge kinds (why the edge exists), for what-if and the docs.
EDGE_KINDS = (
    "thread",
    "span",
    "launch",
    "stream",
    "wait",
    "sync",
    "resume",
    "split",
    "join",
    "handoff",
    "inferred",
)
(THREAD, SPAN, LAUNCH_EDGE, STREAM, CROSS, SYNC_EDGE, RESUME, SPLIT, JOIN, HANDOFF, INFERRED) = (
    range(len(EDGE_KINDS))
)

# A gap between two works on a stream larger than this is not device overhead (HTA: 1.5 ms).
GAP_LIMIT_NS = 1_500_000
# A work that starts this soon after another stream's work ends, and later than everything
# the trace shows it waiting for, waited for that work.
INFER_SLACK_NS = 20_000
# A sync call "waited for" work that ended at most this long after the call returned (the
# clocks of host and device records differ by about a microsecond).
SYNC_SLACK_NS = 1_000

# Host events that take part as work: ops and runtime calls (and a CPU backend's collective
# ranges, which are the work itself).
HOST_KINDS = ("op", "runtime", "sync")
# Host ranges that hold work without being work: ``record_function`` ranges, the profiler's
# ``ProfilerStep#N`` and Python frames.  They take part as *containers*: time on a thread
# under one and under no op is that range's (``cpu`` named by it, ``data_loading`` under a
# data loader), and time directly under a step marker, or between top-level events of the
# thread that runs the steps, is ``untraced``; time under an op stays the op's.
CONTAINER_KINDS = ("annotation", "step", "python")
# A launch call this many times its name's median, and this long, waited for a queue slot.
BACK_PRESSURE = 10.0
BACK_PRESSURE_MIN_NS = 50_000
# Host calls that block until device work is done (lower-cased substrings).
BLOCKING = ("synchronize", "kbl_exec_wait")


@dataclass
class Graph:
    """One rank's graph (or several ranks' concatenated by :mod:`.job`).

    Node arrays: ``time`` (ns), ``row`` (the event's row in the index), ``role`` (0 start,
    1 end, 2 mid).  Edge arrays: ``src``, ``dst``, ``weight`` (ns), ``label`` (index into
    :data:`LABELS`, -1: no time), ``row`` (the attributed event's row, -1 none), ``kind``
    (index into :data:`EDGE_KINDS`).  ``time`` and ``weight`` are int64; the node ids
    (``src``, ``dst``) and the rows (``row``, ``edge_row``) int32 where the graph's and the
    table's sizes allow (:func:`~opscope.analysis.critical.longest.ids_dtype`), else int64.
    ``base`` holds each edge's weight before any what-if.
    """

    time: np.ndarray
    row: np.ndarray
    role: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    label: np.ndarray
    edge_row: np.ndarray
    kind: np.ndarray
    rank: int = 0
    notes: list[str] = field(default_factory=list)
    #: each edge's tie class where its label does not give it (:func:`tie_classes`; None: the
    #: labels' own)
    tie: np.ndarray | None = None
    #: what :func:`~opscope.analysis.critical.graph.acyclic` found while checking the graph:
    #: ``(src, dst, weight, dist, pred)``, the ``longest_paths`` of those very arrays (see
    #: :meth:`solved`; a copy of the graph with other edges or weights does not use it; the
    #: first solve with the graph's own weights takes it)
    longest: tuple[np.ndarray, ...] | None = field(default=None, compare=False, repr=False)

    #: each edge's tie factor (:data:`TIE_FACTOR` of its class), made once: every search over
    #: the graph's edges, with its own or other weights, multiplies by it (:meth:`factors`)
    _factor: np.ndarray | None = field(default=None, compare=False, repr=False)

    def factors(self) -> np.ndarray:
        """Each edge's tie factor (int16, :data:`TIE_FACTOR` of its class): the searches
        multiply each weight by it as they go (``longest_paths(..., factor=)``), so no
        array of effective weights (:func:`effective`) is made."""
        f = self._factor
        if f is None or len(f) != len(self.label):
            f = TIE_FACTOR[tie_classes(self.label, self.tie)].astype(np.int16)
            self._factor = f
        return f

    def solved(self, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(dist, pred)`` over this graph's edges with ``weight``, when already known."""
        got = self.longest
        if got is None or got[0] is not self.src or got[1] is not self.dst or got[2] is not weight:
            return None
        return got[3], got[4]

    @property
    def n_nodes(self) -> int:
        return len(self.time)

    @property
    def n_edges(self) -> int:
        return len(self.src)


class Edges:
    """Edge arrays gathered piece by piece, kept per column (see :meth:`arrays`).  ``ids``:
    the type of the node ids (``src``, ``dst``), ``rows`` that of the attributed rows: int32
    where the graph's and the table's sizes allow (half the memory), else int64."""

    def __init__(self, ids: Any = np.int64, rows: Any = np.int64) -> None:
        self._DTYPES = (ids, ids, np.int64, np.int8, rows, np.int8, np.int8)
        self.columns: list[list[np.ndarray]] = [[] for _ in self._DTYPES]

    def add(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray | int,
        what: tuple[np.ndarray | int, np.ndarray | int, np.ndarray | int],
        tie: np.ndarray | int = 0,
    ) -> None:
        """Edges ``src -> dst`` of ``weight`` (negative: none); ``what`` is their label,
        attributed row and kind (arrays, or one value for all); ``tie`` their tie class where
        the label does not give it."""
        label, row, kind = what
        n = len(src)
        if not n:
            return

        def full(v: np.ndarray | int, dtype: type[np.integer[Any]] = np.int64) -> np.ndarray:
            if isinstance(v, np.ndarray):
                return v.astype(dtype, copy=False)
            return np.full(n, v, dtype=dtype)

        w = full(weight)
        if w.min() < 0:
            w = np.maximum(w, 0)
        got = (src, dst, w, label, row, kind, tie)
        for column, value, dtype in zip(self.columns, got, self._DTYPES, strict=True):
            column.append(full(value, dtype))  # small codes as int8: less memory to move

    def arrays(self) -> tuple[np.ndarray, ...]:
        """src, dst, weight, label, row, kind, tie; the pieces are let go as each column is
        joined (the edges are held once, not twice, at the graph's peak)."""
        out = []
        for column, dtype in zip(self.columns, self._DTYPES, strict=True):
            out.append(np.concatenate(column) if column else np.zeros(0, dtype=dtype))
            column.clear()
        if out[0].dtype == np.int32 and len(out[0]) >= 2**31 - 1:  # too many edges for 32 bits
            out[0], out[1] = out[0].astype(np.int64), out[1].astype(np.int64)
        return tuple(out)


@dataclass
class Build:
    """What the edge builders share: the index, the window's host and device rows, the
    nodes of each row and the edges gathered so far."""

    idx: EventIndex
    sel: np.ndarray  # the window (row mask)
    host: np.ndarray  # host rows taking part (row mask)
    work: np.ndarray  # device work taking part (row mask)
    hrows: np.ndarray
    drows: np.ndarray
    start_node: np.ndarray  # per row, -1 when not a node
    end_node: np.ndarray
    edges: Edges
    #: the nodes' times (the host rows' starts, then their ends, then the device work's...),
    #: when the builder has them: the host chains read their part instead of a copy
    time: np.ndarray | None = None


def args_of(idx: EventIndex, row: int) -> dict[str, Any]:
    text = idx.args_text(row)
    if not text:
        return {}
    try:
        out = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}


def under(idx: EventIndex, marked: np.ndarray) -> np.ndarray:
    """Rows that are marked or have a marked ancestor in the op tree; runtime and device rows
    through the op that issued them."""
    out = marked.copy()
    if not out.any():
        return np.asarray(out, dtype=bool)  # nothing marked: nothing under a mark
    up = idx.tree_parent
    act = np.flatnonzero(~out & (up >= 0))
    cur = up[act]
    while len(act):
        hit = out[cur]
        out[act[hit]] = True
        act, cur = act[~hit], up[cur[~hit]]
        keep = cur >= 0
        act, cur = act[keep], cur[keep]
    op = idx.op
    issued = (op >= 0) & ~idx.is_framework
    out[issued] |= out[op[issued]]
    return np.asarray(out, dtype=bool)
