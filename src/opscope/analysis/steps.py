"""Per profiler step: how many device executions, how much device time, how much CPU time.

* ``device_ops`` - device executions (kernels, copies, sets, collectives, Neuron executions)
  attributed to the step; on a CPU-only trace, the ops that computed (their self time; see
  :func:`opscope.analysis.optable.is_host_work`).
* ``device_us`` - their summed duration.
* ``cpu_us`` - CPU time of the step's top-level framework events (what the program's own calls
  cost on the host), without the profiler's step marker and without opscope's device
  synchronisation, which is waiting, not work.
* ``wall_us`` - the ProfilerStep span.

:func:`step_compute` gives each step's compute alone (communication left out): what the job's
load-imbalance test compares across ranks, step by step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.optable import is_host_work
from opscope.markers import SYNC_ANNOTATION
from opscope.trace.arrays import Codes, ints
from opscope.trace.schema import DEVICE_WORK_KINDS

if TYPE_CHECKING:
    from opscope.trace.model import Trace

SYNC_NAMES = frozenset((SYNC_ANNOTATION,))


@dataclass
class StepStats:
    step: int
    wall_us: float
    cpu_us: float
    device_us: float
    device_ops: int
    rank: int | None = None  # in a job's report: the rank whose step this is

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "step": self.step,
            "wall_us": self.wall_us,
            "cpu_us": self.cpu_us,
            "device_us": self.device_us,
            "device_ops": self.device_ops,
        }
        if self.rank is not None:
            d["rank"] = self.rank
        return d


def _sum_by(keys: np.ndarray, values: np.ndarray) -> tuple[dict[int, int], dict[int, int]]:
    """Per distinct key: the sum of ``values`` and the count."""
    if len(keys) == 0:
        return {}, {}
    uniq, inv = np.unique(keys, return_inverse=True)
    sums = np.bincount(inv, weights=values, minlength=len(uniq))
    counts = np.bincount(inv, minlength=len(uniq))
    ks = uniq.tolist()
    return (
        {k: int(v) for k, v in zip(ks, sums.tolist(), strict=True)},
        {k: int(v) for k, v in zip(ks, counts.tolist(), strict=True)},
    )


def step_stats(trace: Trace) -> list[StepStats]:
    """Statistics for every profiler step in the trace (empty list when it has no steps)."""
    ops = trace.ops
    is_step = Codes.of(ops.column("kind")).eq("step")
    if not is_step.any():
        return []
    ids = ints(ops.column("id"))
    step_col = ints(ops.column("step"))
    dur = ints(ops.column("dur_ns"), 0)
    rows = np.flatnonzero(is_step)
    step_ids, step_num, step_dur = ids[rows], step_col[rows], dur[rows]

    # CPU: top-level children of each step marker (opscope's own sync left out)
    parent = ints(ops.column("parent_op"))
    top = np.isin(parent, step_ids) & ~Codes.of(ops.column("name")).isin(SYNC_NAMES)
    cpu_by_step, _ = _sum_by(parent[top], dur[top])

    if trace.device.kind == "cpu":
        work = is_host_work(ops)
        work &= step_col >= 0
        self_ns = ints(ops.column("self_ns"), 0)
        dev_ns, dev_n = _sum_by(step_col[work], self_ns[work])
    else:
        ev = trace.events
        dev = Codes.of(ev.column("source")).eq("device") & Codes.of(ev.column("kind")).isin(
            DEVICE_WORK_KINDS
        )
        ev_step = ints(ev.column("step"))
        dev &= ev_step >= 0
        dev_ns, dev_n = _sum_by(ev_step[dev], ints(ev.column("dur_ns"), 0)[dev])

    out = []
    for sid, num, d in zip(step_ids.tolist(), step_num.tolist(), step_dur.tolist(), strict=True):
        out.append(
            StepStats(
                step=int(num),
                wall_us=d / 1e3,
                cpu_us=cpu_by_step.get(sid, 0) / 1e3,
                device_us=dev_ns.get(num, 0) / 1e3,
                device_ops=dev_n.get(num, 0),
            )
        )
    return sorted(out, key=lambda s: s.step)


def step_compute(trace: Trace) -> dict[int, float]:
    """``{step: its compute in µs}``: on a CPU trace the computing ops' self time, the
    communication ops left out (:func:`opscope.analysis.comm.is_comm_op`); on a device, its
    kernels' and executions' time (no collectives, copies or sets)."""
    from opscope.analysis.comm import is_comm_op

    if trace.device.kind == "cpu":
        ops = trace.ops
        step_col = ints(ops.column("step"))
        work = is_host_work(ops) & (step_col >= 0)
        work &= ~Codes.of(ops.column("name")).passing(is_comm_op)
        got, _ = _sum_by(step_col[work], ints(ops.column("self_ns"), 0)[work])
    else:
        # the index's arrays: no column of the event table read again
        idx = trace.index
        dev = idx.is_device & idx.kind.isin(("kernel", "exec")) & (idx.step >= 0)
        got, _ = _sum_by(idx.step[dev], idx.dur[dev])
    return {int(k): v / 1e3 for k, v in sorted(got.items())}
