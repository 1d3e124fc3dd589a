"""Timeline summary: wall span, device busy (union of device intervals) and idle time.

On a CPU-only trace the device is the CPU: busy time is the union of the top-level op intervals
of the busiest thread (the one whose ops cover the most time).
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
    device_busy_us: float
    device_idle_us: float
    compute_us: float
    comm_us: float
    memcpy_us: float
    memset_us: float
    start_ns: int
    end_ns: int
    device_is_host: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of intervals [start, end)."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = np.maximum.accumulate(ends[order])
    # a new run starts where the interval begins after everything before it ended
    new_run = np.empty(len(s), dtype=bool)
    new_run[0] = True
    new_run[1:] = s[1:] > e[:-1]
    run_ids = np.cumsum(new_run) - 1
    run_start = s[new_run]
    run_end = np.zeros(run_ids[-1] + 1, dtype=np.int64)
    np.maximum.at(run_end, run_ids, e)
    return int((run_end - run_start).sum())


def _arr(t: pa.Table, name: str) -> np.ndarray:
    return np.asarray(t.column(name).to_numpy(zero_copy_only=False), dtype=np.int64)


def timeline_summary(trace: Trace, events: pa.Table | None = None) -> TimelineSummary:
    ev = trace.events if events is None else events
    timed = ev.filter(pc.not_equal(ev.column("source").cast(pa.string()), "other"))
    if timed.num_rows == 0:
        return TimelineSummary(0, 0, 0, 0, 0, 0, 0, 0, 0, trace.device.kind == "cpu")
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
        best = 0
        for tid in pc.unique(ops.column("tid").cast(pa.string())).to_pylist():
            sel = ops.filter(pc.equal(ops.column("tid").cast(pa.string()), tid))
            s = _arr(sel, "start_ns")
            best = max(best, union_ns(s, s + _arr(sel, "dur_ns")))
        busy = best
        parts = {"compute": busy, "comm": 0, "memcpy": 0, "memset": 0}
    else:
        dev = timed.filter(
            pc.and_(
                pc.equal(timed.column("source").cast(pa.string()), "device"),
                pc.is_in(kinds, pa.array(list(_WORK_KINDS))),
            )
        )
        s = _arr(dev, "start_ns")
        busy = union_ns(s, s + _arr(dev, "dur_ns"))
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
        device_busy_us=busy / 1e3,
        device_idle_us=max(0, wall - busy) / 1e3,
        compute_us=parts["compute"] / 1e3,
        comm_us=parts["comm"] / 1e3,
        memcpy_us=parts["memcpy"] / 1e3,
        memset_us=parts["memset"] / 1e3,
        start_ns=t0,
        end_ns=t1,
        device_is_host=device_is_host,
    )
