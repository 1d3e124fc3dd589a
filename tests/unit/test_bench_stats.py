"""Statistics for repeated timings: quantiles, median confidence intervals, blocked timing."""

from __future__ import annotations

import random

import numpy as np
import pytest

from opscope.bench.stats import median_ci, quantile, summarize
from opscope.bench.timing import measure


@pytest.mark.parametrize("n", [1, 2, 5, 10, 101])
def test_quantiles_match_numpy(n: int) -> None:
    rng = random.Random(n)
    values = sorted(rng.lognormvariate(0, 1) for _ in range(n))
    for q in (0.0, 0.25, 0.5, 0.75, 1.0):
        assert quantile(values, q) == pytest.approx(float(np.quantile(values, q)))


def test_summary_fields() -> None:
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.q1, s.q3, s.minimum, s.maximum) == (3.0, 2.0, 4.0, 1.0, 5.0)
    assert s.iqr == 2.0
    with pytest.raises(ValueError):
        summarize([])


def test_median_ci_covers_the_true_median_about_95_percent() -> None:
    """Coverage of the order-statistic interval on skewed data (seeded, so deterministic)."""
    rng = random.Random(1234)
    true_median = 1.0  # lognormal(0, s) has median e^0
    hits = 0
    trials = 2000
    for _ in range(trials):
        sample = sorted(rng.lognormvariate(0, 0.5) for _ in range(25))
        lo, hi = median_ci(sample)
        hits += lo <= true_median <= hi
    coverage = hits / trials
    # the binomial construction is conservative: at least 95%, not absurdly wide
    assert 0.94 <= coverage <= 0.995, coverage


def test_median_ci_narrows_with_more_samples() -> None:
    rng = random.Random(7)
    small = sorted(rng.gauss(10, 1) for _ in range(15))
    large = sorted(rng.gauss(10, 1) for _ in range(500))
    w_small = median_ci(small)[1] - median_ci(small)[0]
    w_large = median_ci(large)[1] - median_ci(large)[0]
    assert w_large < w_small / 2


class FakeClock:
    """Each call of the timed function advances time by a scripted amount."""

    def __init__(self, per_call: list[float]) -> None:
        self.now = 0.0
        self.per_call = per_call
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def fn(self) -> None:
        self.now += self.per_call[self.calls % len(self.per_call)]
        self.calls += 1


def test_measure_sizes_blocks_and_reports_per_call_time() -> None:
    clock = FakeClock([1e-4])  # 100 µs per call
    syncs: list[int] = []
    t = measure(
        clock.fn,
        lambda: syncs.append(1),
        clock=clock,
        warmup=2,
        block_s=0.01,
        min_run_s=0.2,
        min_blocks=5,
    )
    assert t.number >= 100  # a block lasts at least 10 ms
    assert t.summary.median == pytest.approx(1e-4)
    assert t.summary.iqr == pytest.approx(0.0, abs=1e-12)
    assert len(t.samples_s) >= 5
    assert len(syncs) >= len(t.samples_s)  # the device is synchronised once per block
    d = t.to_dict()
    assert d["median"] == pytest.approx(100.0)
    assert d["ci95"][0] <= d["median"] <= d["ci95"][1]


def test_measure_stops_at_max_run_time() -> None:
    clock = FakeClock([0.5])  # very slow function
    t = measure(clock.fn, clock=clock, warmup=0, block_s=0.01, min_run_s=0.1, max_run_s=2.0)
    assert 3 <= len(t.samples_s) <= 5
