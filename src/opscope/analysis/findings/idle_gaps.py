"""idle_gaps: long stretches where the device did nothing, and what it was waiting for.

Contract: from the window's device idle gaps (:func:`opscope.analysis.findings._view.gaps`:
per device, all its streams merged, between its first and last execution in the window), the
gaps of at least :data:`MIN_GAP_US` are summed per cause:

* ``host`` - the device waited for the host to submit the next work (the launch call of the
  execution that ends the gap had not returned when the device went idle).  The finding names
  what the host was doing meanwhile: the top-level ops of the launching thread that overlap the
  gap (a data loader's ``__next__``, an optimizer step, Python between ops).
* ``kernel-to-kernel`` - work was already queued: the device waited on a dependency (event or
  stream wait, another device, a copy) between two executions.
* ``other`` - the next execution has no launch in the trace (collectives, graph replays).

Shorter gaps are the launch-overhead bubbles of :mod:`.launch_bound`; together the two rules
never count a gap twice.  On a CPU-only trace the device is the host itself: no finding.

Threshold: a cause is reported when its gaps of at least :data:`MIN_GAP_US` (100 µs) sum to at
least :data:`MIN_WALL_SHARE` (2 %) of the window's wall time.  ``time_at_stake_us`` is that
sum: the device could have run during all of it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from opscope.analysis.critical.fixes import Fix, FixPart
from opscope.analysis.findings._view import (
    EventView,
    Gaps,
    fmt_us,
    gaps,
    pct,
    range_evidence,
    top_level_ops,
    view,
)
from opscope.analysis.findings.base import (
    Context,
    Evidence,
    Finding,
    Rule,
    make_finding,
    share_of_wall,
)
from opscope.analysis.opsets import is_data_loading
from opscope.trace.arrays import unique_ints

MIN_GAP_US = 100.0
MIN_WALL_SHARE = 0.02
EVIDENCE_GAPS = 10
HOST_NAMES = 5

_ADVICE = {
    "host": (
        "The device waits for the host. Find what the host does in these gaps (see details."
        "host_activity): a data loader -> DataLoader(num_workers>0, pin_memory=True, "
        "persistent_workers=True) and prefetching; Python work per step -> move it off the "
        "critical path or batch it; many tiny ops -> torch.compile / CUDA graphs."
    ),
    "kernel-to-kernel": (
        "Work was queued but the device sat idle between executions: look at the stream and "
        "event waits ending these gaps (cross-stream dependencies, copies on another engine, "
        "collectives of other ranks) and overlap them, or remove the dependency."
    ),
    "other": (
        "The executions after these gaps have no launch call in the trace (collectives, graph "
        "replays, another process): check what they wait for, e.g. a slower rank."
    ),
}


def run(ctx: Context) -> list[Finding]:
    g = gaps(ctx)
    if len(g.start) == 0:
        return []
    long = g.length >= MIN_GAP_US * 1e3
    out: list[Finding] = []
    for cause in ("host", "kernel-to-kernel", "other"):
        sel = np.flatnonzero(long & (g.cause == cause))
        total_us = float(g.length[sel].sum()) / 1e3
        if len(sel) == 0 or share_of_wall(ctx, total_us) < MIN_WALL_SHARE:
            continue
        out.append(_finding(ctx, g, sel, cause, total_us))
    return out


def _finding(ctx: Context, g: Gaps, sel: np.ndarray, cause: str, total_us: float) -> Finding:
    v = view(ctx)
    biggest = sel[np.argsort(-g.length[sel], kind="stable")]
    evidence: list[Evidence] = []
    for i in biggest[:EVIDENCE_GAPS].tolist():
        nxt = int(g.next_exec[i])
        ev = range_evidence(
            int(g.start[i]),
            int(g.end[i]),
            note=f"{fmt_us(g.length[i] / 1e3)} idle before {v.name_of(nxt)}",
        )
        ids = [v.event_id(nxt)] + ([v.event_id(int(g.launch[i]))] if g.launch[i] >= 0 else [])
        evidence.append(replace(ev, event_ids=ids))
    details: dict[str, object] = {
        "cause": cause,
        "gaps": len(sel),
        "idle_us": total_us,
        "mean_gap_us": total_us / len(sel),
        "max_gap_us": float(g.length[biggest[0]]) / 1e3,
        "min_gap_us_counted": MIN_GAP_US,
    }
    title = (
        f"Device idle {pct(share_of_wall(ctx, total_us))} of the wall in {len(sel)} gaps ≥ "
        f"{fmt_us(MIN_GAP_US)}"
    )
    advice = _ADVICE[cause]
    if ctx.trace.device.kind not in ("cuda", "rocm"):  # CUDA graphs are CUDA's (and HIP's)
        advice = advice.replace("torch.compile / CUDA graphs", "torch.compile")
    if cause == "host":
        ranked = _host_activity(v, g, sel)[:HOST_NAMES]
        details["host_activity"] = {nm: ns / 1e3 for nm, ns in ranked}
        title += " waiting for the host"
        if ranked:
            title += f" (mostly in {ranked[0][0]})"
            if is_data_loading(ranked[0][0]):
                advice = (
                    f"The host spends the gaps in {ranked[0][0]}: load data in background "
                    "workers - DataLoader(num_workers=4 or more, pin_memory=True, "
                    "persistent_workers=True, prefetch_factor=2) - and copy batches with "
                    ".to(device, non_blocking=True)."
                )
    elif cause == "kernel-to-kernel":
        title += " with work already queued"
    else:
        title += " before unlaunched work"
    # the fix: what held the device up inside every gap gone (the host's work for a host
    # gap, the device's wait for a dependency for the others)
    spans = np.column_stack([g.start[sel], g.end[sel]])
    waits = None if cause == "host" else ("kernel_kernel_gap", "untraced", "wait_for_peer")
    return make_finding(
        ctx.wall_us,
        title=title,
        time_at_stake_us=total_us,
        evidence=evidence,
        recommendation=advice,
        fix=Fix((FixPart(0.0, ranges=spans, labels=waits),)),
        confidence="high" if cause == "host" else "medium",
        details=details,
    )


def _host_activity(v: EventView, g: Gaps, sel: np.ndarray) -> list[tuple[str, int]]:
    """What the launching threads did during the gaps ``sel``: the names of their top-level
    ops with the time they overlap the gaps, largest first (ties: first met first, gaps in
    ``sel`` order, ops in start order)."""
    tops = top_level_ops(v)
    lr = g.launch[sel]
    names = v.index.name.text_codes()
    pair_name: list[np.ndarray] = []
    pair_ns: list[np.ndarray] = []
    pair_order: list[np.ndarray] = []
    thread = v.index.thread[lr]
    for t in unique_ints(thread).tolist():
        mine = np.flatnonzero(thread == t)
        r0 = int(lr[mine[0]])
        rows = tops.get((int(v.rank[r0]), v.index.pid[r0], v.index.tid[r0]))
        if rows is None or not len(rows):
            continue
        lo, hi = g.start[sel[mine]], g.end[sel[mine]]
        ends = np.maximum.accumulate(v.end[rows])
        i0 = np.searchsorted(ends, lo, side="right")
        i1 = np.maximum(np.searchsorted(v.start[rows], hi, side="left"), i0)
        count = i1 - i0
        gap = np.repeat(np.arange(len(mine)), count)
        j = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + i0[gap]
        r = rows[j]
        ns = np.minimum(v.end[r], hi[gap]) - np.maximum(v.start[r], lo[gap])
        keep = (ns > 0) & (hi[gap] > lo[gap])
        pair_name.append(names[r[keep]])
        pair_ns.append(ns[keep])
        pair_order.append(mine[gap[keep]] * (v.n + 1) + j[keep])
    if not pair_name:
        return []
    name = np.concatenate(pair_name)
    ns = np.concatenate(pair_ns)
    order = np.concatenate(pair_order)
    uniq, inverse = np.unique(name, return_inverse=True)
    inverse = inverse.reshape(-1)
    total = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(total, inverse, ns)
    first = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, inverse, order)
    ranked = np.lexsort((first, -total))
    values = v.index.name.values
    return [(str(values[uniq[i]]) if uniq[i] >= 0 else "", int(total[i])) for i in ranked.tolist()]


RULE = Rule(
    name="idle_gaps",
    description="Device idle gaps above a threshold, attributed to host wait or dependencies",
    find=run,
)
