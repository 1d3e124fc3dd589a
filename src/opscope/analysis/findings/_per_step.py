"""Avoidable per-step work: what ``h2d_copies`` and ``sync_stalls`` report below their share
thresholds.

Not a rule.  A few patterns cost little each time but are waste that the program repeats every
iteration and can drop without changing what it computes: a host-to-device copy of a CPU
scalar (a 0-dim or tiny tensor) inside an op, a device sync inside the step.  The rules report
them even when their cost is under the 1 % share threshold - at the severity their share gives
(``info`` under 1 %), with ``details.below_threshold`` true - provided they recur in every step
(:func:`every_step`): a one-off is not a per-step pattern.
"""

from __future__ import annotations

import numpy as np

from opscope.analysis.findings._view import EventView


def window_steps(v: EventView) -> set[int]:
    """The profiler steps in the window (numbers of its step events)."""
    cached = v.cache.get("per_step.window_steps")
    if isinstance(cached, set):
        return cached
    out = {int(s) for s in v.step[v.in_window & v.is_steplike].tolist() if s >= 0}
    v.cache["per_step.window_steps"] = out
    return out


def every_step(v: EventView, rows: np.ndarray) -> bool:
    """Whether ``rows`` recur in every profiler step of the window.

    Every row lies in a step, and

    * with two or more steps in the window: the rows fall in at least two of them and in each
      step but perhaps the last (a profile may stop in the middle of its last step);
    * with one step numbered 1 or more: the rows are in it (the profiler's wait/warm-up steps
      ran the same code before it).

    A window without profiler steps gives False: nothing shows what one iteration is.
    """
    steps = window_steps(v)
    if len(rows) == 0 or not steps:
        return False
    row_steps = v.step[rows]
    if bool(np.any(row_steps < 0)):
        return False
    seen = {int(s) for s in row_steps.tolist()}
    if len(steps) == 1:
        return min(steps) >= 1 and seen <= steps
    return len(seen & steps) >= 2 and (steps - seen) <= {max(steps)}
