"""Shared, vectorised views of a trace for the finding rules (computed once per Context).

Not a rule: a rule module imports what it needs from here.  Everything is NumPy arrays indexed
by *row* (an event's position in ``ctx.trace.events``; ``id - base``), so rules can follow
links (``parent``, ``op``, ``launch``) by plain indexing instead of per-event Python loops.

Definitions used by several rules:

* *window* - the events of the analysed steps (``ctx.window_steps``), every event when None.
* *device executions* - device events of kind kernel, memcpy, memset, comm or exec.  On a
  CPU-only trace the device is the CPU and the executions are the computing leaf ops
  (:func:`opscope.analysis.optable.is_host_work`).
* *unit* - the op the program itself called: an execution's op, climbed up through enclosing
  ``aten::`` ops to the outermost one (``aten::linear`` rather than the ``aten::addmm`` it
  calls).  A unit is what a user can replace by a built-in or fuse with ``torch.compile``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from opscope.analysis.findings.base import Context, Evidence
from opscope.analysis.optable import BOOKKEEPING_NAMES, NO_COMPUTE_OPS
from opscope.trace.derived import op_tree_parent

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

WORK_KINDS = ("kernel", "memcpy", "memset", "comm", "exec")
MAX_EVIDENCE_IDS = 50


def _np_int(col: pa.ChunkedArray | pa.Array, fill: int = -1) -> np.ndarray:
    arr = col.fill_null(fill) if col.null_count else col
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def _bool(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    arr = arr.fill_null(False) if arr.null_count else arr
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def _dict_match(col: pa.ChunkedArray, pattern: str, ignore_case: bool) -> np.ndarray:
    if not pa.types.is_dictionary(col.type):
        return _bool(pc.match_substring_regex(col, pattern, ignore_case=ignore_case))
    parts: list[np.ndarray] = []
    for chunk in col.chunks:
        hit = _bool(pc.match_substring_regex(chunk.dictionary, pattern, ignore_case=ignore_case))
        idx = chunk.indices
        if idx.null_count:
            valid = np.asarray(idx.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            pos = np.asarray(idx.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
            parts.append(hit[pos] & valid)
        else:
            parts.append(hit[np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)])
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _np_str(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    arr = col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col
    arr = arr.fill_null("") if arr.null_count else arr
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)


@dataclass
class EventView:
    """The event table as NumPy arrays (see the module docstring)."""

    n: int
    base: int
    ids: np.ndarray
    source: np.ndarray
    kind: np.ndarray
    name: np.ndarray
    cat: np.ndarray
    rank: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    lane: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    end: np.ndarray
    parent: np.ndarray  # op-tree parent row (Python frames skipped), -1 at top level
    op: np.ndarray  # row of the issuing framework op, -1 when none
    launch: np.ndarray  # device rows: row of the launching runtime call, -1 when none
    step: np.ndarray  # profiler step, -1 when none
    in_window: np.ndarray
    is_op: np.ndarray  # framework op/annotation (not step, not Python)
    is_aten: np.ndarray
    is_steplike: np.ndarray  # profiler steps, incl. ProfilerStep#N recorded as a cpu_op
    is_leaf: np.ndarray  # framework op/annotation/step without op/annotation children
    is_exec: np.ndarray  # device executions in the window (CPU: computing leaf ops)
    exec_dur: np.ndarray  # duration that counts as device time (CPU: self time)
    device_is_host: bool
    _args: pa.ChunkedArray
    _names: pa.ChunkedArray
    cache: dict[str, Any] = field(default_factory=dict)

    def args(self, row: int) -> dict[str, Any]:
        """The ``args`` object of a row (empty when absent or unreadable)."""
        text = self._args[row].as_py()
        if not text:
            return {}
        # tolerate a stray separator before the object (seen from a trace-writer fast path)
        text = text.lstrip(", ")
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    def name_matches(self, pattern: str, ignore_case: bool = False) -> np.ndarray:
        """Rows whose name matches the regular expression: matched once per distinct name (the
        column is dictionary-encoded), then spread to the rows."""
        return _dict_match(self._names, pattern, ignore_case)

    def event_id(self, row: int) -> int:
        return int(self.ids[row])

    def unit_of(self, rows: np.ndarray) -> np.ndarray:
        """The unit (outermost enclosing ``aten::`` op, see the module docstring) of each op
        row; -1 stays -1."""
        unit = rows.copy()
        for _ in range(256):
            ok = unit >= 0
            p = np.where(ok, self.parent[np.maximum(unit, 0)], -1)
            climb = (
                ok & (p >= 0) & self.is_aten[np.maximum(unit, 0)] & self.is_aten[np.maximum(p, 0)]
            )
            if not climb.any():
                break
            unit[climb] = p[climb]
        return np.asarray(unit, dtype=np.int64)

    def chain(self, row: int, limit: int = 4) -> str:
        """``inner < outer < ...``: the op and its enclosing ops (steps left out)."""
        names: list[str] = []
        cur = row
        while cur >= 0 and len(names) < limit:
            if not self.is_steplike[cur] and self.source[cur] == "framework":
                names.append(str(self.name[cur]))
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


def view(ctx: Context) -> EventView:
    """The :class:`EventView` of ``ctx`` (computed on first use, then shared)."""
    cached = ctx.cache.get("view")
    if isinstance(cached, EventView):
        return cached
    v = _build(ctx)
    ctx.cache["view"] = v
    return v


def _build(ctx: Context) -> EventView:
    ev = ctx.trace.events
    n = ev.num_rows
    ids = _np_int(ev.column("id"))
    base = int(ids[0]) if n else 0
    if n and not np.array_equal(ids, np.arange(base, base + n)):
        raise ValueError("event ids must be contiguous row positions")

    def rows_of(col: str) -> np.ndarray:
        r = _np_int(ev.column(col)) - base
        r[r < 0] = -1
        return r

    source = _np_str(ev.column("source"))
    kind = _np_str(ev.column("kind"))
    name = _np_str(ev.column("name"))
    start = _np_int(ev.column("start_ns"), 0)
    dur = _np_int(ev.column("dur_ns"), 0)
    step = _np_int(ev.column("step"))
    if ctx.window_steps is None:
        in_window = np.ones(n, dtype=bool)
    else:
        lo, hi = ctx.window_steps
        in_window = (step >= lo) & (step <= hi)
    parent = op_tree_parent(ev) if n else np.zeros(0, dtype=np.int64)
    framework = source == "framework"
    in_tree = framework & np.isin(kind, ("op", "annotation", "step"))
    is_op = framework & np.isin(kind, ("op", "annotation"))
    name_arrow = ev.column("name").cast(pa.string())
    is_aten = is_op & _bool(pc.starts_with(name_arrow, "aten::"))
    # older traces record ProfilerStep#N as a cpu_op: it is still a step
    is_steplike = (kind == "step") | (is_op & _bool(pc.starts_with(name_arrow, "ProfilerStep#")))
    is_op = is_op & ~is_steplike
    has_tree_child = np.zeros(n, dtype=bool)
    child = in_tree & (parent >= 0)
    has_tree_child[parent[child]] = True
    is_leaf = in_tree & ~has_tree_child
    device_is_host = ctx.device_is_host
    if device_is_host:
        skip = np.isin(name, sorted(BOOKKEEPING_NAMES | NO_COMPUTE_OPS))
        is_exec = is_leaf & (kind == "op") & ~skip & in_window
        # self time of a leaf is its duration minus runtime children (none on a CPU trace)
        host_child = (source == "runtime") | in_tree
        hp = host_child & (parent >= 0)
        child_sum = np.bincount(parent[hp], weights=dur[hp], minlength=n).astype(np.int64)
        exec_dur = np.maximum(dur - child_sum, 0)
    else:
        is_exec = (source == "device") & np.isin(kind, WORK_KINDS) & in_window
        exec_dur = dur
    op = rows_of("op_id")
    if device_is_host:
        op = np.where(is_exec, np.arange(n), op)
    return EventView(
        n=n,
        base=base,
        ids=ids,
        source=source,
        kind=kind,
        name=name,
        cat=_np_str(ev.column("cat")),
        rank=_np_int(ev.column("rank"), 0),
        pid=_np_str(ev.column("pid")),
        tid=_np_str(ev.column("tid")),
        lane=_np_str(ev.column("lane")),
        start=start,
        dur=dur,
        end=start + dur,
        parent=parent,
        op=op,
        launch=rows_of("launch_id"),
        step=step,
        in_window=in_window,
        is_op=is_op,
        is_aten=is_aten,
        is_steplike=is_steplike,
        is_leaf=is_leaf,
        is_exec=is_exec,
        exec_dur=exec_dur,
        device_is_host=device_is_host,
        _args=ev.column("args"),
        _names=ev.column("name"),
    )


# -- small shared helpers ----------------------------------------------------------------------


def share(ctx: Context, us: float) -> float:
    """``us`` over the window's wall time, clipped to [0, 1]."""
    wall = ctx.wall_us
    if wall <= 0:
        return 0.0
    return float(min(1.0, max(0.0, us / wall)))


def severity(share_of_wall: float) -> str:
    """high >= 10 % of the window, medium >= 3 %, low >= 1 %, else info."""
    if share_of_wall >= 0.10:
        return "high"
    if share_of_wall >= 0.03:
        return "medium"
    if share_of_wall >= 0.01:
        return "low"
    return "info"


def ids_evidence(v: EventView, rows: Iterable[int], note: str | None = None) -> Evidence:
    """Evidence over at most :data:`MAX_EVIDENCE_IDS` rows (ids in time order), with the time
    range they span."""
    picked = sorted({int(r) for r in rows if r >= 0}, key=lambda r: (int(v.start[r]), r))
    picked = picked[:MAX_EVIDENCE_IDS]
    if not picked:
        return Evidence(note=note)
    lo = min(int(v.start[r]) for r in picked)
    hi = max(int(v.end[r]) for r in picked)
    return Evidence(event_ids=[v.event_id(r) for r in picked], start_ns=lo, end_ns=hi, note=note)


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


DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}


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
            and t in DTYPE_BYTES
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
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    nexts: list[np.ndarray] = []
    if not v.device_is_host:
        rows = np.flatnonzero(v.is_exec)
        if len(rows):
            pid_code = np.unique(v.pid[rows], return_inverse=True)[1].reshape(-1)
            dev_key = v.rank[rows] * (int(pid_code.max()) + 1) + pid_code
            for k in np.unique(dev_key).tolist():
                r = rows[dev_key == k]
                r = r[np.lexsort((r, v.start[r]))]
                s = v.start[r]
                e = np.maximum.accumulate(v.end[r])
                # a gap opens where an execution starts after everything before it ended
                g = np.flatnonzero(s[1:] > e[:-1]) + 1
                starts.append(e[g - 1])
                ends.append(s[g])
                nexts.append(r[g])
    if starts:
        gs, ge, nx = np.concatenate(starts), np.concatenate(ends), np.concatenate(nexts)
    else:
        gs = ge = nx = np.zeros(0, dtype=np.int64)
    launch = v.launch[nx] if len(nx) else np.zeros(0, dtype=np.int64)
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
    out: dict[tuple[int, str, str], list[int]] = {}
    for r in rows[np.argsort(v.start[rows], kind="stable")].tolist():
        out.setdefault((int(v.rank[r]), str(v.pid[r]), str(v.tid[r])), []).append(r)
    result = {k: np.asarray(x, dtype=np.int64) for k, x in out.items()}
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
    out: dict[str, int] = {}
    for r in rows[i0:i1].tolist():
        o = min(int(v.end[r]), hi) - max(int(v.start[r]), lo)
        if o > 0:
            nm = str(v.name[r])
            out[nm] = out.get(nm, 0) + o
    return out
