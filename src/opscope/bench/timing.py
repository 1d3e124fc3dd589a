"""Steady-state latency: warm-up, then blocks of timed calls with device synchronisation.

Like ``torch.utils.benchmark``'s blocked autorange: a block runs the function ``number`` times
and synchronises the device once; ``number`` is chosen so one block lasts at least
``block_s`` (so timer resolution and the sync cost vanish), and blocks are repeated until
``min_run_s`` has passed and at least ``min_blocks`` samples exist.  Each sample is the per-call
time of one block.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opscope.bench.stats import Summary, summarize


@dataclass(frozen=True)
class Timing:
    samples_s: tuple[float, ...]  # per-call seconds, one per block
    number: int  # calls per block
    summary: Summary  # over samples, in seconds

    def to_dict(self, unit: float = 1e6) -> dict[str, Any]:
        s = self.summary
        return {
            "median": s.median * unit,
            "iqr": s.iqr * unit,
            "ci95": [s.ci95[0] * unit, s.ci95[1] * unit],
            "blocks": s.n,
            "calls_per_block": self.number,
        }


def measure(
    fn: Callable[[], Any],
    synchronize: Callable[[], None] = lambda: None,
    *,
    warmup: int = 3,
    block_s: float = 0.01,
    min_run_s: float = 0.3,
    min_blocks: int = 15,
    max_blocks: int = 500,
    max_run_s: float = 10.0,
    clock: Callable[[], float] = time.perf_counter,
) -> Timing:
    """Time ``fn`` in steady state; see the module docstring."""
    return measure_interleaved(
        {"fn": fn},
        synchronize,
        warmup=warmup,
        block_s=block_s,
        min_run_s=min_run_s,
        min_blocks=min_blocks,
        max_blocks=max_blocks,
        max_run_s=max_run_s,
        clock=clock,
    )["fn"]


def calibrate(
    fn: Callable[[], Any],
    synchronize: Callable[[], None] = lambda: None,
    *,
    block_s: float = 0.01,
    clock: Callable[[], float] = time.perf_counter,
) -> int:
    """Calls per block so that one block lasts at least ``block_s``."""
    number = 1
    while True:
        t0 = clock()
        for _ in range(number):
            fn()
        synchronize()
        elapsed = clock() - t0
        if elapsed >= block_s or number >= 1 << 20:
            return number
        grow = block_s / elapsed if elapsed > 0 else 10.0
        number = max(number + 1, min(number * 10, int(number * grow * 1.2) + 1))


def measure_interleaved(
    fns: dict[str, Callable[[], Any]],
    synchronize: Callable[[], None] = lambda: None,
    *,
    warmup: int = 3,
    block_s: float = 0.01,
    min_run_s: float = 0.3,
    min_blocks: int = 15,
    max_blocks: int = 500,
    max_run_s: float = 30.0,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Timing]:
    """Time several functions in rounds - one block of each per round, in rotating order - so
    that drift of the machine (frequency, other load) falls on all of them alike.  A comparison
    of sequential measurements can call two identical functions different; this cannot, beyond
    chance.  ``min_run_s`` is per function."""
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    synchronize()
    number = {n: calibrate(fns[n], synchronize, block_s=block_s, clock=clock) for n in names}
    samples: dict[str, list[float]] = {n: [] for n in names}
    spent: dict[str, float] = dict.fromkeys(names, 0.0)
    start = clock()
    rnd = 0
    while True:
        order = names[rnd % len(names) :] + names[: rnd % len(names)]
        for n in order:
            f, k = fns[n], number[n]
            t0 = clock()
            for _ in range(k):
                f()
            synchronize()
            dt = clock() - t0
            samples[n].append(dt / k)
            spent[n] += dt
        rnd += 1
        enough = all(len(samples[n]) >= min_blocks and spent[n] >= min_run_s for n in names)
        if enough or rnd >= max_blocks:
            break
        if clock() - start >= max_run_s and rnd >= 3:
            break
    return {
        n: Timing(samples_s=tuple(samples[n]), number=number[n], summary=summarize(samples[n]))
        for n in names
    }
