"""graph_host_gaps: the device waits for the host between CUDA/HIP graph replays.

A graph replay hands the device a whole step in one launch; what the host does between two
replays - a serving loop's scheduling, sampling on the host, preparing the next inputs,
Python - is time the device sits idle unless it overlaps with the replay before.

Contract: the window's graph replays (:func:`opscope.analysis.graph_replays.replays_of`: each
graph launch and its device work), in device order on each device; between the end of one
replay's work and the start of the next's, the device idle gaps caused by the host
(:func:`opscope.analysis.findings._view.gaps`, cause ``host``: the next work's launch had not
returned) are summed.  ``details``: the gaps, their mean, the replays, the mean launch call
and what the launching thread ran meanwhile (its top-level ops overlapping the gaps).

Threshold: at least :data:`MIN_GAPS` such gaps summing to at least :data:`MIN_WALL_SHARE`
(5 %) of the window's wall time.  ``time_at_stake_us`` is the sum: the device could have run
during all of it.  The same gaps, where they last 100 µs or more, are also among
:mod:`.idle_gaps`' host gaps: this rule says they fall between graph replays.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from opscope.analysis.findings._view import (
    EventView,
    fmt_us,
    gaps,
    host_activity,
    pct,
    range_evidence,
    top_level_ops,
    view,
)
from opscope.analysis.findings.base import Context, Finding, Rule, make_finding, share_of_wall
from opscope.analysis.graph_replays import replays_of
from opscope.trace.graphs.replays import Replay

MIN_GAPS = 2
MIN_WALL_SHARE = 0.05
EVIDENCE_GAPS = 10
TOP_HOST = 5


def _between(v: EventView, replays: list[Replay]) -> list[tuple[int, int, Replay]]:
    """(end of a replay's work, start of the next one's, that next replay) on each device."""
    out: list[tuple[int, int, Replay]] = []
    by_device: dict[tuple[int, str], list[tuple[int, int, Replay]]] = {}
    for r in replays:
        first = int(r.work[0])
        key = (int(v.rank[first]), v.index.pid[first])
        lo, hi = int(v.start[r.work].min()), int(v.end[r.work].max())
        by_device.setdefault(key, []).append((lo, hi, r))
    for rows in by_device.values():
        rows.sort(key=lambda x: (x[0], x[2].launch))
        for (_, end, _), (start, _, nxt) in itertools.pairwise(rows):
            if start > end:
                out.append((end, start, nxt))
    return out


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    if v.device_is_host:
        return []
    replays = [r for r in replays_of(v.index) if v.in_window[r.launch]]
    if len(replays) < 2:
        return []
    g = gaps(ctx)
    host = np.flatnonzero(g.cause == "host")
    gs, ge = g.start[host], g.end[host]
    order = np.argsort(gs, kind="stable")
    gs, ge = gs[order], ge[order]
    found: list[tuple[int, int, int, Replay, list[tuple[int, int]]]] = []
    for lo, hi, nxt in _between(v, replays):
        i = int(np.searchsorted(ge, lo, side="right"))
        j = int(np.searchsorted(gs, hi, side="left"))
        if j <= i:
            continue
        a, b = np.maximum(gs[i:j], lo), np.minimum(ge[i:j], hi)
        keep = b > a
        parts = list(zip(a[keep].tolist(), b[keep].tolist(), strict=True))
        ns = int((b[keep] - a[keep]).sum())
        if ns > 0:
            found.append((ns, lo, hi, nxt, parts))
    total_us = sum(f[0] for f in found) / 1e3
    if len(found) < MIN_GAPS or share_of_wall(ctx, total_us) < MIN_WALL_SHARE:
        return []
    found.sort(key=lambda f: -f[0])
    tops = top_level_ops(v)
    doing: dict[str, int] = {}
    for _ns, _lo, _hi, nxt, parts in found:
        r = nxt.launch
        rows = tops.get((int(v.rank[r]), v.index.pid[r], v.index.tid[r]))
        if rows is None:
            continue
        for a, b in parts:
            for name, ns in host_activity(v, rows, a, b).items():
                doing[name] = doing.get(name, 0) + ns
    busy = sorted(doing.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_HOST]
    launch_us = float(np.mean([v.dur[r.launch] for r in replays])) / 1e3
    evidence = []
    for _ns, lo, hi, nxt, _parts in found[:EVIDENCE_GAPS]:
        ev = range_evidence(lo, hi, note="device idle between graph replays")
        evidence.append(replace(ev, event_ids=[v.event_id(nxt.launch)]))
    sh = share_of_wall(ctx, total_us)
    mean_us = total_us / len(found)
    names = ", ".join(n for n, _ in busy[:3])
    fix = (
        "Between graph replays the device waits for the host: the loop's own work (scheduling, "
        "sampling on the host, preparing the next inputs, Python) runs while nothing is queued. "
        "Overlap it with the replay before (vLLM's --async-scheduling, SGLang's overlap "
        "scheduler, or a second stream for the host-side preparation), move sampling onto "
        "the device or into the graph, capture more of the step in one graph (FULL rather "
        "than PIECEWISE), or give each replay more work (a larger batch)."
    )
    if names:
        fix += f" The launching thread meanwhile ran: {names}."
    return [
        make_finding(
            ctx.wall_us,
            title=(
                f"Device idle {pct(sh)} of the time between graph replays, waiting for the "
                f"host ({len(found)} gaps, {fmt_us(mean_us)} each on average)"
            ),
            time_at_stake_us=total_us,
            evidence=evidence,
            recommendation=fix,
            confidence="high" if len(found) >= 5 else "medium",
            details={
                "gaps": len(found),
                "idle_us": total_us,
                "mean_gap_us": mean_us,
                "replays": len(replays),
                "mean_launch_us": launch_us,
                "host_ops": [{"op": n, "overlap_us": ns / 1e3} for n, ns in busy],
            },
        )
    ]


RULE = Rule(
    name="graph_host_gaps",
    description="Device idle between CUDA/HIP graph replays while the host prepares the next",
    find=run,
)
