"""Findings about a job as a whole, from its rank reports (no events): what no single rank's
analysis can see.

* ``load_imbalance`` - compute spread across ranks.  Each rank's compute time (the union of
  its compute work, :mod:`opscope.analysis.comm`) against the median rank's.  Fires with at
  least two ranks when the busiest rank computes at least :data:`MIN_EXCESS` (10 %) more than
  the median *and* that excess is at least :data:`MIN_WALL_SHARE` (1 %) of the job's wall
  time.  At stake: the excess (at every synchronising collective the others wait for it).

Thresholds are documented in docs/findings.md; each is tested to fire and not to fire.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opscope.analysis.findings.base import severity_of

if TYPE_CHECKING:
    from opscope.analysis.job import RankReport

MIN_EXCESS = 0.10
MIN_WALL_SHARE = 0.01


def _fmt(us: float) -> str:
    return f"{us / 1e3:.1f} ms" if us >= 1e3 else f"{us:.0f} µs"


def load_imbalance(ranks: Sequence[RankReport], wall_us: float) -> dict[str, Any] | None:
    compute = {r.rank: float(r.timeline.compute_us) for r in ranks if r.timeline.compute_us > 0}
    if len(compute) < 2 or wall_us <= 0:
        return None
    median = statistics.median(compute.values())
    worst = max(compute, key=lambda r: (compute[r], -r))
    excess = compute[worst] - median
    if median <= 0 or excess < MIN_EXCESS * median or excess < MIN_WALL_SHARE * wall_us:
        return None
    share = min(1.0, excess / wall_us)
    return {
        "kind": "load_imbalance",
        "severity": severity_of(share),
        "title": (
            f"load imbalance: rank {worst} computes {_fmt(compute[worst])}, "
            f"{100 * excess / median:.0f} % more than the median rank ({_fmt(median)})"
        ),
        "time_at_stake_us": excess,
        "share": share,
        "evidence": [],
        "recommendation": (
            f"The other ranks wait for rank {worst} at every synchronising collective. Even out "
            "the work per rank: shards of equal size (drop_last, padding), sequences bucketed "
            "or packed by length, balanced expert routing (MoE capacity factor, auxiliary "
            "loss), pipeline stages of equal cost; check that rank's data loading and its "
            "device (clocks, thermal throttling, a slower link)."
        ),
        "confidence": "medium",
        "details": {
            "compute_us": {str(r): v for r, v in sorted(compute.items())},
            "median_us": median,
            "rank": worst,
        },
        "rank": None,
    }


def job_findings(ranks: Sequence[RankReport], wall_us: float) -> list[dict[str, Any]]:
    """The job-level findings of ``ranks`` (unranked; the merge ranks them with the rest)."""
    found = [load_imbalance(ranks, wall_us)]
    return [f for f in found if f is not None]
