"""comm_exposed: communication that no compute hides - the ranks wait for transfers.

Contract: from the window's communication and compute intervals (:mod:`opscope.analysis.comm`:
device collective kernels against the other kernels; on a CPU trace a backend's ``gloo:*``
work against the computing ops on the other threads), the exposed communication is the part of
the communication union that the compute union does not cover.  Reported when it is at least
:data:`MIN_WALL_SHARE` (3 %) of the window's wall time; ``time_at_stake_us`` is the exposed
time (what a perfect overlap could hide at most).  Evidence: the collectives with the most
exposed time.  The advice follows what the trace shows (``details['pattern']``):

* ``ddp`` - DDP's reducer (``DistributedDataParallel``, ``Reducer``): all-reduce buckets that
  start only after backward; tune ``bucket_cap_mb``, ``gradient_as_bucket_view``, or
  accumulate gradients under ``no_sync()``;
* ``fsdp`` - FSDP's all-gathers / reduce-scatters: enable forward/backward prefetch, limit
  all-gathers in flight, consider a larger sharding unit;
* ``small_messages`` - most collectives are short (median under :data:`SMALL_US`): their cost
  is latency; fewer, larger messages (bucketing, coalescing, ``all_reduce_coalesced``);
* ``serial`` - otherwise: issue collectives asynchronously (``async_op=True``) and wait late,
  or overlap them with independent compute.
"""

from __future__ import annotations

import numpy as np

from opscope.analysis.comm import host_comm_rows
from opscope.analysis.critical.fixes import Fix, FixPart
from opscope.analysis.findings._view import fmt_us, pct, view
from opscope.analysis.findings.base import (
    Context,
    Evidence,
    Finding,
    Rule,
    make_finding,
    share_of_wall,
)
from opscope.analysis.intervals import covered_ns, merge_intervals

MIN_WALL_SHARE = 0.03
SMALL_US = 50.0
EVIDENCE = 8

ADVICE = {
    "ddp": (
        "DDP's gradient all-reduces are not hidden behind backward. Start them earlier and in "
        "fewer buckets: tune DistributedDataParallel(bucket_cap_mb=...) (larger buckets: fewer "
        "launches; smaller: earlier start), set gradient_as_bucket_view=True, and with "
        "gradient accumulation skip the all-reduce of the inner steps with model.no_sync()."
    ),
    "fsdp": (
        "FSDP's all-gathers / reduce-scatters wait on the critical path. Turn on prefetching "
        "(backward_prefetch=BackwardPrefetch.BACKWARD_PRE, forward_prefetch=True; FSDP2: "
        "reshard_after_forward / set_modules_to_forward_prefetch), and wrap larger units so "
        "each collective has compute to hide behind."
    ),
    "small_messages": (
        "Most collectives are short: their cost is per-message latency, not bandwidth. Send "
        "fewer, larger messages: bucket or coalesce tensors (torch.distributed's coalescing "
        "manager, flattening, larger DDP buckets)."
    ),
    "serial": (
        "Communication runs while nothing computes. Issue collectives asynchronously "
        "(dist.all_reduce(..., async_op=True)) and wait for them as late as possible, or "
        "overlap them with independent compute (another micro-batch, the next layer)."
    ),
}


def _pattern(ctx: Context, comm_dur_us: np.ndarray) -> str:
    names = [r.name for r in ctx.op_table.rows]
    if any("FullyShardedDataParallel" in n or "FSDP" in n for n in names):
        return "fsdp"
    if any("DistributedDataParallel" in n or "Reducer" in n for n in names):
        return "ddp"
    if len(comm_dur_us) and float(np.median(comm_dur_us)) < SMALL_US:
        return "small_messages"
    return "serial"


def run(ctx: Context) -> list[Finding]:
    t = ctx.timeline
    if not t.comm_us or t.exposed_comm_us is None:
        return []
    exposed_us = float(t.exposed_comm_us)
    if share_of_wall(ctx, exposed_us) < MIN_WALL_SHARE:
        return []
    v = view(ctx)
    index = v.index
    rows = np.flatnonzero(v.in_window)
    if v.device_is_host:
        comm, compute = host_comm_rows(index, rows)
    else:
        work = rows[v.is_exec[rows]]
        is_comm = index.kind.eq("comm")[work]
        comm, compute = work[is_comm], work[~is_comm & ~index.kind.isin(("memcpy", "memset"))[work]]
    start, end = index.start, index.end
    hidden = covered_ns(start[comm], end[comm], start[compute], end[compute])
    runs, _ = merge_intervals(start[comm], end[comm])
    exposed = (end[comm] - start[comm]) - hidden
    order = np.argsort(-exposed, kind="stable")[:EVIDENCE]
    evidence = [
        Evidence(
            event_ids=[v.event_id(int(comm[i]))],
            start_ns=int(start[comm[i]]),
            end_ns=int(end[comm[i]]),
            note=f"{fmt_us(float(exposed[i]) / 1e3)} of it exposed",
        )
        for i in order.tolist()
        if exposed[i] > 0
    ]
    dur_us = (end[comm] - start[comm]) / 1e3
    pattern = _pattern(ctx, dur_us)
    title = (
        f"exposed communication: {fmt_us(exposed_us)} of {fmt_us(float(t.comm_us))} "
        f"({pct(1.0 - (t.overlap_share or 0.0))}) not hidden by compute"
    )
    return [
        make_finding(
            ctx.wall_us,
            title=title,
            time_at_stake_us=exposed_us,
            evidence=evidence,
            recommendation=ADVICE[pattern],
            confidence="high" if not v.device_is_host else "medium",
            # the fix: the transfers hidden (their time off the path; a wait for a peer is
            # the straggler's to save, not this finding's)
            fix=Fix((FixPart(0.0, rows=comm, labels=("gpu_comm",)),)),
            details={
                "comm_us": float(t.comm_us),
                "exposed_comm_us": exposed_us,
                "overlap_share": t.overlap_share,
                "collectives": len(comm),
                "comm_runs": len(runs),
                "median_collective_us": float(np.median(dur_us)) if len(dur_us) else None,
                "pattern": pattern,
            },
        )
    ]


RULE = Rule(
    name="comm_exposed",
    description="Communication not hidden behind compute (exposed collectives)",
    find=run,
)
