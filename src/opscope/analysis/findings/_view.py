"""Shared, vectorised views of a trace for the finding rules (computed once per Context).

Not a rule: a rule module imports what it needs from here.  :class:`EventView` is the trace's
:class:`~opscope.trace.index.EventIndex` (``ctx.trace.index``, built once per trace) seen
through the context's window: everything is NumPy arrays indexed by *row* (an event's
position in ``ctx.trace.events``), so rules follow links (``parent``, ``op``, ``launch``) by
plain indexing instead of per-event Python loops, and compare strings through the index's
codes (``v.index.name``, ``v.index.kind``...).

Definitions used by several rules:

* *window* - the events of the analysed steps (``ctx.window_steps``), every event when None.
* *device executions* - device events of a kind in
  :data:`~opscope.trace.schema.DEVICE_WORK_KINDS`.  On a CPU-only trace the device is the CPU
  and the executions are the ops that computed (their self time)
  (:func:`opscope.analysis.optable.is_host_work`).
* *unit* - the op the program itself called: an execution's op, climbed up through enclosing
  ``aten::`` ops to the outermost one (``aten::linear`` rather than the ``aten::addmm`` it
  calls).  A unit is what a user can replace by a built-in or fuse with ``torch.compile``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pyarrow.compute as pc

from opscope.analysis.costs import itemsize
from opscope.analysis.findings.base import Context, Evidence
from opscope.analysis.optable import host_work
from opscope.trace.args import decode_args
from opscope.trace.argtexts import top_level_strings
from opscope.trace.arrays import RowTexts, bools, unique_ints
from opscope.trace.index import EventIndex
from opscope.trace.schema import DEVICE_WORK_KINDS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

WORK_KINDS = DEVICE_WORK_KINDS
MAX_EVIDENCE_IDS = 50

# the names rules already imported from here
TensorInputs = list[tuple[list[int], str]]


def _flags(index: EventIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(is_op, is_aten, is_steplike) of every row (window-independent, kept on the index)."""
    op_like = index.is_framework & index.kind.isin(("op", "annotation"))
    is_aten = op_like & index.name.starts_with("aten::")
    # older traces record ProfilerStep#N as a cpu_op: it is still a step
    is_steplike = index.kind.eq("step") | (op_like & index.name.starts_with("ProfilerStep#"))
    return op_like & ~is_steplike, is_aten, is_steplike


class EventView:
    """The event index through one window (see the module docstring).

    Arrays (row-indexed): ``ids``, ``rank``, ``start``, ``dur``, ``end``, ``step`` (-1 none),
    ``parent`` (op-tree parent, Python frames skipped, -1 at top level), ``op`` (row of the
    issuing framework op; on a CPU-only trace an execution is its own op), ``launch`` (device
    rows: the launching runtime call), ``in_window``, ``is_op`` (framework op/annotation, not a
    step), ``is_aten``, ``is_steplike`` (profiler steps, ``ProfilerStep#N`` recorded as a
    cpu_op included), ``is_leaf``, ``is_exec`` (device executions in the window; CPU: computing
    leaf ops), ``exec_dur`` (what counts as device time; CPU: self time).  ``source``,
    ``kind``, ``name``, ``cat``, ``pid``, ``tid``, ``lane`` read ``str`` by row (a row) or object
    arrays of them (rows), made as read (:class:`RowTexts`); rules of this package use the
    codes (``index.name``...) for whole columns.
    """

    def __init__(
        self, index: EventIndex, window_steps: tuple[int, int] | None, device_is_host: bool
    ) -> None:
        self.index = index
        self.n = index.n
        self.device_is_host = device_is_host
        self.in_window = index.in_steps(window_steps)
        self.is_op, self.is_aten, self.is_steplike = index.memo(
            "findings.flags", lambda: _flags(index)
        )
        self.is_leaf = index.is_leaf
        if device_is_host:
            work = index.memo("analysis.host_work", lambda: host_work(index))
            self.is_exec = work & self.in_window
            # an op's own execution on the CPU: its self time
            self.exec_dur = np.maximum(index.self_ns, 0)
            self.op = np.where(self.is_exec, np.arange(self.n), index.op)
        else:
            self.is_exec = index.is_work & self.in_window
            self.exec_dur = index.dur
            self.op = index.op
        self.cache: dict[str, Any] = {}

    # -- arrays of the index -------------------------------------------------------------------
    @property
    def ids(self) -> np.ndarray:
        return self.index.ids

    @property
    def base(self) -> int:
        return int(self.index.ids[0]) if self.n else 0

    @property
    def rank(self) -> np.ndarray:
        return self.index.rank

    @property
    def start(self) -> np.ndarray:
        return self.index.start

    @property
    def dur(self) -> np.ndarray:
        return self.index.dur

    @property
    def end(self) -> np.ndarray:
        return self.index.end

    @property
    def parent(self) -> np.ndarray:
        return self.index.tree_parent

    @property
    def launch(self) -> np.ndarray:
        return self.index.launch

    @property
    def step(self) -> np.ndarray:
        return self.index.step

    @property
    def source(self) -> RowTexts:
        return self.index.source.texts()

    @property
    def kind(self) -> RowTexts:
        return self.index.kind.texts()

    @property
    def name(self) -> RowTexts:
        return self.index.name.texts()

    @property
    def cat(self) -> RowTexts:
        return self.index.cat.texts()

    @property
    def pid(self) -> RowTexts:
        return self.index.pid.texts()

    @property
    def tid(self) -> RowTexts:
        return self.index.tid.texts()

    @property
    def lane(self) -> RowTexts:
        return self.index.lane.texts()

    # -- lookups -------------------------------------------------------------------------------
    def args(self, row: int) -> dict[str, Any]:
        """The ``args`` object of a row (empty when absent or unreadable)."""
        return decode_args(self.index.args_text(row))

    def arg_strings(self, rows: np.ndarray, key: str) -> np.ndarray:
        """``args(row).get(key)`` of each row when it is a string, else None (an object
        array); read off the texts where that is sure, decoded otherwise."""
        rows = np.asarray(rows, dtype=np.int64)
        texts = self.index.args_take(rows)
        values, sure = top_level_strings(texts, key)
        for i in np.flatnonzero(~sure).tolist():
            got = self.args(int(rows[i])).get(key)
            values[i] = got if isinstance(got, str) else None
        return values

    def name_of(self, row: int) -> str:
        return self.index.name[row]

    def name_matches(self, pattern: str, ignore_case: bool = False) -> np.ndarray:
        """Rows whose name matches the regular expression: matched once per distinct name,
        then spread to the rows."""
        return self.index.name.matches(pattern, ignore_case)

    def event_id(self, row: int) -> int:
        return int(self.index.ids[row])

    def unit_of(self, rows: np.ndarray) -> np.ndarray:
        """The unit (outermost enclosing ``aten::`` op, see the module docstring) of each op
        row; -1 stays -1."""
        unit = np.array(rows, dtype=np.int64, copy=True)
        parent, is_aten = self.parent, self.is_aten
        for _ in range(256):
            ok = unit >= 0
            p = np.where(ok, parent[np.maximum(unit, 0)], -1)
            climb = ok & (p >= 0) & is_aten[np.maximum(unit, 0)] & is_aten[np.maximum(p, 0)]
            if not climb.any():
                break
            unit[climb] = p[climb]
        return unit

    def chain(self, row: int, limit: int = 4) -> str:
        """``inner < outer < ...``: the op and its enclosing ops (steps left out)."""
        names: list[str] = []
        cur = row
        framework = self.index.is_framework
        while cur >= 0 and len(names) < limit:
            if not self.is_steplike[cur] and framework[cur]:
                names.append(self.name_of(cur))
            cur = int(self.parent[cur])
        return " < ".join(names)

    def user_scope(self, row: int) -> int:
        """Nearest enclosing op/annotation that is not an ``aten::`` op (a module, a
        ``record_function`` range, a compiled region); -1 when the op is at top level."""
        cur = int(self.parent[row]) if row >= 0 else -1
        while cur >= 0:
            if self.is_op[cur] and not self.is_aten[cur]:
                return cur
            cur = int(self.parent[cur])
        return -1

    # -- recorded input shapes -----------------------------------------------------------------
    def _plain_args(self) -> np.ndarray:
        """Framework rows whose shapes the index read as :meth:`args` reads them: every row
        but those whose text starts with something other than ``{``."""

        def build() -> np.ndarray:
            ix = self.index
            odd = [
                bools(
                    pc.and_(
                        pc.greater(pc.binary_length(args), 0),
                        pc.invert(pc.starts_with(args, "{")),
                    )
                )
                for args in ix.args_chunks()
            ]
            flat = np.concatenate(odd) if odd else np.zeros(0, dtype=bool)
            return np.asarray(ix.is_framework & ~flat, dtype=bool)

        out: np.ndarray = self.index.memo("findings.plain_args", build)
        return out

    def inputs_of_code(self, code: int) -> TensorInputs:
        """The tensor inputs of one shape code of the index (parsed once per code)."""
        parsed: dict[int, TensorInputs] = self.index.memo("findings.inputs", dict)
        got = parsed.get(code)
        if got is None:
            sh = self.index.shapes
            d, t = sh.dims[code], sh.types[code]
            got = tensor_inputs(
                {
                    "Input Dims": orjson.loads(d) if d is not None else None,
                    "Input type": orjson.loads(t) if t is not None else None,
                }
            )
            parsed[code] = got
        return got

    def input_codes(self, rows: np.ndarray) -> np.ndarray:
        """Shape code of each row (-1: no shapes recorded); -2 for a row whose args the index
        does not read (:meth:`tensor_inputs` decodes those itself)."""
        rows = np.asarray(rows, dtype=np.int64)
        code = self.index.shapes.code[rows]
        return np.where(self._plain_args()[rows], code, -2)

    def tensor_inputs(self, row: int) -> TensorInputs:
        """(shape, dtype) of each tensor input recorded for ``row`` (see :func:`tensor_inputs`)."""
        code = int(self.input_codes(np.asarray([row]))[0])
        if code == -1:
            return []
        if code == -2:
            return tensor_inputs(self.args(row))
        return self.inputs_of_code(code)

    def inputs_flag(self, rows: np.ndarray, test: Callable[[TensorInputs], bool]) -> np.ndarray:
        """``test(tensor_inputs)`` of each row, evaluated once per distinct recorded shape."""
        rows = np.asarray(rows, dtype=np.int64)
        codes = self.input_codes(rows)
        out = np.zeros(len(rows), dtype=bool)
        uniq, inverse = np.unique(codes, return_inverse=True)
        inverse = inverse.reshape(-1)
        for i, c in enumerate(uniq.tolist()):
            if c == -2:
                for j in np.flatnonzero(inverse == i).tolist():
                    out[j] = bool(test(tensor_inputs(self.args(int(rows[j])))))
            else:
                out[inverse == i] = bool(test([] if c == -1 else self.inputs_of_code(c)))
        return out


def view(ctx: Context) -> EventView:
    """The :class:`EventView` of ``ctx`` (made on first use, then shared by the rules)."""
    cached = ctx.cache.get("view")
    if isinstance(cached, EventView):
        return cached
    v = EventView(ctx.trace.index, ctx.window_steps, ctx.device_is_host)
    ctx.cache["view"] = v
    return v


# -- small shared helpers ----------------------------------------------------------------------


def ids_evidence(
    v: EventView, rows: Iterable[int] | np.ndarray, note: str | None = None
) -> Evidence:
    """Evidence over at most :data:`MAX_EVIDENCE_IDS` rows (ids in time order), with the time
    range they span."""
    arr = np.asarray(rows if isinstance(rows, np.ndarray) else list(rows), dtype=np.int64)
    arr = unique_ints(arr[arr >= 0])
    if not len(arr):
        return Evidence(note=note)
    picked = arr[np.lexsort((arr, v.start[arr]))][:MAX_EVIDENCE_IDS]
    return Evidence(
        event_ids=[int(x) for x in v.ids[picked].tolist()],
        start_ns=int(v.start[picked].min()),
        end_ns=int(v.end[picked].max()),
        note=note,
    )


def range_evidence(start_ns: int, end_ns: int, note: str | None = None) -> Evidence:
    return Evidence(start_ns=int(start_ns), end_ns=int(end_ns), note=note)


def fmt_us(us: float) -> str:
    """Human time: 850 µs, 12.3 ms, 1.52 s."""
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.1f} ms"
    return f"{us:.0f} µs" if us >= 10 else f"{us:.1f} µs"


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def tensor_inputs(args: dict[str, Any]) -> list[tuple[list[int], str]]:
    """(shape, dtype) of each tensor input recorded in ``Input Dims``/``Input type``."""
    dims = args.get("Input Dims")
    types = args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return []
    out: list[tuple[list[int], str]] = []
    for d, t in zip(dims, types, strict=False):
        if (
            isinstance(d, list)
            and isinstance(t, str)
            and itemsize(t) is not None
            and all(isinstance(x, int) for x in d)
        ):
            out.append((list(d), t))
    return out


def numel(shape: Sequence[int]) -> int:
    n = 1
    for x in shape:
        n *= max(int(x), 0)
    return n


@dataclass
class Gaps:
    """Idle gaps between device executions, per device (rank, pid), inside the window.

    A gap is an interval where *no* execution runs on the device (all its streams merged: a
    stream waiting while another computes is not idle time).  ``cause`` per gap:

    * ``host`` - the execution that ends the gap was launched by a runtime call that had not
      returned when the device went idle: the device waited for the host to submit work.
    * ``kernel-to-kernel`` - the work was already submitted before the gap began: the device
      waited on a dependency (a stream/event wait, a copy engine) or launch latency.
    * ``other`` - the ending execution has no launching call in the trace.
    """

    start: np.ndarray  # gap start (ns)
    end: np.ndarray  # gap end (ns)
    next_exec: np.ndarray  # row of the execution that ends the gap
    launch: np.ndarray  # its launching runtime row, -1 when none
    cause: np.ndarray  # object array: host | kernel-to-kernel | other

    @property
    def length(self) -> np.ndarray:
        return np.asarray(self.end - self.start, dtype=np.int64)


def gaps(ctx: Context) -> Gaps:
    """The window's device idle gaps (empty on a CPU-only trace); computed once per context."""
    cached = ctx.cache.get("gaps")
    if isinstance(cached, Gaps):
        return cached
    v = view(ctx)
    empty = np.zeros(0, dtype=np.int64)
    gs = ge = nx = empty
    rows = np.flatnonzero(v.is_exec) if not v.device_is_host else empty
    if len(rows):
        # one device per (rank, pid); its executions by start (ties by row)
        pid = v.index.pid.text_codes()[rows].astype(np.int64) + 1
        dev_key = (v.rank[rows] - int(v.rank[rows].min())) * (int(pid.max()) + 1) + pid
        order = np.lexsort((rows, v.start[rows], dev_key))
        r, key = rows[order], dev_key[order]
        s = v.start[r]
        first = np.ones(len(r), dtype=bool)
        first[1:] = key[1:] != key[:-1]
        # the running max of the ends, restarted on each device: each device's values are
        # lifted above all the previous devices' before the accumulate
        lo = min(int(s.min()), int(v.end[r].min()))
        lift = (np.cumsum(first) - 1) * (int(v.end[r].max()) - lo + 1)
        e = np.maximum.accumulate(v.end[r] - lo + lift) - lift + lo
        # a gap opens where an execution starts after everything before it on its device ended
        g = np.flatnonzero((s[1:] > e[:-1]) & ~first[1:]) + 1
        gs, ge, nx = e[g - 1], s[g], r[g]
    launch = v.launch[nx] if len(nx) else empty
    has = launch >= 0
    launch_end = np.where(has, v.end[np.maximum(launch, 0)], 0)
    cause = np.where(~has, "other", np.where(launch_end > gs, "host", "kernel-to-kernel"))
    out = Gaps(start=gs, end=ge, next_exec=nx, launch=launch, cause=cause.astype(object))
    ctx.cache["gaps"] = out
    return out


def top_level_ops(v: EventView) -> dict[tuple[int, str, str], np.ndarray]:
    """Per (rank, pid, tid): rows of the top-level framework ops (directly under a profiler
    step or at top level), sorted by start."""
    cached = v.cache.get("top_level_ops")
    if isinstance(cached, dict):
        return cached
    steplike = v.is_steplike
    p = np.maximum(v.parent, 0)
    top = v.is_op & ~steplike & ((v.parent < 0) | steplike[p])
    rows = np.flatnonzero(top)
    thread = v.index.thread[rows]
    order = np.lexsort((rows, v.start[rows], thread))
    rows, thread = rows[order], thread[order]
    cuts = np.flatnonzero(thread[1:] != thread[:-1]) + 1
    result: dict[tuple[int, str, str], np.ndarray] = {}
    for part in np.split(rows, cuts) if len(rows) else []:
        r = int(part[0])
        result[(int(v.rank[r]), v.index.pid[r], v.index.tid[r])] = part
    v.cache["top_level_ops"] = result
    return result


def host_activity(v: EventView, rows: np.ndarray, lo: int, hi: int) -> dict[str, int]:
    """Names of the ops among ``rows`` (top-level ops of one thread, sorted by start) that
    overlap [lo, hi), with the overlap in ns: what the host was doing meanwhile."""
    if len(rows) == 0 or hi <= lo:
        return {}
    ends = np.maximum.accumulate(v.end[rows])
    i0 = int(np.searchsorted(ends, lo, side="right"))
    i1 = int(np.searchsorted(v.start[rows], hi, side="left"))
    sel = rows[i0:i1]
    overlap = np.minimum(v.end[sel], hi) - np.maximum(v.start[sel], lo)
    sel, overlap = sel[overlap > 0], overlap[overlap > 0]
    out: dict[str, int] = {}
    for r, o in zip(sel.tolist(), overlap.tolist(), strict=True):
        nm = v.name_of(r)
        out[nm] = out.get(nm, 0) + int(o)
    return out
