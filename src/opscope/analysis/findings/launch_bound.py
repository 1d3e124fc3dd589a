"""launch_bound: the device waits for the host to dispatch: many short bubbles, kernels shorter
than their launch call, ops whose CPU time exceeds their device time.

Contract: from the window's device idle gaps (:func:`opscope.analysis.findings._view.gaps`),
the *launch bubbles* are the gaps shorter than :data:`.idle_gaps.MIN_GAP_US` whose cause is
``host`` (the next execution's launch call had not returned when the device ran dry).  Longer
host gaps belong to :mod:`.idle_gaps`, so no gap is counted twice.  Supporting numbers
(``details``):

* ``short_kernel_fraction`` - of the kernels with a recorded launch call, the fraction that ran
  for less time than that call took on the host: the host cannot keep the device fed with
  them one launch at a time;
* ``dispatch_bound_ops`` - the ops (by name) whose CPU time (``cpu_total_us``) exceeds their
  device time (``device_total_us``) with at least :data:`MIN_OP_CALLS` calls, largest excess
  first.

Threshold: reported when the launch bubbles sum to at least :data:`MIN_WALL_SHARE` (5 %) of the
window's wall time *and* at least :data:`MIN_SHORT_FRACTION` (30 %) of the launched kernels are
shorter than their launch call.  ``time_at_stake_us`` is the bubbles' sum (what removing
per-launch host cost - CUDA graphs, fusion - could recover at most).  On a CPU-only trace there
are no launches: no finding.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from opscope.analysis.critical.fixes import Fix, FixPart
from opscope.analysis.findings._view import gaps, pct, range_evidence, view
from opscope.analysis.findings.base import Context, Finding, Rule, make_finding, share_of_wall
from opscope.analysis.findings.idle_gaps import MIN_GAP_US

MIN_WALL_SHARE = 0.05
MIN_SHORT_FRACTION = 0.30
MIN_OP_CALLS = 10
TOP_OPS = 5
EVIDENCE_GAPS = 10


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    if v.device_is_host:
        return []
    g = gaps(ctx)
    bubble = (g.cause == "host") & (g.length < MIN_GAP_US * 1e3)
    bubble_us = float(g.length[bubble].sum()) / 1e3
    if share_of_wall(ctx, bubble_us) < MIN_WALL_SHARE:
        return []
    k = np.flatnonzero(v.is_exec & v.index.kind.eq("kernel") & (v.launch >= 0))
    if len(k) == 0:
        return []
    launch_dur = v.dur[v.launch[k]]
    short = v.dur[k] < launch_dur
    frac = float(short.mean())
    if frac < MIN_SHORT_FRACTION:
        return []
    dispatch = [
        r
        for r in ctx.op_table.rows
        if r.calls >= MIN_OP_CALLS and r.device_total_us > 0 and r.cpu_total_us > r.device_total_us
    ]
    dispatch.sort(key=lambda r: -(r.cpu_total_us - r.device_total_us))
    top = dispatch[:TOP_OPS]
    sel = np.flatnonzero(bubble)
    biggest = sel[np.argsort(-g.length[sel], kind="stable")[:EVIDENCE_GAPS]]
    evidence = []
    for i in biggest.tolist():
        ev = range_evidence(int(g.start[i]), int(g.end[i]), note="device waits for a launch")
        ids = [v.event_id(int(g.next_exec[i])), v.event_id(int(g.launch[i]))]
        evidence.append(replace(ev, event_ids=ids))
    names = ", ".join(r.name for r in top[:3])
    sh = share_of_wall(ctx, bubble_us)
    fix = (
        "The host cannot launch work as fast as the device runs it. Capture the step in a CUDA "
        'graph (torch.compile(model, mode="reduce-overhead"), or torch.cuda.graphs), fuse the '
        "small ops (torch.compile), or give each launch more work (larger batch, batched ops "
        "instead of Python loops)."
    )
    if names:
        fix += f" Ops whose CPU time exceeds their device time: {names}."
    return [
        make_finding(
            ctx.wall_us,
            title=(
                f"Launch-bound: device idle {pct(sh)} of the wall in {len(sel)} short bubbles; "
                f"{pct(frac)} of kernels run shorter than their launch call"
            ),
            time_at_stake_us=bubble_us,
            evidence=evidence,
            recommendation=fix,
            # the fix: the host's time inside every bubble gone (launches keep up)
            fix=Fix((FixPart(0.0, ranges=np.column_stack([g.start[sel], g.end[sel]])),)),
            confidence="high" if frac >= 0.5 else "medium",
            details={
                "bubbles": len(sel),
                "bubble_us": bubble_us,
                "max_bubble_us_counted": MIN_GAP_US,
                "kernels_with_launch": len(k),
                "short_kernel_fraction": frac,
                "median_kernel_us": float(np.median(v.dur[k])) / 1e3,
                "median_launch_us": float(np.median(launch_dur)) / 1e3,
                "dispatch_bound_ops": [
                    {
                        "op": r.name,
                        "calls": r.calls,
                        "cpu_total_us": r.cpu_total_us,
                        "device_total_us": r.device_total_us,
                    }
                    for r in top
                ],
            },
        )
    ]


RULE = Rule(
    name="launch_bound",
    description="Device idle while the host dispatches: bubbles, short kernels, dispatch-bound ops",
    find=run,
)
