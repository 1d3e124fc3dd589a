"""The ``distributed`` section of a report: ranks, communication per rank, collectives.

It appears when the job has more than one rank or any communication, and is built from rank
reports alone (no events), so a job merge and a single rank give it the same way:

* ``world_size``, ``ranks``, ``rank_source`` (``distributedInfo`` | ``filename`` | ``order``:
  how the ranks were told apart; ``rank_sources`` per rank) and ``missing_ranks`` (ranks of
  the world size with no trace);
* ``clock``: per-rank clock offsets estimated from the ends of the matched collectives
  (:mod:`opscope.analysis.clocks`), their residual, and whether they were applied to the
  cross-rank figures (only where the data support it); one rank: ``method`` "none";
* ``per_rank``: each rank's wall, compute (the compute union the overlap is measured against:
  on a CPU trace the computing ops, not the busy thread's time), communication, exposed
  communication, overlap share and device idle time (:mod:`opscope.analysis.comm`), and
  ``wait_us``, its time waiting for
  the others inside matched collectives (None until instances are matched);
* ``by_collective``: per collective type and process group, count, bytes, duration and
  bandwidth: algorithmic ``algbw = bytes / duration`` and bus ``busbw = algbw x factor``
  (:data:`BUS_FACTORS`, the factors NCCL's performance notes define: all-reduce 2(n-1)/n;
  all-gather, reduce-scatter, all-to-all (n-1)/n; broadcast, reduce, send/recv 1);
  With matched instances, each type also gets ``transfer_us`` (the instances' transfer times,
  waits left out) and ``transfer_busbw_gbps``; ``link_share`` is the bus bandwidth (the
  transfer's where known) over the device's link peak (``interconnect``, from the peaks table:
  None where it does not say);
* ``instances`` and ``stragglers``: collectives matched across ranks (empty until matched).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opscope.analysis.instance_table import Instances, transfer_sums, wait_by_rank

if TYPE_CHECKING:
    from opscope.analysis.job import RankReport

RANK_SOURCES = {"distributedInfo": "distributedInfo", "file name": "filename", "order": "order"}


def _ring(n: int) -> float:
    return (n - 1) / n


BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": _ring,
    "reduce_scatter": _ring,
    "all_to_all": _ring,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}


def bus_factor(name: str, group_size: int | None) -> float | None:
    """The bus bandwidth factor of a collective over ``group_size`` ranks (None: unknown)."""
    f = BUS_FACTORS.get(name)
    if f is None or not group_size or group_size < 1:
        return None
    return f(group_size)


def _source_of(origin: str) -> str:
    return RANK_SOURCES.get(origin, "order")


def has_distributed(ranks: Sequence[RankReport]) -> bool:
    """Whether a job of these ranks gets a ``distributed`` section."""
    return len(ranks) > 1 or any(r.timeline.comm_us > 0 for r in ranks)


def by_collective(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Collective records (every rank's) aggregated per (type, process group), most time
    first.  Bandwidth over the records whose size is known."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        key = (str(r.get("name")), str(r.get("pg", "0")))
        g = groups.setdefault(
            key,
            {
                "name": key[0],
                "pg": key[1],
                "count": 0,
                "bytes": 0,
                "dur_us": 0.0,
                "_sized_us": 0.0,
                "_size": r.get("pg_size"),
            },
        )
        g["count"] += 1
        dur = float(r.get("dur_us") or 0.0)
        g["dur_us"] += dur
        if r.get("bytes") is not None:
            g["bytes"] += int(r["bytes"])
            g["_sized_us"] += dur
        if g["_size"] is None and r.get("pg_size"):
            g["_size"] = r["pg_size"]
    out = []
    for g in groups.values():
        sized_us, size = g.pop("_sized_us"), g.pop("_size")
        algbw = g["bytes"] / (sized_us * 1e3) if sized_us > 0 and g["bytes"] else None
        factor = bus_factor(g["name"], size)
        g["algbw_gbps"] = algbw
        g["busbw_gbps"] = algbw * factor if algbw is not None and factor is not None else None
        g["group_size"] = size
        out.append(g)
    out.sort(key=lambda g: (-g["dur_us"], g["name"], g["pg"]))
    return out


def _link(ranks: Sequence[RankReport]) -> dict[str, Any] | None:
    """The interconnect of the job's devices, when the peaks table knows it."""
    from opscope.analysis.peaks import interconnect

    names = {str(r.device.get("name") or "") for r in ranks if r.device.get("kind") != "cpu"}
    links = [interconnect(n) for n in sorted(names) if n]
    return links[0] if links and all(x == links[0] for x in links) else None


def _add_transfer(groups: list[dict[str, Any]], instances: Sequence[Mapping[str, Any]]) -> None:
    """Per group, from the matched instances: ``instances``, ``transfer_us`` (the instances'
    transfer times summed: the wall time the transfers take, waits left out) and the bus
    bandwidth over it (``transfer_busbw_gbps``)."""
    sums = transfer_sums(instances)
    for g in groups:
        got = sums.get((g["name"], g["pg"]))
        if got is None:
            continue
        acc = got
        g["instances"] = int(acc[0])
        g["transfer_us"] = acc[1]
        factor = bus_factor(g["name"], g.get("group_size"))
        g["transfer_busbw_gbps"] = (
            acc[2] / (acc[3] * 1e3) * factor if acc[3] > 0 and acc[2] and factor else None
        )


def rank_checks(
    ranks: Sequence[RankReport], sources: dict[str, str], world: int | None
) -> list[str]:
    """What a job's traces should agree on and do not: every rank named by its
    ``distributedInfo``, the ranks of the world size all there, the same profiler steps on
    every rank (the cross-rank figures compare them)."""
    out = []
    if len(ranks) > 1:
        unnamed = [r for r, s in sources.items() if s != "distributedInfo"]
        if unnamed:
            first = next(r for r in ranks if str(r.rank) == unnamed[0])
            how = "file name" if sources[unnamed[0]] == "filename" else "file order"
            if "process id" in str(first.source.get("rank_source", "")):
                how = "process id (one file holds them all)"
            out.append(
                f"ranks {', '.join(unnamed[:10])}{' ...' if len(unnamed) > 10 else ''} have no "
                f"distributedInfo in their trace: told apart by {how}"
            )
    present = {r.rank for r in ranks}
    if world is not None and len(present) < world:
        out.append(f"{world - len(present)} of {world} ranks have no trace here")
    steps = {r.rank: tuple(sorted({s.step for s in r.steps})) for r in ranks}
    if len(set(steps.values())) > 1:
        common = max(set(steps.values()), key=lambda v: list(steps.values()).count(v))
        odd = [str(r) for r, v in sorted(steps.items()) if v != common]
        out.append(
            f"the ranks recorded different profiler steps: ranks {', '.join(odd[:10])} differ from "
            f"the others ({_span(common)}); cross-rank figures compare unlike windows"
        )
    return out


def _span(steps: tuple[int, ...]) -> str:
    if not steps:
        return "no steps"
    return f"steps {steps[0]}-{steps[-1]}" if len(steps) > 1 else f"step {steps[0]}"


def distributed_section(
    ranks: Sequence[RankReport],
    instances: Sequence[Mapping[str, Any]] | None = None,
    stragglers: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
    clock: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``distributed`` section of a job of ``ranks`` (see the module docstring)."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    present = [r.rank for r in ranks]
    sizes = [w for r in ranks if isinstance(w := r.source.get("world_size"), int)]
    world = max(sizes) if sizes else None
    sources = {str(r.rank): _source_of(str(r.source.get("rank_source", "order"))) for r in ranks}
    counted = {s: list(sources.values()).count(s) for s in set(sources.values())}
    waits = wait_by_rank(instances or [])
    per_rank = []
    for r in ranks:
        t = r.timeline
        per_rank.append(
            {
                "rank": r.rank,
                "wall_us": t.wall_us,
                "compute_us": t.work_us,
                "comm_us": t.comm_us,
                "exposed_comm_us": t.exposed_comm_us,
                "overlap_share": t.overlap_share,
                "wait_us": waits.get(r.rank) if instances else None,
                "idle_us": t.device_idle_us,
            }
        )
    records = [c for r in ranks for c in r.collectives]
    notes = list(warnings or []) + rank_checks(ranks, sources, world)
    groups = by_collective(records)
    _add_transfer(groups, instances or [])
    link = _link(ranks)
    for g in groups:
        bw = g.get("transfer_busbw_gbps") or g.get("busbw_gbps")
        g["link_share"] = bw / link["gbs"] if link and bw is not None else None
    return {
        "world_size": world if world is not None else len(present),
        "ranks": present,
        "rank_source": max(sorted(counted), key=lambda s: counted[s]) if counted else "order",
        "rank_sources": sources,
        "missing_ranks": sorted(set(range(world)) - set(present)) if world else [],
        "clock": clock
        or {
            "method": "none",
            "offsets_us": {str(r): 0.0 for r in present},
            "residual_us": None,
            "applied": False,
        },
        "per_rank": per_rank,
        "by_collective": groups,
        "interconnect": link,
        "instances": instances.dicts()
        if isinstance(instances, Instances)
        else list(instances or []),
        "stragglers": stragglers or [],
        "warnings": notes,
    }
