"""Schedule arithmetic and validation (the active window torch silently never reaches)."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerAction

from opscope.capture.schedule import Schedule
from opscope.errors import ScheduleError


@pytest.mark.parametrize(
    ("kwargs", "needed", "first_window", "active_steps"),
    [
        ({"wait": 2, "warmup": 1, "active": 1}, 4, 4, [3]),
        ({"wait": 0, "warmup": 0, "active": 3}, 3, 3, [0, 1, 2]),
        ({"wait": 1, "warmup": 1, "active": 2, "repeat": 2}, 8, 4, [2, 3, 6, 7]),
        ({"wait": 1, "warmup": 0, "active": 1, "skip_first": 3}, 5, 5, [4]),
    ],
)
def test_step_arithmetic(
    kwargs: dict[str, int], needed: int, first_window: int, active_steps: list[int]
) -> None:
    s = Schedule(**kwargs)
    assert s.steps_needed == needed
    assert s.first_window_steps == first_window
    assert s.active_steps() == active_steps


@pytest.mark.parametrize(
    "kwargs",
    [
        {"wait": 2, "warmup": 1, "active": 1},
        {"wait": 1, "warmup": 1, "active": 2, "repeat": 3},
        {"wait": 0, "warmup": 2, "active": 1, "repeat": 2, "skip_first": 2},
    ],
)
def test_active_steps_agree_with_torch(kwargs: dict[str, int]) -> None:
    ours = Schedule(**kwargs)
    theirs = ours.to_torch()
    recorded = {ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE}
    torch_active = [i for i in range(ours.steps_needed + 5) if theirs(i) in recorded]
    assert torch_active == ours.active_steps()
    assert isinstance(theirs(0), ProfilerAction)


def test_validate_message_names_the_numbers() -> None:
    s = Schedule(wait=2, warmup=1, active=1)
    with pytest.raises(ScheduleError) as info:
        s.validate(2)
    assert str(info.value).startswith(
        "the profiler's active window starts at step 3 and needs 4 steps "
        "(skip_first 0 + wait 2 + warmup 1 + active 1); the program ran 2: "
        "torch would write an empty trace or none"
    )


@pytest.mark.parametrize(
    ("kwargs", "steps_run", "ok"),
    [
        ({"wait": 2, "warmup": 1, "active": 1}, 0, False),
        ({"wait": 2, "warmup": 1, "active": 1}, 3, False),
        ({"wait": 2, "warmup": 1, "active": 1}, 4, True),
        ({"wait": 2, "warmup": 1, "active": 1}, 40, True),
        ({"wait": 0, "warmup": 0, "active": 2, "skip_first": 1}, 2, False),
        ({"wait": 0, "warmup": 0, "active": 2, "skip_first": 1}, 3, True),
        ({"wait": 1, "warmup": 1, "active": 1, "repeat": 3}, 3, True),
    ],
)
def test_validate(kwargs: dict[str, int], steps_run: int, ok: bool) -> None:
    s = Schedule(**kwargs)
    if ok:
        s.validate(steps_run)
    else:
        with pytest.raises(ScheduleError, match=f"the program ran {steps_run}:"):
            s.validate(steps_run)


def test_check_warns_about_incomplete_repeats() -> None:
    s = Schedule(wait=1, warmup=1, active=2, repeat=3)
    assert s.check(12) is None
    assert s.check(20) is None
    assert s.check(2) is None  # validate() reports this one
    note = s.check(5)
    assert note is not None
    assert "ran 5 of the 12 steps" in note
    assert "1 of 3 active windows" in note
    assert "partly" not in note
    partial = s.check(7)  # step 7 is the second active step of cycle 2
    assert partial is not None and "(the last one partly)" in partial


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"wait": -1}, "schedule wait must be >= 0, got -1"),
        ({"skip_first": -2}, "schedule skip_first must be >= 0, got -2"),
        ({"active": 0}, "schedule active must be >= 1, got 0"),
        ({"repeat": 0}, "schedule repeat must be >= 1, got 0"),
        ({"warmup": 1.5}, "schedule warmup must be an integer, got 1.5"),
        ({"wait": True}, "schedule wait must be an integer, got True"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:  # also a ScheduleError
        Schedule(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ScheduleError)
    assert str(info.value).startswith(message)


def test_to_dict_and_frozen() -> None:
    s = Schedule(wait=1, warmup=2, active=3, repeat=2, skip_first=1)
    assert s.to_dict() == {
        "wait": 1,
        "warmup": 2,
        "active": 3,
        "repeat": 2,
        "skip_first": 1,
        "steps_needed": 13,
    }
    with pytest.raises(AttributeError):
        s.wait = 5  # type: ignore[misc]
    assert callable(s.to_torch()) and torch.profiler.ProfilerAction is ProfilerAction
