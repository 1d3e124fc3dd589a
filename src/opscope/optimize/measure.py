"""Timing a user can trust: every candidate measured in one interleaved run with the original,
threads pinned, outlier rounds dropped, speedups that the printed medians give, verdicts and
the best chosen from intervals.

* **One run.**  Candidates are built first (a compile candidate's first call compiles it);
  then the original and every candidate go through one :func:`opscope.bench.compare
  .run_comparison`: one block of each per round, in rotating order, so drift falls on all of
  them alike and every speedup has the same reference.
* **Threads.**  On a CPU of 2 to 4 cores, torch runs one thread fewer than the cores while
  optimizing (all of them phase-lock with any other load and skew one variant for a whole run);
  the count is reported and restored after.  Inductor's CPU kernels take their thread count
  at compile time, so the pin spans the compiles too.
* **Clock.**  On a CPU where torch runs one thread (pinned, as above), each block is timed in
  the process's CPU time: the time other processes hold the cores is not in it.  On a loaded
  2-core machine wall-clock medians of one block moved 4x between runs and pulled every
  speedup toward 1 (a 1.15x rewrite measured 1.02x-1.15x); CPU time kept them within a few
  percent.  Elsewhere (more threads, an accelerator) it is the wall clock.  ``timing.clock``
  says which.
* **Enough rounds.**  While a candidate's interval holds a threshold of the verdict (``1 ±``
  the noise floor), another set of interleaved rounds of every variant is appended (within
  the budget): on a loaded machine a verdict comes from more rounds, not from luck.
* **Outliers.**  A round in which any variant's block is a far outlier of its own series
  (beyond ``Q3 + 3 IQR``) is dropped from every series (:func:`trimmed`), and counted; the
  medians printed and the speedups are of the same kept rounds.
* **Speedup.**  ``median(original) / median(candidate)`` over the kept rounds - exactly the
  ratio of the medians printed - with a 95 % interval from resampling the rounds as pairs.
  ``faster`` or ``slower`` only when the whole interval is beyond the noise floor (3 %, or the
  rounds' own noise when larger; :func:`verdict_of`).
* **Best.**  Of the faster candidates whose numerics hold, the fastest; each other one is
  compared with it directly, paired in the same rounds.  The ones that do not separate from
  it are tied, and the first of them in the order tried (a source rewrite before a compile
  mode: the simpler change) is the best, with the tie said.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opscope.bench.compare import NOISE_FLOOR, paired_noise, speedup_ci
from opscope.bench.timing import Timing


@contextlib.contextmanager
def pinned_threads(kind: str, threads: int | None = None) -> Iterator[dict[str, int]]:
    """Pin torch's intra-op threads for the duration (see the module docstring)."""
    import torch

    before = torch.get_num_threads()
    if threads is None:
        cores = os.cpu_count() or 1
        threads = max(1, min(before, cores - 1)) if kind == "cpu" and 2 <= cores <= 4 else before
    torch.set_num_threads(max(1, int(threads)))
    try:
        yield {"threads": torch.get_num_threads(), "threads_before": before}
    finally:
        torch.set_num_threads(before)


def timing_clock(kind: str) -> tuple[Callable[[], float], str]:
    """The clock the blocks are timed with and its name (``process_cpu`` or ``wall``): see the
    module docstring."""
    import torch

    if kind == "cpu" and torch.get_num_threads() == 1:
        return time.process_time, "process_cpu"
    return time.perf_counter, "wall"


def kept_mask(series: Sequence[Sequence[float]]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """The rounds of the aligned ``series`` (one block of each per round) in which no block is
    a far outlier of its own series; all of them when the series are short, of unequal length,
    or when so many would go that the series is bimodal rather than noisy."""
    arrays = [np.asarray(s, dtype=np.float64) for s in series]
    n = len(arrays[0]) if arrays else 0
    keep = np.ones(n, dtype=bool)
    if n < 8 or any(len(x) != n for x in arrays):
        return keep
    for x in arrays:
        q1, q3 = np.percentile(x, [25, 75])
        keep &= x <= q3 + 3 * (q3 - q1)
    if keep.sum() < max(6, n // 2):  # a bimodal series is not outliers
        return np.ones(n, dtype=bool)
    return keep


def kept_rounds(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], list[float], int]:
    """The paired rounds with neither block a far outlier of its series; how many dropped."""
    if len(a) != len(b):
        return list(a), list(b), 0
    keep = kept_mask([a, b])
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    return x[keep].tolist(), y[keep].tolist(), int((~keep).sum())


def trimmed(timings: Mapping[str, Timing]) -> tuple[dict[str, Timing], int]:
    """Every timing of one interleaved run without the rounds in which any of them is a far
    outlier (:func:`kept_mask`), summaries recomputed; how many rounds were dropped."""
    from opscope.bench.stats import summarize

    names = list(timings)
    keep = kept_mask([timings[n].samples_s for n in names])
    dropped = int((~keep).sum())
    if not dropped:
        return dict(timings), 0
    out: dict[str, Timing] = {}
    for n in names:
        t = timings[n]
        kept = tuple(float(v) for v in np.asarray(t.samples_s, dtype=np.float64)[keep])
        out[n] = Timing(samples_s=kept, number=t.number, summary=summarize(kept))
    return out, dropped


@dataclass(frozen=True)
class Speed:
    point: float
    ci95: tuple[float, float]
    noise: float
    verdict: str  # faster | slower | same
    rounds: int
    outlier_rounds: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": self.point,
            "ci95": list(self.ci95),
            "statistic": "ratio of medians",
            "rounds": self.rounds,
            "outlier_rounds": self.outlier_rounds,
        }


def speed(
    ref_s: Sequence[float], var_s: Sequence[float], *, trimmed_rounds: int | None = None
) -> Speed:
    """The speedup of a variant over the reference from their paired rounds.  The pair's
    outlier rounds are dropped here, unless the series were already trimmed together
    (``trimmed_rounds``: how many rounds :func:`trimmed` dropped), so the point is the ratio
    of their medians as given."""
    if trimmed_rounds is None:
        a, b, dropped = kept_rounds(ref_s, var_s)
    else:
        a, b, dropped = list(ref_s), list(var_s), trimmed_rounds
    if len(a) != len(b) or len(a) < 2:
        point, ci = speedup_ci(a, b, paired=False)
        noise = 0.0
    else:
        point, ci = speedup_ci(a, b, of_medians=True)
        noise = paired_noise(a, b) if len(a) >= 4 else 0.0
    return Speed(point, ci, noise, verdict_of(ci, noise), len(a), dropped)


def verdict_of(ci: tuple[float, float], noise: float, floor: float = NOISE_FLOOR) -> str:
    """``faster`` when the whole interval is above ``exp(threshold)``, ``slower`` when it is
    below ``exp(-threshold)``, else ``same``; the threshold is the noise floor, or the noise
    of the rounds when larger.  Stricter than the comparison's rule (the point beyond the
    noise, the interval excluding 1): a change is claimed only when no value of its interval
    is noise."""
    thr = max(floor, noise)
    if ci[0] > math.exp(thr):
        return "faster"
    if ci[1] < math.exp(-thr):
        return "slower"
    return "same"


def settled(s: Speed, floor: float = NOISE_FLOOR) -> bool:
    """Whether the verdict is decided: neither threshold (``exp(±threshold)``) lies inside the
    interval, so more rounds would not move it across one."""
    lo, hi = s.ci95
    thr = max(floor, s.noise)
    return not any(lo <= math.exp(t) <= hi for t in (thr, -thr))


def more_rounds(
    fns: dict[str, Callable[[], Any]],
    timings: dict[str, Timing],
    reference: str,
    synchronize: Callable[[], None],
    *,
    min_run_s: float,
    until: float,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[dict[str, Timing], int]:
    """Interleaved rounds of every variant again, appended to ``timings``, while a candidate's
    verdict is not settled and before ``until`` (a ``time.perf_counter`` deadline); the new
    timings and how many more runs were made."""
    from opscope.bench.stats import summarize
    from opscope.bench.timing import measure_interleaved

    out = dict(timings)
    extra = 0
    while time.perf_counter() < until:
        ref = out[reference]
        open_ = [
            n for n in out if n != reference and not settled(speed(ref.samples_s, out[n].samples_s))
        ]
        if not open_:
            break
        t0 = time.perf_counter()
        new = measure_interleaved(fns, synchronize, warmup=1, min_run_s=min_run_s, clock=clock)
        extra += 1
        for n, t in new.items():
            samples = out[n].samples_s + t.samples_s
            out[n] = Timing(samples_s=samples, number=t.number, summary=summarize(samples))
        if time.perf_counter() + (time.perf_counter() - t0) > until:
            break
    return out, extra


def separates(best_s: Sequence[float], other_s: Sequence[float]) -> tuple[Speed, bool]:
    """How much faster ``best`` is than ``other`` (paired rounds), and whether that holds."""
    s = speed(other_s, best_s)
    return s, s.verdict == "faster"


__all__ = [
    "Speed",
    "kept_mask",
    "kept_rounds",
    "more_rounds",
    "pinned_threads",
    "separates",
    "settled",
    "speed",
    "timing_clock",
    "trimmed",
    "verdict_of",
]
