"""What the job's own findings would save on the job's critical path (``step_savings_us``).

A rank's findings are measured against that rank's path (:func:`.section.finding_savings`).
The job's findings (``straggler``, ``load_imbalance``, ``comm_bandwidth``) name no events:
each is measured by projecting its fix onto the ranks it touches and solving the job path
again, capped by the finding's ``time_at_stake_us``.  The job path is solved from the ranks'
contractions (:mod:`.job_solve`), so a fix is a change of a rank's weights
(:func:`changed_weights`, run where the rank's events are: in this process, or on a cluster's
workers), after which that rank is contracted again:

* ``straggler`` (rank R): R arrives at each collective it was last at as early as the
  second-latest rank did - that lateness (the smallest wait of the other ranks) is taken off
  R's pieces on the job path's longest path to its arrival, the latest pieces first, as far
  back as that path stays on R;
* ``load_imbalance`` (rank R, the most compute): R's compute computes as fast as the median
  rank's - its compute pieces (``gpu_compute``; ``cpu`` where the device is the host) scaled
  by median / R's compute;
* ``comm_bandwidth`` (one collective): its transfers at the finding's target share of the
  link - the pieces of that collective's device work, on every rank, scaled by the time the
  finding says would remain over the time measured.

A rank's ``comm_exposed`` finding in a job is measured on the job path too: its rank's
collectives' device work taken away (``scale_comm`` of every collective, factor 0), the job
weighing no waits, so what it saves is the transfers' time the job feels, never the waits a
straggler causes (those are the straggler's).

A straggler none of whose late arrivals is on the job path saves 0; a finding whose fix the
graph cannot express keeps ``step_savings_us`` null.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.critical.contract import ANY
from opscope.analysis.critical.fixes import capped_saving, collective_rows
from opscope.analysis.critical.job_solve import (
    RankSummary,
    WindowSolution,
    arrival_preds,
    projected_length,
    solve_window,
)
from opscope.analysis.critical.model import COMPUTE, CPU

if TYPE_CHECKING:
    from opscope.analysis.critical.contract import Contraction
    from opscope.analysis.critical.model import Graph

JOB_KINDS = frozenset({"straggler", "load_imbalance", "comm_bandwidth"})
#: A rank's findings measured on the job path as well (a job of matched collectives).
RANK_KINDS = frozenset({"comm_exposed"})

Change = dict[str, Any]
"""A fix projected onto one rank: ``{"kind": "scale_compute", "factor"}``, ``{"kind":
"scale_comm", "collective", "pg", "factor"}`` or ``{"kind": "cut", "preds", "arrivals"}``
(``preds``: per interface of the rank, the job path's last edge into it when it is the
rank's own, see :func:`~.job_solve.arrival_preds`; ``arrivals``: ``(interface, lateness
ns)`` in the collectives' order)."""
Recontract = Callable[[dict[int, list[Change]]], dict[int, list[RankSummary | None]]]
"""``recontract({rank: changes})`` -> ``{rank: [the rank's summary with each change made, or
None where it changes nothing]}``."""


def changed_weights(
    part: Graph,
    weight: np.ndarray,
    contraction: Contraction,
    change: Change,
    comm_rows: np.ndarray | None = None,
) -> np.ndarray | None:
    """The rank's job weights (``weight``) with ``change`` made, or None where it changes
    nothing; ``comm_rows``: the rows of the collective's device work (``scale_comm``)."""
    kind = change["kind"]
    if kind == "scale_compute":
        sel = part.label == COMPUTE
        if not (sel & (weight > 0)).any():
            sel = part.label == CPU  # a CPU trace: its compute is host time
        return _scaled(weight, sel, float(change["factor"]))
    if kind == "scale_comm":
        if comm_rows is None or not len(comm_rows):
            return None
        sel = np.isin(part.edge_row, comm_rows)
        return _scaled(weight, sel, float(change["factor"])) if sel.any() else None
    if kind == "cut":
        return _cut(weight, contraction, change["preds"], change["arrivals"])
    raise ValueError(f"unknown change {kind!r}")


def _scaled(weight: np.ndarray, sel: np.ndarray, factor: float) -> np.ndarray:
    out: np.ndarray = np.where(sel, np.rint(weight * factor), weight).astype(np.int64)
    return out


def _cut(
    weight: np.ndarray,
    contraction: Contraction,
    preds: Sequence[Sequence[int] | None],
    arrivals: Sequence[Sequence[int]],
) -> np.ndarray | None:
    """The lateness of each arrival taken off the pieces before it, the latest first, along
    the job path's edges into it for as long as they are the rank's own (each contracted edge
    expanded only when the cut reaches it)."""
    w = weight.copy()
    expanded: dict[int, np.ndarray] = {}
    changed = False
    for at, late_ns in arrivals:
        late, pos = int(late_ns), int(at)
        while late > 0 and pos != ANY and preds[pos] is not None:
            pred = preds[pos]
            assert pred is not None
            if pos not in expanded:
                expanded[pos] = contraction.expand([(int(pred[0]), int(pred[1]))])
            for e in expanded[pos][::-1].tolist():
                if late <= 0:
                    break
                cut = min(late, int(w[e]))
                w[e] -= cut
                late -= cut
                changed = changed or cut > 0
            pos = int(pred[0])
    return w if changed else None


def _changes(
    f: Mapping[str, Any],
    summaries: Sequence[RankSummary],
    solved: Callable[[], WindowSolution],
    instances: Sequence[Mapping[str, Any]],
) -> dict[int, Change] | None:
    """The finding's fix as a change per rank it touches (None: not expressible; empty: it
    touches nothing on the job path);
    ``solved()``: the summaries' window path, solved once when first asked for."""
    kind, details = f.get("kind"), f.get("details") or {}
    if kind == "comm_exposed":
        rank = f.get("rank")
        if rank is None:
            return None
        return {int(rank): {"kind": "scale_comm", "collective": None, "pg": None, "factor": 0.0}}
    if kind == "straggler":
        rank = details.get("rank")
        if rank is None:
            return None
        preds, arrival_of = arrival_preds(solved(), int(rank))
        arrivals = []
        for k in sorted(arrival_of):
            inst = instances[k]
            if inst.get("last_rank") != int(rank):
                continue
            others = [
                float(v or 0.0)
                for r, v in (inst.get("wait_us") or {}).items()
                if str(r) != str(rank)
            ]
            late = round(min(others) * 1000.0) if others else 0
            arrivals.append((arrival_of[k], late))
        if not arrivals:  # none of its late arrivals is on the job path: nothing to save
            return {}
        return {int(rank): {"kind": "cut", "preds": preds, "arrivals": arrivals}}
    if kind == "load_imbalance":
        rank, median = details.get("rank"), details.get("median_us")
        mine = (details.get("compute_us") or {}).get(str(rank))
        if rank is None or not median or not mine:
            return None
        return {int(rank): {"kind": "scale_compute", "factor": float(median) / float(mine)}}
    name, time_us = details.get("collective"), details.get("time_us")
    if not name or not time_us:
        return None
    at_stake = float(f.get("time_at_stake_us") or 0.0)
    factor = max(0.0, 1.0 - at_stake / float(time_us))
    change = {"kind": "scale_comm", "collective": name, "pg": details.get("pg"), "factor": factor}
    return {s.rank: dict(change) for s in summaries}


def job_finding_savings(
    summaries: Sequence[RankSummary],
    members: Sequence[Sequence[int]],
    instances: Sequence[Mapping[str, Any]],
    findings: Sequence[Mapping[str, Any]],
    recontract: Recontract,
) -> list[float | None]:
    """``step_savings_us`` of each of ``findings`` (None where it is not a job finding or a
    rank's :data:`RANK_KINDS` finding, or its fix cannot be projected; see the module
    docstring): ``summaries`` and ``members`` as
    the job path was solved with, ``recontract`` where the ranks' events are."""
    asked: dict[int, list[Change]] = {}
    plans: list[dict[int, int] | None] = []  # per finding: {rank: its change's position}
    window: list[WindowSolution] = []

    def solved() -> WindowSolution:
        if not window:
            window.append(solve_window(summaries, members))
        return window[0]

    for f in findings:
        on_job = f.get("kind") in JOB_KINDS and f.get("rank") is None
        if not on_job and not (f.get("kind") in RANK_KINDS and f.get("rank") is not None):
            plans.append(None)
            continue
        changes = _changes(f, summaries, solved, instances)
        if changes is None:
            plans.append(None)
            continue
        plan = {}
        for rank, change in changes.items():
            plan[rank] = len(asked.setdefault(rank, []))
            asked[rank].append(change)
        plans.append(plan)
    got = recontract(asked) if asked else {}
    base = solved().length_ns if asked else 0
    out: list[float | None] = []
    for f, asks in zip(findings, plans, strict=True):
        if asks is not None and not asks:  # a fix that touches nothing on the job path
            out.append(0.0)
            continue
        new: dict[int, RankSummary] = {}
        for r, i in (asks or {}).items():
            summary = got[r][i]
            if summary is not None:
                new[r] = summary
        if not new:  # the change moved no weight on any rank: nothing saved
            out.append(None if asks is None else 0.0)
            continue
        projected = projected_length(solved(), new, members)
        saved_us = max(0, base - projected) / 1000.0
        out.append(capped_saving(saved_us, float(f.get("time_at_stake_us") or 0.0)))
    return out


__all__ = [
    "JOB_KINDS",
    "Change",
    "Recontract",
    "changed_weights",
    "collective_rows",
    "job_finding_savings",
]
