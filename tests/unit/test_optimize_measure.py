"""opscope optimize's timing rules: outlier rounds, the speedup as the ratio of the medians,
the strict verdict, when a verdict is settled, threads pinned and restored, the best chosen
from intervals with ties said."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from opscope.bench.stats import summarize
from opscope.bench.timing import Timing
from opscope.optimize.measure import (
    kept_rounds,
    pinned_threads,
    settled,
    speed,
    verdict_of,
)
from opscope.optimize.result import Candidate, OptimizeResult


def _series(median: float, spread: float, n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1 + spread * rng.standard_normal(n)))


def _timing(samples: list[float]) -> Timing:
    return Timing(samples_s=tuple(samples), number=1, summary=summarize(samples))


def test_a_far_outlier_round_is_dropped_from_the_pair() -> None:
    a = _series(1.0, 0.01, 30, 1)
    b = _series(0.5, 0.01, 30, 2)
    a[7] = 50.0  # one burst of other load
    x, y, dropped = kept_rounds(a, b)
    assert dropped == 1 and len(x) == len(y) == 29 and 50.0 not in x
    s = speed(a, b)
    assert s.outlier_rounds == 1 and s.rounds == 29
    assert s.point == pytest.approx(float(np.median(x) / np.median(y)))


def test_a_bimodal_series_is_not_trimmed() -> None:
    a = [1.0] * 10 + [3.0] * 10
    b = [1.0] * 20
    assert kept_rounds(a, b)[2] == 0


@pytest.mark.parametrize(
    ("ci", "noise", "expected"),
    [
        ((1.20, 1.40), 0.0, "faster"),
        ((1.01, 1.20), 0.0, "same"),  # excludes 1 but not the noise floor
        ((0.60, 0.90), 0.0, "slower"),
        ((0.95, 0.99), 0.0, "same"),
        ((1.10, 1.20), 0.2, "same"),  # below the rounds' own noise
    ],
)
def test_the_verdict_needs_the_whole_interval_beyond_the_floor(ci, noise, expected) -> None:
    assert verdict_of(ci, noise) == expected


def test_settled_when_no_threshold_is_inside_the_interval() -> None:
    s = speed(_series(1.0, 0.001, 40, 3), _series(0.5, 0.001, 40, 4))
    assert s.verdict == "faster" and settled(s)
    s = speed(_series(1.0, 0.2, 8, 5), _series(0.97, 0.2, 8, 6))
    assert not settled(s)  # 1 - 3 % lies inside: more rounds could move it


def test_threads_are_pinned_and_restored() -> None:
    before = torch.get_num_threads()
    with pinned_threads("cpu", 1) as t:
        assert torch.get_num_threads() == 1 == t["threads"]
        assert t["threads_before"] == before
    assert torch.get_num_threads() == before


def _cand(name: str, median: float, seed: int, kind: str = "rewrite") -> Candidate:
    c = Candidate(name, kind, [], verdict="faster", numerics_ok=True)
    c.timing = _timing(_series(median, 0.01, 40, seed))
    ref = _series(1.0, 0.01, 40, 99)
    s = speed(ref, list(c.timing.samples_s))
    c.speedup = s.to_dict()
    return c


def test_a_best_that_does_not_separate_from_the_runner_up_says_so() -> None:
    r = OptimizeResult(target="t", device={}, budget_s=1)
    r.candidates = [_cand("rewrite:a", 0.500, 1), _cand("compile:default", 0.499, 2, "compile")]
    assert r.choose_best() == "rewrite:a"  # tied: the first tried, the simpler change
    assert r.tied_with == ["compile:default"] and "does not separate" in (r.best_note or "")


def test_a_best_that_separates_names_its_margin() -> None:
    r = OptimizeResult(target="t", device={}, budget_s=1)
    r.candidates = [_cand("rewrite:a", 0.8, 1), _cand("compile:default", 0.4, 2, "compile")]
    assert r.choose_best() == "compile:default" and r.tied_with == []
    assert "faster than the runner-up rewrite:a" in (r.best_note or "")
    assert math.isclose(float((r.best_note or "").split("x")[0].split()[-1]), 2.0, rel_tol=0.05)


def test_an_outlier_round_is_dropped_from_every_series_so_the_medians_give_the_speedup() -> None:
    """A burst in one candidate's block drops that round from the original and every other
    candidate too: each speedup is then the ratio of the two medians printed."""
    from opscope.optimize.measure import trimmed

    ref = _series(1.0, 0.05, 31, 1)
    a = _series(0.8, 0.05, 31, 2)
    b = _series(0.5, 0.05, 31, 3)
    b[4] = 40.0  # only b's block is hit in round 4
    a[20] = 30.0  # only a's in round 20
    t, dropped = trimmed({"original": _timing(ref), "a": _timing(a), "b": _timing(b)})
    assert dropped == 2 and all(x.summary.n == 29 for x in t.values())
    assert 40.0 not in t["b"].samples_s and ref[4] not in t["original"].samples_s
    for name in ("a", "b"):
        c = Candidate(name, "rewrite", [])
        ref_o = _Outcome("original", t["original"])
        c.absorb(_Outcome(name, t[name]), ref_o, trimmed_rounds=dropped)
        ratio = ref_o.latency_us()["median"] / c.latency_us["median"]
        assert c.speedup["point"] == pytest.approx(ratio, rel=1e-12)
        assert c.speedup["outlier_rounds"] == 2 and c.speedup["rounds"] == 29
    # aligned series of unequal length are left alone
    same, none = trimmed({"original": _timing(ref), "a": _timing(a[:-1])})
    assert none == 0 and same["a"].samples_s == tuple(a[:-1])


class _Outcome:
    """The figures of a variant :meth:`Candidate.absorb` reads."""

    def __init__(self, name: str, timing: Timing) -> None:
        self.name, self.timing = name, timing
        self.numerics_ok, self.numerics, self.error = True, None, None
        self.device_ops, self.compile_s, self.recompiled = None, None, False

    def latency_us(self) -> dict[str, float]:
        return {"median": self.timing.summary.median * 1e6}


def test_one_cpu_thread_is_timed_in_process_cpu_time_else_the_wall_clock() -> None:
    import time

    from opscope.optimize.measure import timing_clock

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert timing_clock("cpu") == (time.process_time, "process_cpu")
        assert timing_clock("cuda")[1] == "wall"
        torch.set_num_threads(2)
        assert timing_clock("cpu") == (time.perf_counter, "wall")
    finally:
        torch.set_num_threads(before)


def test_the_comparison_times_its_blocks_with_the_clock_given(tmp_path) -> None:
    """Time the process spends off the cores (here, asleep: as under other processes' load)
    is in the wall clock's blocks and not in the CPU clock's."""
    import time

    from opscope.bench.compare import run_comparison

    def nap() -> int:
        time.sleep(0.004)
        return 0

    def work() -> int:
        return 0

    by_clock = {}
    for clock in (time.perf_counter, time.process_time):
        data = run_comparison(
            {"nap": nap, "work": work},
            (),
            device="cpu",
            min_run_s=0.02,
            profile=False,
            out=tmp_path,
            clock=clock,
        )
        by_clock[clock] = data.variant("nap").timing.summary.median
    assert by_clock[time.perf_counter] >= 0.004  # a sleep lasts at least that long
    assert by_clock[time.process_time] < 0.002  # asleep, the process uses no CPU
