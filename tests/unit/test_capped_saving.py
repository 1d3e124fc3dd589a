"""A finding's step saving is rounded to the ns and never above its time at stake, even when
the stake is finer than a ns (a CI run's load_imbalance: stake 13978.915500000001 us,
saving 13978.916)."""

from __future__ import annotations

import pytest

from opscope.analysis.critical.fixes import capped_saving


@pytest.mark.parametrize(
    "stake", [13978.915500000001, 13978.9155, 0.0005, 1.2345, 7.0, 123456.7895]
)
def test_a_saving_never_rounds_past_its_stake(stake: float) -> None:
    for saved in (stake, stake + 1.0, stake * 2):
        got = capped_saving(saved, stake)
        assert got <= stake
        assert got == pytest.approx(stake, abs=0.0005)


def test_a_saving_below_its_stake_is_rounded_to_the_ns() -> None:
    assert capped_saving(12.34567, 100.0) == 12.346
    assert capped_saving(0.0, 5.0) == 0.0
