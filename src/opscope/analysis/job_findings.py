"""Findings about a job as a whole, from its rank reports (no events): what no single rank's
analysis can see.

* ``load_imbalance`` - compute spread across ranks.  Each rank's compute time (the union of
  its compute work, :mod:`opscope.analysis.comm`) against the median rank's.  Fires with at
  least two ranks when the busiest rank computes at least :data:`MIN_EXCESS` (10 %) more than
  the median *and* that excess is at least :data:`MIN_WALL_SHARE` (1 %) of the job's wall
  time *and* the excess is above the job's own noise, step by step (:func:`imbalance_evidence`:
  each step's compute, communication left out, against the median rank's in that step; the
  excess counts where it is over :data:`IMBALANCE_FACTOR` (2) times the job's noise, and must
  count at :data:`~opscope.analysis.lateness.MIN_INSTANCES` steps or more and at least half
  of them).  The noise is the larger of the median spread of the other ranks' compute in a
  step and the spread (scaled median absolute deviation) of the rank's own excess over the
  steps: a rank descheduled for 1-3 ms in some steps of 0.4 ms (seen on gloo ranks sharing
  two cores; once in three of five steps on one rank) exceeds the others' spread in those
  steps, but its excess swings by as much as it amounts to; a rank with more work exceeds
  the median by about as much every step.
  Fewer steps than that: no claim, and the distributed section says the window is too short
  (:func:`window_notes`).  At stake: the excess (at every synchronising collective the others
  wait for it).

* ``straggler`` - a rank the others wait for at the collectives
  (:func:`opscope.analysis.collectives.stragglers` decides which ranks stand out).  At stake:
  the wait it caused, averaged over the other ranks (the wall time each of them lost).

A rank's ``comm_exposed`` finding counts the time it waited inside collectives for a late
rank as exposed communication; in a job whose collectives are matched, that wait is the
straggler's finding, so :func:`discount_waits` takes it out of the rank's time at stake (and
drops the finding when what is left is under the rule's threshold).

* ``comm_bandwidth`` - collectives far below the link's peak: a collective type whose bus
  bandwidth (over the transfer times of matched instances where there are any, else over the
  records' durations, which include waits: ``confidence`` low) is under :data:`LOW_LINK_SHARE`
  (25 %) of the interconnect's peak and whose time is at least :data:`MIN_COMM_SHARE` (2 %) of
  the wall.  At stake: its time less the time at :data:`TARGET_LINK_SHARE` (70 %) of the peak.
  Median messages under :data:`SMALL_BYTES` (1 MiB) are latency-bound (advice: fewer, larger
  messages); larger ones point at the transport.  No link figure in the peaks table: no finding.

Thresholds are documented in docs/findings.md; each is tested to fire and not to fire.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.findings.finding import (
    Evidence,
    Finding,
    finding_key,
    make_finding,
    renumbered,
    severity_of,
    share_of,
)
from opscope.analysis.lateness import MAD_SCALE, MIN_INSTANCES, short_groups
from opscope.analysis.opsets import is_data_loading

if TYPE_CHECKING:
    from opscope.analysis.job import RankReport

MIN_EXCESS = 0.10
LOW_LINK_SHARE = 0.25
TARGET_LINK_SHARE = 0.70
MIN_COMM_SHARE = 0.02
SMALL_BYTES = 1 << 20
MIN_WALL_SHARE = 0.01
#: Active steps ``opscope profile --nproc N`` records by default (N > 1).
MULTI_RANK_ACTIVE = 5
#: A step's compute excess counts when over this many times the job's noise (a rank's
#: compute on a shared machine varies more than its arrivals do: control runs of four gloo
#: ranks on two cores stayed under it, and over 1x).
IMBALANCE_FACTOR = 2.0


def rerank(found: Sequence[Finding]) -> list[Finding]:
    """Findings ranked (:func:`~opscope.analysis.findings.finding.finding_key`: step savings,
    then time at stake) and numbered F1, F2, ... anew."""
    return renumbered(sorted(found, key=finding_key))


def _fmt(us: float) -> str:
    return f"{us / 1e3:.1f} ms" if us >= 1e3 else f"{us:.0f} µs"


def _compute(ranks: Sequence[RankReport]) -> dict[int, float]:
    """Each rank's compute union (the overlap's, else the timeline's compute), where > 0."""
    return {r.rank: r.timeline.work_us for r in ranks if r.timeline.work_us > 0}


def load_imbalance(ranks: Sequence[RankReport], wall_us: float) -> Finding | None:
    compute = _compute(ranks)
    if len(compute) < 2 or wall_us <= 0:
        return None
    median = statistics.median(compute.values())
    worst = max(compute, key=lambda r: (compute[r], -r))
    excess = compute[worst] - median
    if median <= 0 or excess < MIN_EXCESS * median or excess < MIN_WALL_SHARE * wall_us:
        return None
    seen = imbalance_evidence(ranks, worst)
    if not seen.pop("above_noise"):
        return None
    return make_finding(
        wall_us,
        kind="load_imbalance",
        job=True,
        title=(
            f"load imbalance: rank {worst} computes {_fmt(compute[worst])}, "
            f"{100 * excess / median:.0f} % more than the median rank ({_fmt(median)})"
        ),
        time_at_stake_us=excess,
        recommendation=(
            f"The other ranks wait for rank {worst} at every synchronising collective. Even out "
            "the work per rank: shards of equal size (drop_last, padding), sequences bucketed "
            "or packed by length, balanced expert routing (MoE capacity factor, auxiliary "
            "loss), pipeline stages of equal cost; check that rank's data loading and its "
            "device (clocks, thermal throttling, a slower link)."
        ),
        confidence="medium",
        details={
            "compute_us": {str(r): v for r, v in sorted(compute.items())},
            "median_us": median,
            "rank": worst,
            "evidence": seen,
        },
    )


def common_steps(ranks: Sequence[RankReport]) -> list[int]:
    """The steps every rank has a compute figure for."""
    sets = [set(r.step_compute_us) for r in ranks]
    return sorted(set.intersection(*sets)) if sets else []


def imbalance_evidence(ranks: Sequence[RankReport], worst: int) -> dict[str, Any]:
    """Whether ``worst``'s compute exceeds the median rank's above the job's noise, step by
    step (see the module docstring): ``steps``, ``steps_above_noise``, ``noise_us``,
    ``median_excess_us``, ``test`` and ``above_noise``."""
    steps = common_steps(ranks)
    x = {r.rank: np.asarray([r.step_compute_us[k] for k in steps]) for r in ranks}
    if len(steps) < MIN_INSTANCES or worst not in x:
        return {
            "steps": len(steps),
            "steps_above_noise": 0,
            "noise_us": None,
            "median_excess_us": None,
            "test": (
                f"{len(steps)} step(s) recorded on every rank: too few to tell an imbalance "
                f"from noise ({MIN_INSTANCES} needed)"
            ),
            "above_noise": False,
        }
    excess = x[worst] - np.median(np.vstack(list(x.values())), axis=0)
    others = np.vstack([v for k, v in x.items() if k != worst])
    own = float(np.median(np.abs(excess - np.median(excess)))) * MAD_SCALE
    noise, how = own, "the spread (scaled MAD) of the excess over the steps"
    if others.shape[0] >= 2:
        spread = float(np.median(others.max(axis=0) - others.min(axis=0)))
        if spread >= own:
            noise, how = spread, "the median spread of the other ranks' compute in a step"
    beyond = excess[(excess > IMBALANCE_FACTOR * noise) & (excess > 0)]
    return {
        "steps": len(steps),
        "steps_above_noise": len(beyond),
        "noise_us": round(noise, 3),
        "median_excess_us": round(float(np.median(beyond)), 3) if len(beyond) else 0.0,
        "test": (
            f"computes more than the median rank by over {IMBALANCE_FACTOR:g}x the job's noise "
            f"({how}: {noise:.1f} µs) in {len(beyond)} of {len(steps)} steps; a claim needs "
            f"{MIN_INSTANCES} or more and at least half"
        ),
        "above_noise": len(beyond) >= MIN_INSTANCES and 2 * len(beyond) >= len(steps),
    }


def window_notes(ranks: Sequence[RankReport], instances: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the window is too short to tell: a straggler, with fewer than
    :data:`~opscope.analysis.lateness.MIN_INSTANCES` matched collectives in a process group;
    a load imbalance, with fewer steps than that on every rank."""
    out = []
    more = (
        f"record more steps (opscope profile --nproc N records {MULTI_RANK_ACTIVE} active "
        "steps by default; --active K)"
    )
    short = short_groups(instances)
    if short:
        groups = ", ".join(f"process group {pg} has {n}" for pg, n in sorted(short.items()))
        out.append(
            f"too short a window to name a straggler: {groups} matched collective "
            f"instance(s), {MIN_INSTANCES} needed per group; {more}"
        )
    steps = common_steps(ranks)
    if len(ranks) > 1 and len(steps) < MIN_INSTANCES:
        out.append(
            f"too short a window to tell a load imbalance from noise: {len(steps)} step(s) on "
            f"every rank, {MIN_INSTANCES} needed; {more}"
        )
    return out


#: The advice of a straggler per cause (``cause_kind``), ``{rank}`` and ``{op}`` filled in.
ADVICE = {
    "data_loading": (
        "Rank {rank}'s data loading is slower than the others' ({op}): load batches ahead of "
        "the step - DataLoader(num_workers=N > 0, persistent_workers=True, "
        "prefetch_factor=2-4, pin_memory=True) - and move decoding and augmentation off the "
        "step (pre-processed shards, decode on the device); check the storage or the shard "
        "that rank reads."
    ),
    "compute": (
        "Rank {rank} computes more than the others{op_in}: even out the work per rank - batch "
        "or sequence-length imbalance (bucket or pack sequences by length, equal shards, "
        "drop_last), uneven sharding (FSDP / tensor-parallel shard sizes, MoE expert routing "
        "and capacity factor) - or check that rank's device (clocks, throttling)."
    ),
    "host_sync": (
        "Rank {rank} blocks on a host sync in {op}: take it out of the step (no .item(), "
        ".cpu(), .tolist() or printing of device tensors per step; non_blocking copies; read "
        "metrics every N steps) or move it after the step's collectives."
    ),
    "region": (
        "Rank {rank} spends longer in the program's own region {op} (a record_function "
        "range): look at what that region does on rank {rank} only (a sleep, I/O, logging or "
        "checkpointing on one rank), and move it off the step or to every rank evenly."
    ),
    "untraced": (
        "Rank {rank} is busy in time no profiled op shows (Python, garbage collection, I/O, a "
        "sleep): record it next - record_function ranges around the suspect code, "
        "with_stack=True, or py-spy dump --pid of that rank's process; for GC, gc.freeze() "
        "after setup or gc.collect() at fixed steps on every rank."
    ),
}


def worst_arrivals(
    records: Mapping[int, Sequence[Mapping[str, Any]]],
    instances: Sequence[Mapping[str, Any]],
    ranks: Sequence[int],
) -> dict[int, dict[str, Any]]:
    """For each of ``ranks``: its latest arrival, the instance where it was last and the others
    waited longest (the smallest of their waits the largest): ``name``, ``pg``, ``seq``,
    ``late_us`` (after the latest other rank), ``t0`` (the others' first arrival, ns),
    ``t1`` (its arrival, ns) and ``event_ids`` (every member's record: its op and its work)."""
    from opscope.analysis.collective_match import member_waits

    wanted = {int(r) for r in ranks}
    best: dict[int, tuple[float, int, list[tuple[int, int, float]]]] = {}
    for k, members in enumerate(member_waits(records, instances)):
        if len(members) < 2:
            continue
        zero = [m for m in members if m[2] == 0.0]
        if len(zero) != 1 or zero[0][0] not in wanted:
            continue
        late = min(w for r, _p, w in members if r != zero[0][0])
        if late > best.get(zero[0][0], (-1.0, 0, []))[0]:
            best[zero[0][0]] = (late, k, members)
    out: dict[int, dict[str, Any]] = {}
    for rank, (late, k, members) in best.items():
        recs = [records[r][pos] for r, pos, _w in members]
        mine = records[rank][next(pos for r, pos, _w in members if r == rank)]
        inst = instances[k]
        ids = [int(x) for rec in recs for x in [rec.get("event_id"), *rec.get("work_event_ids", [])]
               if x is not None]  # fmt: skip
        out[rank] = {
            "name": inst.get("name"),
            "pg": inst.get("pg"),
            "seq": inst.get("seq"),
            "late_us": round(late, 3),
            "t0": int(min(int(rec["arrival_ns"]) for rec in recs)),
            "t1": int(mine["arrival_ns"]),
            "event_ids": ids,
        }
    return out


def straggler(s: dict[str, Any], world: int, wall_us: float) -> Finding:
    """The finding of one straggler row (``stragglers`` of the distributed section): its
    advice per its ``cause_kind`` (:data:`ADVICE`)."""
    others = max(1, world - 1)
    at_stake = float(s["caused_wait_us"]) / others
    rank = int(s["rank"])
    why = f" What the trace shows: it {s['cause']}." if s.get("cause") else ""
    kind, op = s.get("cause_kind"), s.get("cause_op")
    if kind in ADVICE:
        advice = ADVICE[str(kind)].format(rank=rank, op=op, op_in=f" (in {op})" if op else "")
    else:
        advice = (
            f"Find what rank {rank} does before it reaches the collectives: compare its step's "
            "ops with another rank's (opscope diff of two ranks' traces, or report --rank): "
            "data loading, a host sync, a larger shard, longer compute, or a slower device."
        )
    seen = s.get("evidence") or {}
    worst = s.get("worst") or {}
    evidence: list[Evidence] = []
    if worst:  # where it shows most: its latest arrival, every rank's record of that collective
        evidence.append(
            Evidence(
                event_ids=list(worst.get("event_ids") or []),
                t0=worst["t0"],
                t1=worst["t1"],
                note=(
                    f"rank {rank} arrives {_fmt(float(worst['late_us']))} after the others at "
                    f"{worst.get('name')} seq {worst.get('seq')} (process group {worst.get('pg')})"
                ),
            )
        )
    return make_finding(
        wall_us,
        kind="straggler",
        job=True,
        title=(
            f"straggler: rank {rank} arrives last at {s['times_last']} collectives; the others "
            f"wait {_fmt(at_stake)} each for it"
            + (f" ({_CAUSE_WORDS[str(kind)]})" if kind in _CAUSE_WORDS else "")
        ),
        time_at_stake_us=at_stake,
        evidence=evidence,
        recommendation=advice + why + (f" Evidence: {seen['test']}." if seen else ""),
        confidence="high",
        details={**s, "world": world},
    )


_CAUSE_WORDS = {
    "data_loading": "data loading",
    "compute": "more compute",
    "host_sync": "a host sync",
    "region": "a region of the program",
    "untraced": "time no op shows",
}


def straggler_why(rank: int, ranks: Sequence[RankReport]) -> dict[str, Any]:
    """Why ``rank`` arrives late, as far as the rank reports tell: more compute, or more time
    with nothing recorded running (work outside the profiled ops: data loading, sleeps,
    Python), than the median rank, and the op it spends longer in.  ``cause`` (words, None
    when nothing stands out), ``cause_kind`` (``data_loading``, ``compute``, ``host_sync``,
    ``region``, ``untraced`` or None) and ``cause_op`` (the op, where one stands out)."""
    none: dict[str, Any] = {"cause": None, "cause_kind": None, "cause_op": None}
    by = {r.rank: r.timeline for r in ranks}
    if rank not in by or len(by) < 2:
        return none
    others = [t for r, t in by.items() if r != rank]
    mine = by[rank]

    parts = []
    kind = None
    med_work = statistics.median(t.work_us for t in others)
    if med_work > 0 and mine.work_us > 1.1 * med_work and mine.work_us - med_work > 100.0:
        parts.append(f"computes {_fmt(mine.work_us - med_work)} more than the median rank")
        kind = "compute"
    med_idle = statistics.median(float(t.device_idle_us) for t in others)
    extra_idle = float(mine.device_idle_us) - med_idle
    if extra_idle > 0.1 * max(float(mine.wall_us), 1.0):
        parts.append(
            f"is idle {_fmt(extra_idle)} longer than the median rank: work outside the profiled "
            "ops "
            "(data loading, a sleep, Python, a host sync)"
        )
        kind = kind or "untraced"
    top = _excess_op(rank, ranks)
    op = None
    if top is not None:
        text, kind, op = top
        parts.append(text)
    if not parts:
        return none
    return {"cause": "; ".join(parts), "cause_kind": kind, "cause_op": op}


def _op_time(row: Any, host: bool) -> float:
    """An op's own time: its device self time, or on a CPU trace (or an op without device
    work, like a data-loader step) its CPU self time."""
    return float(row.cpu_self_us if host or row.device_self_us <= 0 else row.device_self_us)


#: Ops that block the host until the device is done.
_SYNC_OPS = ("aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::tolist")


def op_kind(name: str) -> str:
    """What an op a straggler spends longer in suggests: ``data_loading``, ``host_sync`` (a
    synchronize call or an op that reads a device value on the host), ``compute`` (a
    framework op) or ``region`` (the program's own ``record_function`` range)."""
    low = name.lower()
    if is_data_loading(name):
        return "data_loading"
    if "synchronize" in low or name.startswith(_SYNC_OPS):
        return "host_sync"
    if "::" in name or low.startswith(("cuda", "hip", "triton", "fused")):
        return "compute"
    return "region"


_OP_WORDS = {
    "data_loading": "data loading",
    "host_sync": "a host sync",
    "compute": "longer compute (a larger shard?)",
    "region": "a region of the program (a record_function range)",
}


def _excess_op(rank: int, ranks: Sequence[RankReport]) -> tuple[str, str, str] | None:
    """The op whose own time on ``rank`` exceeds the median rank's the most, named with what
    it suggests (:func:`op_kind`), when that excess matters (at least 5 % of the rank's
    wall): ``(words, kind, op)``."""
    by = {r.rank: r for r in ranks}
    if rank not in by or len(by) < 2:
        return None
    mine = by[rank]
    host = mine.ops.device_is_host
    others = [r for r in ranks if r.rank != rank]
    own = {row.name: _op_time(row, host) for row in mine.ops.rows}
    best, excess = None, 0.0
    for name, t in own.items():
        theirs = [
            next((_op_time(x, host) for x in o.ops.rows if x.name == name), 0.0) for o in others
        ]
        extra = t - statistics.median(theirs)
        if extra > excess:
            best, excess = name, extra
    if best is None or excess < 0.05 * float(mine.timeline.wall_us):
        return None
    kind = op_kind(best)
    return (
        f"spends {_fmt(excess)} more than the median rank in {best}: {_OP_WORDS[kind]}",
        kind,
        best,
    )


def discount_waits(rank: RankReport, wait_us: float | None) -> list[Finding]:
    """``rank``'s findings, its ``comm_exposed`` one less the ``wait_us`` it spent waiting
    for other ranks inside matched collectives (see the module docstring)."""
    from opscope.analysis.findings.comm_exposed import MIN_WALL_SHARE as EXPOSED_SHARE

    if not wait_us:
        return list(rank.findings)
    wall = float(rank.timeline.wall_us)
    out = []
    for f in rank.findings:
        if f.kind != "comm_exposed":
            out.append(f)
            continue
        left = max(0.0, float(f.time_at_stake_us) - float(wait_us))
        share = share_of(wall, left)
        if share < EXPOSED_SHARE:
            continue
        saved = f.step_savings_us
        # its saving was measured on the rank alone, waits included: never above what is left
        # at stake
        capped = {} if saved is None else {"step_savings_us": min(float(saved), left)}
        out.append(
            f.updated(
                time_at_stake_us=left,
                **capped,
                share=share,
                severity=severity_of(share),
                title=f"{f.title}; {_fmt(float(wait_us))} of it waiting for other ranks",
                details={**f.details, "wait_us": float(wait_us)},
            )
        )
    return out


def comm_bandwidth(
    section: dict[str, Any], wall_us: float, records: Sequence[dict[str, Any]]
) -> list[Finding]:
    """``comm_bandwidth`` findings of a ``distributed`` section (see the module docstring)."""
    link = section.get("interconnect")
    if not link or wall_us <= 0:
        return []
    out = []
    for g in section.get("by_collective") or []:
        matched = g.get("transfer_busbw_gbps") is not None
        bw = g.get("transfer_busbw_gbps") if matched else g.get("busbw_gbps")
        factor = None
        if g.get("algbw_gbps") and g.get("busbw_gbps"):
            factor = float(g["busbw_gbps"]) / float(g["algbw_gbps"])
        if bw is None or factor is None or not g.get("bytes"):
            continue
        ranks = max(1, len(section.get("ranks") or [1]))
        time_us = float(g["transfer_us"]) if matched else float(g["dur_us"]) / ranks
        share = float(bw) / float(link["gbs"])
        if share >= LOW_LINK_SHARE or time_us < MIN_COMM_SHARE * wall_us:
            continue
        per_call = float(g["bytes"]) / max(1, int(g["count"]))
        bus_bytes = (float(g["bytes"]) / ranks) * factor
        at_stake = max(0.0, time_us - bus_bytes / (TARGET_LINK_SHARE * float(link["gbs"]) * 1e3))
        sizes = [int(r["bytes"]) for r in records if r.get("name") == g["name"] and r.get("bytes")]
        median_bytes = statistics.median(sizes) if sizes else per_call
        small = median_bytes < SMALL_BYTES
        advice = (
            "The messages are small: their cost is per-call latency, not bandwidth. Send fewer, "
            "larger ones - bucket or coalesce tensors (larger DDP bucket_cap_mb, FSDP's larger "
            "units, torch.distributed's coalescing manager)."
            if small
            else "Large messages move far below the link's peak: check the transport NCCL/RCCL "
            "chose (NCCL_DEBUG=INFO: P2P/NVLink vs SHM or NET), the links themselves (nvidia-smi "
            "topo -m / nvlink -s; rocm-smi --showtopo), and compute kernels competing for SMs "
            "while the collective runs (NCCL_MIN_NCHANNELS, stream priorities)."
        )
        pct_share = f"{100 * share:.0f} %" if share >= 0.01 else f"{100 * share:.1f} %"
        # the count is of this process group's calls on every rank: said where that is not
        # simply the op table's calls of the collective on one rank
        groups = {x.get("pg") for x in section.get("by_collective") or [] if x["name"] == g["name"]}
        counted = f"{g['count']} calls" + (
            f" in process group {g['pg']}" if len(groups) > 1 else ""
        )
        counted += f" over {ranks} ranks" if ranks > 1 else ""
        out.append(
            make_finding(
                wall_us,
                kind="comm_bandwidth",
                job=True,
                title=(
                    f"{g['name']} at {float(bw):.1f} GB/s bus bandwidth, {pct_share} of "
                    f"{link['name']}'s {float(link['gbs']):.0f} GB/s ({counted}, median "
                    f"{median_bytes / 1e6:.2f} MB)"
                ),
                time_at_stake_us=at_stake,
                recommendation=advice,
                confidence="medium" if matched else "low",
                details={
                    "collective": g["name"],
                    "pg": g["pg"],
                    "busbw_gbps": float(bw),
                    "link_gbps": float(link["gbs"]),
                    "link_share": share,
                    "time_us": time_us,
                    "median_bytes": median_bytes,
                    "small_messages": small,
                    "from_matched_transfers": matched,
                    "link_source": link.get("source"),
                },
            )
        )
    return out


def job_findings(
    ranks: Sequence[RankReport],
    wall_us: float,
    stragglers: Sequence[dict[str, Any]] = (),
    section: dict[str, Any] | None = None,
) -> list[Finding]:
    """The job-level findings of ``ranks`` (unranked; the merge ranks them with the rest)."""
    found: list[Finding | None] = [load_imbalance(ranks, wall_us)]
    if section:
        found += comm_bandwidth(section, wall_us, [c for r in ranks for c in r.collectives])
    found += [straggler(s, len(ranks), wall_us) for s in stragglers]
    return [f for f in found if f is not None]
