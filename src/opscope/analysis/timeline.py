"""Timeline summary: wall span, device busy (union of device intervals) and idle time.

* ``wall_us`` - the whole trace, first to last timed event of any kind.
* ``device_span_us`` - first start to last end of device work; ``device_busy_us`` the union of
  device work intervals (kernels, copies, sets, collectives, Neuron executions) and
  ``device_idle_us = device_span_us - device_busy_us`` - the same definitions as TraceLens's
  ``gpu_timeline`` (total_time, busy_time, idle_time).  ``compute/comm/memcpy/memset_us`` are the
  unions per class.
* Device work whose ``correlation`` names a runtime launch that is not in the trace was launched
  before the profiler started (work in flight from the previous step): it is left out of the
  window and reported as ``pre_window_device_us``.  Traces whose device events carry no
  correlation at all keep every device event.

On a CPU-only trace the device is the CPU: busy time is the union of the top-level op intervals
of the busiest thread (the one whose ops cover the most time), and the span is that thread's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from opscope.trace.model import Trace

_WORK_KINDS = ("kernel", "memcpy", "memset", "comm", "exec")


@dataclass
class TimelineSummary:
    wall_us: float
    device_span_us: float
    device_busy_us: float
    device_idle_us: float
    compute_us: float
    comm_us: float
    memcpy_us: float
    memset_us: float
    start_ns: int
    end_ns: int
    device_is_host: bool
    pre_window_device_us: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals [start, end) as sorted, disjoint (starts, ends)."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = np.maximum.accumulate(ends[order])
    # a new run starts where the interval begins after everything before it ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of intervals [start, end)."""
    s, e = merge_intervals(starts, ends)
    return int((e - s).sum())


def _arr(t: pa.Table, name: str) -> np.ndarray:
    return np.asarray(t.column(name).to_numpy(zero_copy_only=False), dtype=np.int64)


def timeline_summary(trace: Trace, events: pa.Table | None = None) -> TimelineSummary:
    ev = trace.events if events is None else events
    timed = ev.filter(pc.not_equal(ev.column("source").cast(pa.string()), "other"))
    if timed.num_rows == 0:
        return TimelineSummary(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, trace.device.kind == "cpu")
    start = _arr(timed, "start_ns")
    end = start + _arr(timed, "dur_ns")
    t0, t1 = int(start.min()), int(end.max())
    wall = t1 - t0
    device_is_host = trace.device.kind == "cpu"
    kinds = timed.column("kind").cast(pa.string())
    if device_is_host:
        ops = timed.filter(
            pc.and_(
                pc.equal(timed.column("source").cast(pa.string()), "framework"),
                pc.is_in(kinds, pa.array(["op", "annotation"])),
            )
        )
        best, span = 0, 0
        for tid in pc.unique(ops.column("tid").cast(pa.string())).to_pylist():
            sel = ops.filter(pc.equal(ops.column("tid").cast(pa.string()), tid))
            s = _arr(sel, "start_ns")
            e = s + _arr(sel, "dur_ns")
            u = union_ns(s, e)
            if u > best:
                best, span = u, int(e.max() - s.min())
        busy = best
        parts = {"compute": busy, "comm": 0, "memcpy": 0, "memset": 0}
        pre_window = 0
    else:
        dev = timed.filter(
            pc.and_(
                pc.equal(timed.column("source").cast(pa.string()), "device"),
                pc.is_in(kinds, pa.array(list(_WORK_KINDS))),
            )
        )
        dev, pre_window = _drop_pre_window(timed, dev)
        s = _arr(dev, "start_ns")
        e = s + _arr(dev, "dur_ns")
        busy = union_ns(s, e)
        span = int(e.max() - s.min()) if len(s) else 0
        dkinds = np.asarray(dev.column("kind").cast(pa.string()).to_numpy(zero_copy_only=False))
        parts = {}
        for label, ks in (
            ("compute", ("kernel", "exec")),
            ("comm", ("comm",)),
            ("memcpy", ("memcpy",)),
            ("memset", ("memset",)),
        ):
            m = np.isin(dkinds, ks)
            parts[label] = union_ns(s[m], s[m] + _arr(dev, "dur_ns")[m])
    return TimelineSummary(
        wall_us=wall / 1e3,
        device_span_us=span / 1e3,
        device_busy_us=busy / 1e3,
        device_idle_us=max(0, span - busy) / 1e3,
        compute_us=parts["compute"] / 1e3,
        comm_us=parts["comm"] / 1e3,
        memcpy_us=parts["memcpy"] / 1e3,
        memset_us=parts["memset"] / 1e3,
        start_ns=t0,
        end_ns=t1,
        device_is_host=device_is_host,
        pre_window_device_us=pre_window / 1e3,
    )


def _drop_pre_window(timed: pa.Table, dev: pa.Table) -> tuple[pa.Table, int]:
    """Device work launched before the trace began: its correlation has no runtime call here."""
    corr = dev.column("correlation")
    if corr.null_count == len(corr):
        return dev, 0
    runtime = timed.filter(pc.equal(timed.column("source").cast(pa.string()), "runtime"))
    if runtime.num_rows == 0:  # a device-only trace: nothing to check against
        return dev, 0
    keys = pc.binary_join_element_wise(
        dev.column("rank").cast(pa.string()), corr.cast(pa.string()), ":"
    )
    launched = pc.binary_join_element_wise(
        runtime.column("rank").cast(pa.string()),
        runtime.column("correlation").cast(pa.string()),
        ":",
    )
    orphan = pc.fill_null(pc.invert(pc.is_in(keys, launched.drop_null())), False)
    dropped = dev.filter(orphan)
    return dev.filter(pc.invert(orphan)), int(pc.sum(dropped.column("dur_ns")).as_py() or 0)
