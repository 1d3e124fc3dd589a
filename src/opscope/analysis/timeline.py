"""Timeline summary: wall span, device busy (union of device intervals) and idle time.

* ``wall_us`` - the whole trace, first to last timed event of any kind.
* ``device_span_us`` - first start to last end of device work; ``device_busy_us`` the union of
  device work intervals (kernels, copies, sets, collectives, Neuron executions) and
  ``device_idle_us = device_span_us - device_busy_us`` - the same definitions as TraceLens's
  ``gpu_timeline`` (total_time, busy_time, idle_time).  ``compute/comm/memcpy/memset_us`` are the
  unions per class; ``exposed_comm_us`` and ``overlap_share`` say how much of the communication
  compute hides (:mod:`opscope.analysis.comm`; None without communication).
* Device work whose ``correlation`` names a runtime launch that is not in the trace was launched
  before the profiler started (work in flight from the previous step): it is left out of the
  window and reported as ``pre_window_device_us``.  Traces whose device events carry no
  correlation at all keep every device event.

On a CPU-only trace the device is the CPU: busy time is the union of the top-level op intervals
of the busiest thread (the one whose ops cover the most time), and the span is that thread's;
``comm_us`` is the union of a CPU backend's own work (gloo's ``gloo:*`` annotations).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from opscope.analysis.comm import figures, host_comm_rows
from opscope.analysis.intervals import union_ns
from opscope.trace.arrays import Codes, ints, member, unique_ints, valid
from opscope.trace.schema import DEVICE_WORK_KINDS

if TYPE_CHECKING:
    from opscope.trace.model import Trace


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
    exposed_comm_us: float | None = None  # None: no communication
    overlap_share: float | None = None
    # the compute union the overlap is measured against (analysis.comm; on a CPU trace the
    # computing ops, where compute_us is the busiest thread's busy time)
    compute_work_us: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def work_us(self) -> float:
        """The compute union the overlap is measured against (``compute_work_us``), else
        ``compute_us`` (a timeline from before it was kept)."""
        return float(self.compute_work_us if self.compute_work_us is not None else self.compute_us)


def timeline_summary(trace: Trace, events: pa.Table | None = None) -> TimelineSummary:
    ev = trace.events if events is None else events
    device_is_host = trace.device.kind == "cpu"
    source = Codes.of(ev.column("source"))
    timed = ~source.eq("other")
    if not timed.any():
        return TimelineSummary(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, device_is_host)
    start = ints(ev.column("start_ns"), 0)
    dur = ints(ev.column("dur_ns"), 0)
    end = start + dur
    t0, t1 = int(start[timed].min()), int(end[timed].max())
    wall = t1 - t0
    kind = Codes.of(ev.column("kind"))
    if device_is_host:
        ops = np.flatnonzero(source.eq("framework") & kind.isin(("op", "annotation")))
        op_tids = Codes.of(ev.column("tid")).codes[ops]
        # threads in order of first appearance (ties go to the first, as always)
        present, first = np.unique(op_tids, return_index=True)
        best, span = 0, 0
        for code in present[np.argsort(first, kind="stable")].tolist():
            sel = ops[op_tids == code]
            u = union_ns(start[sel], end[sel])
            if u > best:
                best, span = u, int(end[sel].max() - start[sel].min())
        busy = best
        index = trace.index
        rows = np.arange(index.n) if events is None else index.rows_of(ev.column("id"))
        work, computing = host_comm_rows(index, rows)
        comm = figures(
            index.start[work], index.end[work], index.start[computing], index.end[computing]
        )
        parts = {"compute": busy, "comm": comm.comm_ns, "memcpy": 0, "memset": 0}
        pre_window = 0
    else:
        dev = np.flatnonzero(source.eq("device") & kind.isin(DEVICE_WORK_KINDS))
        dev, pre_window = drop_pre_window(ev, dev, source, dur)
        s, e = start[dev], end[dev]
        busy = union_ns(s, e)
        span = int(e.max() - s.min()) if len(s) else 0
        dkind = kind.codes[dev]
        parts = {}
        masks: dict[str, np.ndarray] = {}
        for label, ks in (
            ("compute", ("kernel", "exec")),
            ("comm", ("comm",)),
            ("memcpy", ("memcpy",)),
            ("memset", ("memset",)),
        ):
            m = np.isin(dkind, [kind.code(k) for k in ks if kind.code(k) >= 0])
            masks[label] = m
            parts[label] = union_ns(s[m], e[m])
        cm, km = masks["comm"], masks["compute"]
        comm = figures(s[cm], e[cm], s[km], e[km])
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
        exposed_comm_us=comm.exposed_ns / 1e3 if comm.comm_ns else None,
        overlap_share=comm.overlap_share,
        compute_work_us=comm.compute_ns / 1e3,
    )


def drop_pre_window(
    ev: pa.Table, dev: np.ndarray, source: Codes, dur: np.ndarray
) -> tuple[np.ndarray, int]:
    """Device work launched before the trace began: its correlation has no runtime call here.
    ``dev`` are row positions, ``dur`` every row's duration; returns the rows kept and the
    dropped device time (ns)."""
    corr_col = ev.column("correlation")
    if len(dev) == 0 or corr_col.null_count == len(corr_col):
        return dev, 0
    corr = ints(corr_col, -1)
    has_corr = valid(corr_col)
    dev_has = has_corr[dev]
    if not dev_has.any():  # device events without correlations: nothing to check
        return dev, 0
    runtime = np.flatnonzero(source.eq("runtime"))
    if len(runtime) == 0:  # a device-only trace: nothing to check against
        return dev, 0
    rank = ints(ev.column("rank"), 0)
    runtime = runtime[has_corr[runtime]]
    # a device event without a correlation, where others carry one, counts as launched before
    # the window (on the shared MTIA trace all such events end before the first runtime call)
    orphan = ~dev_has
    for r in unique_ints(rank[dev[dev_has]]).tolist():
        mine = dev_has & (rank[dev] == r)
        launched = corr[runtime[rank[runtime] == r]]
        orphan[mine] = ~member(corr[dev[mine]], launched)
    return dev[~orphan], int(dur[dev[orphan]].sum())
