"""Robust statistics for repeated timings: median, IQR and distribution-free confidence intervals.

No normality is assumed: timings on shared machines are skewed and heavy-tailed.  The 95%
interval of the median comes from order statistics (the binomial method), the same construction
used for nonparametric median intervals in standard references; it holds for any continuous
distribution of independent samples.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    ci95: tuple[float, float]
    mean: float
    minimum: float
    maximum: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "median": self.median,
            "iqr": self.iqr,
            "q1": self.q1,
            "q3": self.q3,
            "ci95": list(self.ci95),
            "mean": self.mean,
            "min": self.minimum,
            "max": self.maximum,
        }


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method) of already sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(sorted_values[lo])
    frac = pos - lo
    return float(sorted_values[lo] * (1 - frac) + sorted_values[hi] * frac)


def median_ci(sorted_values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval for the median: order statistics x_(j), x_(k) with
    P(j <= B < k) >= confidence for B ~ Binomial(n, 1/2)."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("no values")
    if n < 6:  # too few samples for a 95% order-statistic interval: report the full range
        return float(sorted_values[0]), float(sorted_values[-1])
    alpha = 1 - confidence
    # B = number of samples below the median ~ Binomial(n, 1/2).  [x_(j), x_(n+1-j)] covers the
    # median with probability 1 - 2 P(B <= j-1); take the largest j keeping that >= confidence.
    cdf = 0.0
    j = 1
    for i in range(n + 1):
        cdf += math.comb(n, i) / 2**n
        if cdf > alpha / 2:
            j = max(i, 1)  # P(B <= i-1) <= alpha/2 < P(B <= i)
            break
    k = n + 1 - j
    return float(sorted_values[j - 1]), float(sorted_values[k - 1])


def summarize(values: Sequence[float]) -> Summary:
    v = sorted(float(x) for x in values)
    if not v:
        raise ValueError("no values")
    return Summary(
        n=len(v),
        median=quantile(v, 0.5),
        q1=quantile(v, 0.25),
        q3=quantile(v, 0.75),
        ci95=median_ci(v),
        mean=sum(v) / len(v),
        minimum=v[0],
        maximum=v[-1],
    )
