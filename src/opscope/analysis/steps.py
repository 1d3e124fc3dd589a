"""Per profiler step: how many device executions, how much device time, how much CPU time.

* ``device_ops`` - device executions (kernels, copies, sets, collectives, Neuron executions)
  attributed to the step; on a CPU-only trace, the computing leaf ops that ran (see
  :func:`opscope.analysis.optable.is_host_work`).
* ``device_us`` - their summed duration.
* ``cpu_us`` - CPU time of the step's top-level framework events (what the program's own calls
  cost on the host), without the profiler's step marker and without opscope's device
  synchronisation, which is waiting, not work.
* ``wall_us`` - the ProfilerStep span.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.analysis.optable import is_host_work

if TYPE_CHECKING:
    from opscope.trace.model import Trace

_WORK_KINDS = pa.array(["kernel", "memcpy", "memset", "comm", "exec"])
SYNC_NAMES = frozenset(("opscope::synchronize",))


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


def step_stats(trace: Trace) -> list[StepStats]:
    """Statistics for every profiler step in the trace (empty list when it has no steps)."""
    ops = trace.ops
    kinds = ops.column("kind").cast(pa.string())
    steps = ops.filter(pc.equal(kinds, "step"))
    if steps.num_rows == 0:
        return []
    names = ops.column("name").cast(pa.string())
    step_ids = steps.column("id").to_pylist()
    step_num = steps.column("step").to_pylist()
    step_dur = steps.column("dur_ns").to_pylist()

    # CPU: top-level children of each step marker
    parent = ops.column("parent_op")
    not_sync = pc.invert(pc.is_in(names, pa.array(sorted(SYNC_NAMES))))
    top = ops.filter(pc.and_(pc.is_in(parent, pa.array(step_ids, pa.int64())), not_sync))
    cpu_by_step: dict[int, int] = {}
    for p, d in zip(
        top.column("parent_op").to_pylist(), top.column("dur_ns").to_pylist(), strict=True
    ):
        cpu_by_step[p] = cpu_by_step.get(p, 0) + d

    dev_ns: dict[int, int] = {}
    dev_n: dict[int, int] = {}
    if trace.device.kind == "cpu":
        work = is_host_work(ops.column("name"), ops.column("is_leaf"), ops.column("kind"))
        idx = np.nonzero(work)[0]
        sel = ops.take(pa.array(idx, pa.int64()))
        for s, d in zip(
            sel.column("step").to_pylist(), sel.column("self_ns").to_pylist(), strict=True
        ):
            if s is not None:
                dev_ns[s] = dev_ns.get(s, 0) + d
                dev_n[s] = dev_n.get(s, 0) + 1
    else:
        ev = trace.events
        dev = ev.filter(
            pc.and_(
                pc.equal(ev.column("source").cast(pa.string()), "device"),
                pc.is_in(ev.column("kind").cast(pa.string()), _WORK_KINDS),
            )
        )
        for s, d in zip(
            dev.column("step").to_pylist(), dev.column("dur_ns").to_pylist(), strict=True
        ):
            if s is not None:
                dev_ns[s] = dev_ns.get(s, 0) + d
                dev_n[s] = dev_n.get(s, 0) + 1

    out = []
    for sid, num, dur in zip(step_ids, step_num, step_dur, strict=True):
        out.append(
            StepStats(
                step=int(num) if num is not None else -1,
                wall_us=dur / 1e3,
                cpu_us=cpu_by_step.get(sid, 0) / 1e3,
                device_us=dev_ns.get(num, 0) / 1e3,
                device_ops=dev_n.get(num, 0),
            )
        )
    return sorted(out, key=lambda s: s.step)
