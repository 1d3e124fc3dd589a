"""One rank's role in its job, for a report of that rank alone (``report --rank N``).

The user chose one rank of a job; the rank's own report cannot see the others, so the job's
collectives are matched from every rank's records (no other analysis) and the chosen rank's
part told: whether it is the job's straggler (with the job's evidence,
:mod:`opscope.analysis.lateness`), how long the others waited for it, how long it waited for
them.  :func:`rank_role_finding` makes the straggler finding of that rank, its cause taken
from what bounds the rank's own critical path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opscope.analysis import clocks
from opscope.analysis.collective_match import match_collectives, stragglers
from opscope.analysis.collectives import collective_records
from opscope.analysis.instance_table import wait_by_rank

if TYPE_CHECKING:
    from opscope.analysis.findings.finding import Finding
    from opscope.trace.model import Trace


def job_role(ranks: dict[int, Trace], rank: int, steps: tuple[int, int] | None) -> dict[str, Any]:
    """``rank``'s role in the job of ``ranks`` (each rank's trace): ``rank``, ``ranks``,
    ``straggler`` (the job names it), ``stragglers`` (the ranks the job names), its
    ``times_last``, ``caused_wait_us`` (the others' waits for it, summed),
    ``others_wait_us_each``, ``wait_us`` (its own waits for the others), ``evidence`` and
    ``instances`` (matched)."""
    records = {r: collective_records(t, steps) for r, t in sorted(ranks.items())}
    clock = clocks.estimate(records)
    if clock["applied"]:
        records = clocks.corrected(records, clock["offsets_us"])
    instances, _warnings = match_collectives(records)
    late = stragglers(instances)
    mine = next((s for s in late if int(s["rank"]) == rank), None)
    others = max(1, len(ranks) - 1)
    return {
        "rank": rank,
        "ranks": sorted(ranks),
        "straggler": mine is not None,
        "stragglers": [int(s["rank"]) for s in late],
        "times_last": int(mine["times_last"]) if mine else 0,
        "caused_wait_us": float(mine["caused_wait_us"]) if mine else 0.0,
        "others_wait_us_each": float(mine["caused_wait_us"]) / others if mine else 0.0,
        "wait_us": float(wait_by_rank(instances).get(rank, 0.0)),
        "evidence": mine.get("evidence") if mine else None,
        "instances": len(instances),
    }


#: What bounds a rank's own path, read as the cause of its lateness.
_PATH_CAUSES = {
    "data_loading": "data_loading",
    "sync": "host_sync",
    "untraced": "untraced",
    "cpu": "compute",
    "gpu_compute": "compute",
}


def rank_role_finding(
    role: dict[str, Any], critical_path: dict[str, Any] | None, wall_us: float
) -> Finding | None:
    """The straggler finding of the chosen rank when the job names it (None otherwise): its
    cause the heaviest of data loading, syncs, untraced time and compute on its own path."""
    from opscope.analysis.job_findings import straggler

    if not role.get("straggler"):
        return None
    bound = (critical_path or {}).get("bound_by_us") or {}
    known = {k: float(v) for k, v in bound.items() if k in _PATH_CAUSES and v}
    label = max(known, key=lambda k: known[k]) if known else None
    top = next(
        (t.get("name") for t in (critical_path or {}).get("top") or [] if t.get("label") == label),
        None,
    )
    row = {
        "rank": role["rank"],
        "times_last": role["times_last"],
        "caused_wait_us": role["caused_wait_us"],
        "own_wait_us": role["wait_us"],
        "cause": f"is bound by {label} on its own path ({known[label] / 1e3:.1f} ms)"
        if label
        else None,
        "cause_kind": _PATH_CAUSES.get(label) if label else None,
        "cause_op": top,
        "evidence": role.get("evidence"),
    }
    return straggler(row, len(role["ranks"]), wall_us).updated(rank=role["rank"])


def chosen_rank(report: Any, role: dict[str, Any], findings: bool) -> None:
    """A rank of a job reported alone (``--rank``; ``report``: its
    :class:`~opscope.analysis.report.Report`, before its findings' savings): its role in the
    job in the distributed
    section (``job_role``, :mod:`opscope.analysis.job_role`), no warning about the ranks left
    out on purpose, and its straggler finding when the job names it (with no fix)."""
    dist = report.extra["distributed"]
    dist["job_role"] = role
    kept = [w for w in dist.get("warnings") or [] if "have no trace here" not in w]
    n = len(role.get("ranks") or [])
    what = (
        f"the job's straggler: the others wait {role['others_wait_us_each'] / 1e3:.1f} ms each "
        "for it"
        if role.get("straggler")
        else f"not a straggler; it waits {role['wait_us'] / 1e3:.1f} ms for the others"
    )
    kept.append(f"rank {role['rank']} of a job of {n} ranks, reported alone (--rank): {what}")
    dist["warnings"] = kept
    found = rank_role_finding(role, report.extra.get("critical_path"), report.timeline.wall_us)
    if found is not None and findings:
        report.findings = [*report.findings, found]


__all__ = ["chosen_rank", "job_role", "rank_role_finding"]
