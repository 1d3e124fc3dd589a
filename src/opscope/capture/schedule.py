"""The profiler schedule, with the arithmetic torch leaves to the user.

Contract: a :class:`Schedule` has the meaning of ``torch.profiler.schedule`` (steps are counted
by ``step()`` calls, from 0): the first ``skip_first`` steps are ignored, then each of ``repeat``
cycles has ``wait`` idle steps, ``warmup`` steps where the profiler runs but discards events, and
``active`` recorded steps.  It knows how many steps a program must run (:attr:`steps_needed`)
and says, after the fact, whether the active window was reached (:meth:`validate` raises
:class:`~opscope.errors.ScheduleError`) or only partly (:meth:`check` returns a warning).

torch itself says nothing when a program stops before the active window: it writes an empty
trace or none at all, which is the most common way a first profile goes wrong.

``repeat`` must be at least 1: torch's ``repeat=0`` ("cycle until the program stops") has no
step count to validate against.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from opscope.errors import ScheduleError


class ScheduleArgumentError(ScheduleError, ValueError):
    """A schedule argument out of range (catchable as ScheduleError or ValueError)."""


@dataclass(frozen=True)
class Schedule:
    """Steps to skip, wait, warm up and record; see the module docstring."""

    wait: int = 2
    warmup: int = 1
    active: int = 1
    repeat: int = 1
    skip_first: int = 0

    def __post_init__(self) -> None:
        for field_name in ("wait", "warmup", "active", "repeat", "skip_first"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ScheduleArgumentError(
                    f"schedule {field_name} must be an integer, got {value!r}"
                )
            if value < 0:
                raise ScheduleArgumentError(f"schedule {field_name} must be >= 0, got {value}")
        if self.active < 1:
            raise ScheduleArgumentError(
                f"schedule active must be >= 1, got {self.active}: nothing would be recorded"
            )
        if self.repeat < 1:
            raise ScheduleArgumentError(
                f"schedule repeat must be >= 1, got {self.repeat} "
                "(torch's repeat=0, 'until the program stops', has no step count to check)"
            )

    @property
    def cycle(self) -> int:
        """Steps in one wait + warmup + active cycle."""
        return self.wait + self.warmup + self.active

    @property
    def first_active_step(self) -> int:
        """Index (from 0) of the first recorded step."""
        return self.skip_first + self.wait + self.warmup

    @property
    def first_window_steps(self) -> int:
        """``step()`` calls needed to complete the first active window."""
        return self.first_active_step + self.active

    @property
    def steps_needed(self) -> int:
        """``step()`` calls needed to complete every cycle."""
        return self.skip_first + self.repeat * self.cycle

    def is_active(self, step: int) -> bool:
        """Whether step ``step`` (from 0) is recorded."""
        if step < self.skip_first:
            return False
        cycle_no, pos = divmod(step - self.skip_first, self.cycle)
        return cycle_no < self.repeat and pos >= self.wait + self.warmup

    def active_steps(self) -> list[int]:
        """Indices of all recorded steps."""
        return [s for s in range(self.steps_needed) if self.is_active(s)]

    def cycles_completed(self, steps_run: int) -> int:
        """Active windows completed after ``steps_run`` ``step()`` calls."""
        if steps_run < self.skip_first:
            return 0
        return min(self.repeat, (steps_run - self.skip_first) // self.cycle)

    def describe(self) -> str:
        return (
            f"skip_first {self.skip_first} + wait {self.wait} + warmup {self.warmup} "
            f"+ active {self.active}"
        )

    def validate(self, steps_run: int) -> None:
        """Raise ScheduleError unless ``steps_run`` steps completed the first active window."""
        if steps_run < self.first_window_steps:
            raise ScheduleError(
                f"the profiler's active window starts at step {self.first_active_step} and needs "
                f"{self.first_window_steps} steps ({self.describe()}); the program ran "
                f"{steps_run}: torch would write an empty trace or none. Run more steps "
                "(loop `for _ in range(p.steps)` and call p.step() once per iteration) or "
                "lower wait/warmup"
            )

    def check(self, steps_run: int) -> str | None:
        """A warning when the run was valid but not what the schedule asked for, else None."""
        if steps_run < self.first_window_steps:
            return None  # validate() reports this one
        if steps_run < self.steps_needed:
            done = self.cycles_completed(steps_run)
            partial = " (the last one partly)" if self.is_active(steps_run) else ""
            return (
                f"the program ran {steps_run} of the {self.steps_needed} steps the schedule "
                f"needs: {done} of {self.repeat} active windows were recorded{partial}"
            )
        return None

    def to_torch(self) -> Any:
        """The equivalent ``torch.profiler.schedule``."""
        import torch

        return torch.profiler.schedule(
            wait=self.wait,
            warmup=self.warmup,
            active=self.active,
            repeat=self.repeat,
            skip_first=self.skip_first,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "steps_needed": self.steps_needed}
