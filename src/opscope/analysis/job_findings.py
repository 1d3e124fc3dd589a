"""Findings about a job as a whole, from its rank reports (no events): what no single rank's
analysis can see.

* ``load_imbalance`` - compute spread across ranks.  Each rank's compute time (the union of
  its compute work, :mod:`opscope.analysis.comm`) against the median rank's.  Fires with at
  least two ranks when the busiest rank computes at least :data:`MIN_EXCESS` (10 %) more than
  the median *and* that excess is at least :data:`MIN_WALL_SHARE` (1 %) of the job's wall
  time.  At stake: the excess (at every synchronising collective the others wait for it).

* ``straggler`` - a rank the others wait for at the collectives
  (:func:`opscope.analysis.collectives.stragglers` decides which ranks stand out).  At stake:
  the wait it caused, averaged over the other ranks (the wall time each of them lost).

A rank's ``comm_exposed`` finding counts the time it waited inside collectives for a late
rank as exposed communication; in a job whose collectives are matched, that wait is the
straggler's finding, so :func:`discount_waits` takes it out of the rank's time at stake (and
drops the finding when what is left is under the rule's threshold).

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


def _compute(ranks: Sequence[RankReport]) -> dict[int, float]:
    """Each rank's compute union (the overlap's, else the timeline's compute), where > 0."""
    out = {}
    for r in ranks:
        t = r.timeline
        v = float(t.compute_work_us if t.compute_work_us is not None else t.compute_us)
        if v > 0:
            out[r.rank] = v
    return out


def load_imbalance(ranks: Sequence[RankReport], wall_us: float) -> dict[str, Any] | None:
    compute = _compute(ranks)
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


def straggler(s: dict[str, Any], world: int, wall_us: float) -> dict[str, Any]:
    """The finding of one straggler row (``stragglers`` of the distributed section)."""
    others = max(1, world - 1)
    at_stake = float(s["caused_wait_us"]) / others
    share = min(1.0, at_stake / wall_us) if wall_us > 0 else 0.0
    rank = int(s["rank"])
    why = f" What the trace shows: it {s['cause']}." if s.get("cause") else ""
    return {
        "kind": "straggler",
        "severity": severity_of(share),
        "title": (
            f"straggler: rank {rank} arrives last at {s['times_last']} collectives; the others "
            f"wait {_fmt(at_stake)} each for it"
        ),
        "time_at_stake_us": at_stake,
        "share": share,
        "evidence": [],
        "recommendation": (
            f"Find what rank {rank} does before it reaches the collectives: compare its step's "
            "ops with another rank's (opscope diff of two ranks' traces, or report --rank): "
            "data loading, a host sync, a larger shard, longer compute, or a slower device." + why
        ),
        "confidence": "high",
        "details": {**s, "world": world},
        "rank": None,
    }


def straggler_cause(rank: int, ranks: Sequence[RankReport]) -> str | None:
    """Why ``rank`` arrives late, as far as the rank reports tell: more compute, or more time
    with nothing recorded running (work outside the profiled ops: data loading, sleeps,
    Python), than the median rank; None when neither stands out."""
    by = {r.rank: r.timeline for r in ranks}
    if rank not in by or len(by) < 2:
        return None
    others = [t for r, t in by.items() if r != rank]
    mine = by[rank]

    def work(t: Any) -> float:
        return float(t.compute_work_us if t.compute_work_us is not None else t.compute_us)

    parts = []
    med_work = statistics.median(work(t) for t in others)
    if med_work > 0 and work(mine) > 1.1 * med_work and work(mine) - med_work > 100.0:
        parts.append(f"computes {_fmt(work(mine) - med_work)} more than the median rank")
    med_idle = statistics.median(float(t.device_idle_us) for t in others)
    extra_idle = float(mine.device_idle_us) - med_idle
    if extra_idle > 0.1 * max(float(mine.wall_us), 1.0):
        parts.append(
            f"is idle {_fmt(extra_idle)} longer than the median rank: work outside the profiled "
            "ops "
            "(data loading, a sleep, Python, a host sync)"
        )
    return "; ".join(parts) or None


def discount_waits(rank: RankReport, wait_us: float | None) -> list[dict[str, Any]]:
    """``rank``'s findings, its ``comm_exposed`` one less the ``wait_us`` it spent waiting
    for other ranks inside matched collectives (see the module docstring)."""
    from opscope.analysis.findings.comm_exposed import MIN_WALL_SHARE as EXPOSED_SHARE

    if not wait_us:
        return list(rank.findings)
    wall = float(rank.timeline.wall_us)
    out = []
    for f in rank.findings:
        if f.get("kind") != "comm_exposed":
            out.append(f)
            continue
        left = max(0.0, float(f.get("time_at_stake_us", 0.0)) - float(wait_us))
        share = min(1.0, left / wall) if wall > 0 else 0.0
        if share < EXPOSED_SHARE:
            continue
        out.append(
            {
                **f,
                "time_at_stake_us": left,
                "share": share,
                "severity": severity_of(share),
                "title": f"{f.get('title')}; {_fmt(float(wait_us))} of it waiting for other ranks",
                "details": {**(f.get("details") or {}), "wait_us": float(wait_us)},
            }
        )
    return out


def job_findings(
    ranks: Sequence[RankReport], wall_us: float, stragglers: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The job-level findings of ``ranks`` (unranked; the merge ranks them with the rest)."""
    found = [load_imbalance(ranks, wall_us)]
    found += [straggler(s, len(ranks), wall_us) for s in stragglers]
    return [f for f in found if f is not None]
