"""Is a rank's lateness at the collectives above the noise the job itself shows?

A rank that arrives last at a collective makes the others wait; on a busy machine every rank
is last now and then.  A straggler is named only with evidence above that noise
(:func:`evidence`), from the matched instances alone:

* a rank's *lateness* at an instance is how much later it arrived than the latest of the
  other members (the smallest of the others' waits less its own: negative when another
  arrived after it);
* the job's *noise*, for that rank, is the larger of two figures: the median over the
  instances of the spread of the other members' arrivals (the largest of their waits less
  the smallest: how far apart ranks arrive when this rank is left out), and the median
  lateness of the other ranks where one of them was the one last (how late a rank is by
  chance: on a shared machine the ranks are last in turn, each by about as much; in control
  runs of four gloo ranks on two cores a rank was last at 4 of 5 collectives by 1.5 ms with
  the others 1.4 ms apart, while another rank, last at the fifth, was 1.6 ms late).  Where
  the instances have one other member only (two ranks), the others' spread is nothing and
  the second figure is the noise; where, besides, this rank is always last, the noise is
  the scaled median absolute deviation of its own lateness;
* the rank is *late beyond noise* at an instance when its lateness is over
  :data:`NOISE_FACTOR` times the noise.

The claim holds when the rank is late beyond noise at :data:`MIN_INSTANCES` instances or
more, and holds half or more of all the lateness beyond noise, by instances or by time (it,
not chance, is the late one: in a step of several collectives only its first shows the
lateness, the others are late by turns; counted by instances alone, a rank 80 ms late before
each step's first collective lost its claim to other ranks late by a hair over the noise at
the later collectives, hence the time too).  A
process group with fewer than :data:`MIN_INSTANCES` instances is too short a window to tell
(:func:`short_groups`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from opscope.analysis.instance_table import Instances, full_waits

#: Fewest instances (per process group) a straggler claim rests on.
MIN_INSTANCES = 3
#: Lateness counts when over this many times the job's noise: above it.  (Six control runs
#: of four gloo ranks on two shared cores: at most 2 of 5 collectives a rank was late beyond
#: it; seven runs with a rank 15 ms slow per step, one of them on a loaded machine whose
#: noise was 7.4 ms: 3 to 5 of 5.  At 2x the loaded run named no straggler.)
NOISE_FACTOR = 1.0
#: The median absolute deviation's scale to a normal standard deviation.
MAD_SCALE = 1.4826


def _matrices(instances: Sequence[Mapping[str, Any]]) -> Iterator[tuple[list[int], np.ndarray]]:
    """The instances' waits as ``(member ranks, matrix: one row per instance, one column per
    rank)``, instances of the same members together."""
    if isinstance(instances, Instances):
        for block in instances.blocks:
            rows, m = full_waits(block)
            if len(rows):
                yield list(block.group_ranks), m
            for g, ranks in enumerate(block.partial):
                if ranks is not None and len(ranks) >= 2:
                    a, b = int(block.starts[g]), int(block.starts[g + 1])
                    yield list(ranks), block.wait_us[a:b][None, :]
        return
    by_keys: dict[tuple[int, ...], list[list[float]]] = {}
    for inst in instances:
        waits = inst.get("wait_us") or {}
        if len(waits) >= 2:
            keys = tuple(int(k) for k in waits)
            by_keys.setdefault(keys, []).append([float(v or 0.0) for v in waits.values()])
    for keys, rows_ in by_keys.items():
        yield list(keys), np.asarray(rows_, dtype=np.float64)


def _by_rank(
    instances: Sequence[Mapping[str, Any]],
) -> tuple[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]]:
    """Each member rank's lateness at each instance it is a member of, the other members'
    arrival spread there (NaN where there is one other member only), and the lateness of
    the other member that was last there (NaN where this rank was), as arrays per block of
    instances of the same members."""
    late: dict[int, list[np.ndarray]] = {}
    spread: dict[int, list[np.ndarray]] = {}
    others_late: dict[int, list[np.ndarray]] = {}
    for ranks, m in _matrices(instances):
        k = m.shape[1]
        srt = np.sort(m, axis=1)
        lo, lo2, hi, hi2 = srt[:, 0], srt[:, 1], srt[:, -1], srt[:, -2]
        # the last rank waits least: its lateness is the next-smallest wait less its own
        last_late = lo2 - lo
        for j, r in enumerate(ranks):
            col = m[:, j]
            min_others = np.where(col == lo, lo2, lo)
            max_others = np.where(col == hi, hi2, hi)
            late.setdefault(r, []).append(min_others - col)
            gap = max_others - min_others if k >= 3 else np.full(len(m), np.nan)
            spread.setdefault(r, []).append(gap)
            other = (col != lo) & (last_late > 0)  # another rank was last, alone
            others_late.setdefault(r, []).append(np.where(other, last_late, np.nan))
    return late, spread, others_late


def _noise(late: np.ndarray, spread: np.ndarray, others_late: np.ndarray) -> tuple[float, str]:
    """The job's noise for a rank of this lateness, others' spread and others' lateness
    when last, and how it was taken."""
    known = spread[~np.isnan(spread)]
    behind = others_late[~np.isnan(others_late)]
    when_last = float(np.median(behind)) if len(behind) else None
    if len(known):
        noise = float(np.median(known))
        if when_last is not None and when_last > noise:
            return when_last, "the other ranks' median lateness when one was last"
        return noise, "the median spread of the other ranks' arrivals"
    if when_last is not None:  # two ranks
        return when_last, "the other rank's median lateness when it was last"
    mad = float(np.median(np.abs(late - np.median(late)))) * MAD_SCALE if len(late) else 0.0
    return mad, "the spread (scaled MAD) of this rank's own lateness"


def evidence(instances: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per member rank, whether it is late beyond the job's noise (see the module
    docstring): ``instances`` (those it is a member of), ``times_last``, ``late_instances``
    (late beyond noise), ``noise_us``, ``median_late_us`` (its median lateness where late
    beyond noise), ``test`` (the test, in words) and ``above_noise``."""
    late_of, spread_of, others_of = _by_rank(instances)
    rows: dict[int, tuple[np.ndarray, float, str, int]] = {}
    for r, parts in late_of.items():
        late = np.concatenate(parts)
        noise, how = _noise(late, np.concatenate(spread_of[r]), np.concatenate(others_of[r]))
        beyond = late[(late > NOISE_FACTOR * noise) & (late > 0)]
        rows[r] = (beyond, noise, how, len(late))
    # an instance has one rank late beyond noise at most (the one last, alone)
    everyone = sum(len(b) for b, _n, _h, _c in rows.values())
    everyone_us = float(sum(b.sum() for b, _n, _h, _c in rows.values()))
    out: dict[int, dict[str, Any]] = {}
    for r, (beyond, noise, how, count) in rows.items():
        times_last = int((np.concatenate(late_of[r]) > 0).sum())
        out[r] = {
            "instances": count,
            "times_last": times_last,
            "late_instances": len(beyond),
            "noise_us": round(noise, 3),
            "median_late_us": round(float(np.median(beyond)), 3) if len(beyond) else 0.0,
            "test": (
                f"late by more than {NOISE_FACTOR:g}x the job's noise ({how}: {noise:.1f} µs) "
                f"at {len(beyond)} of {count} collectives ({float(beyond.sum()):.1f} µs), "
                f"{everyone} late beyond noise in all ({everyone_us:.1f} µs); a claim needs "
                f"{MIN_INSTANCES} or more and at least half of all, by count or by time"
            ),
            "above_noise": len(beyond) >= MIN_INSTANCES
            and (2 * len(beyond) >= everyone or 2 * float(beyond.sum()) >= everyone_us),
        }
    return out


def short_groups(instances: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """``{process group: matched instances}`` of the groups of two ranks or more with fewer
    than :data:`MIN_INSTANCES` instances: too short a window to name a straggler in."""
    counts: dict[str, int] = {}
    if isinstance(instances, Instances):
        for block in instances.blocks:
            if len(block.group_ranks) >= 2:
                counts[block.pg] = counts.get(block.pg, 0) + len(block)
    else:
        for inst in instances:
            if len(inst.get("wait_us") or {}) >= 2:
                pg = str(inst.get("pg"))
                counts[pg] = counts.get(pg, 0) + 1
    return {pg: n for pg, n in counts.items() if n < MIN_INSTANCES}


__all__ = ["MIN_INSTANCES", "NOISE_FACTOR", "evidence", "short_groups"]
