"""What the job's own findings would save on the job's critical path (``step_savings_us``).

A rank's findings are measured against that rank's path (:func:`.section.finding_savings`).
The job's findings (``straggler``, ``load_imbalance``, ``comm_bandwidth``) name no events:
each is measured by projecting its fix onto the joined graph of the ranks
(:func:`.job.join`) and taking how much shorter the job path gets, capped by the finding's
``time_at_stake_us``:

* ``straggler`` (rank R): R arrives at each collective it was last at as early as the
  second-latest rank did - that lateness (the smallest wait of the other ranks) is taken off
  R's pieces on the longest path to its arrival, the latest pieces first;
* ``load_imbalance`` (rank R, the most compute): R's compute computes as fast as the median
  rank's - its compute pieces (``gpu_compute``; ``cpu`` where the device is the host) scaled
  by median / R's compute;
* ``comm_bandwidth`` (one collective): its transfers at the finding's target share of the
  link - the pieces of that collective's device work, on every rank, scaled by the time the
  finding says would remain over the time measured.

A finding whose fix the graph cannot express keeps ``step_savings_us`` null.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.critical.graph import JOIN
from opscope.analysis.critical.longest import longest_paths
from opscope.analysis.critical.model import COMPUTE, CPU
from opscope.analysis.critical.path import solve

if TYPE_CHECKING:
    from opscope.analysis.critical.job import Joined
    from opscope.trace.model import Trace

JOB_KINDS = frozenset({"straggler", "load_imbalance", "comm_bandwidth"})


def _rank_edges(joined: Joined, rank: int) -> np.ndarray:
    g = joined.graph
    return np.asarray(joined.node_rank[g.src] == rank)


def _straggler(
    joined: Joined, weight: np.ndarray, rank: int, instances: Sequence[Mapping[str, Any]]
) -> int | None:
    g = joined.graph
    _dist, pred = longest_paths(g.src, g.dst, weight, g.n_nodes)
    w = weight.copy()
    mine = np.flatnonzero((g.kind == JOIN) & _rank_edges(joined, rank))
    by_barrier = {int(g.dst[e]): int(g.src[e]) for e in mine.tolist()}
    on_rank = _rank_edges(joined, rank)
    changed = False
    for j, k in enumerate(joined.barrier_inst):
        inst = instances[k]
        arrival = by_barrier.get(joined.first_barrier + j)
        if arrival is None or inst.get("last_rank") != rank:
            continue
        others = [
            float(v or 0.0) for r, v in (inst.get("wait_us") or {}).items() if str(r) != str(rank)
        ]
        late = round(min(others) * 1000.0) if others else 0
        # take the lateness off R's pieces leading to its arrival, the latest first (walked
        # back from the arrival only as far as it goes: a whole path per collective would
        # cost collectives x path length)
        e = int(pred[arrival])
        while e >= 0 and late > 0 and on_rank[e]:
            cut = min(late, int(w[e]))
            w[e] -= cut
            late -= cut
            changed = changed or cut > 0
            e = int(pred[int(g.src[e])])
    return solve(g, w).length_ns if changed else None


def _scaled(joined: Joined, weight: np.ndarray, sel: np.ndarray, factor: float) -> int:
    w = np.where(sel, np.rint(weight * factor), weight).astype(np.int64)
    return solve(joined.graph, w).length_ns


def _load_imbalance(joined: Joined, weight: np.ndarray, f: Mapping[str, Any]) -> int | None:
    details = f.get("details") or {}
    rank, median = details.get("rank"), details.get("median_us")
    mine = (details.get("compute_us") or {}).get(str(rank))
    if rank is None or not median or not mine:
        return None
    g = joined.graph
    on_rank = _rank_edges(joined, int(rank))
    sel = on_rank & (g.label == COMPUTE)
    if not (sel & (weight > 0)).any():
        sel = on_rank & (g.label == CPU)  # a CPU trace: its compute is host time
    return _scaled(joined, weight, sel, float(median) / float(mine))


def _comm_bandwidth(
    joined: Joined,
    weight: np.ndarray,
    f: Mapping[str, Any],
    traces: Mapping[int, Trace],
    records: Mapping[int, Sequence[Mapping[str, Any]]],
) -> int | None:
    details = f.get("details") or {}
    name, time_us = details.get("collective"), details.get("time_us")
    at_stake = float(f.get("time_at_stake_us") or 0.0)
    if not name or not time_us:
        return None
    g = joined.graph
    sel = np.zeros(g.n_edges, dtype=bool)
    for i, part in enumerate(joined.parts):
        recs = records.get(part.rank, ())
        ids = [
            int(w)
            for r in recs
            if r.get("name") == name and r.get("pg") == details.get("pg")
            for w in (r.get("work_event_ids") or [])
        ]
        if not ids:
            continue
        rows = traces[part.rank].index.rows_of(np.asarray(ids, dtype=np.int64))
        lo, hi = int(joined.offsets[i]), int(joined.offsets[i + 1])
        on_rank = (joined.node_rank[g.src] == part.rank) & (g.src >= lo) & (g.src < hi)
        sel |= on_rank & np.isin(g.edge_row, rows[rows >= 0])
    if not sel.any():
        return None
    factor = max(0.0, 1.0 - at_stake / float(time_us))
    return _scaled(joined, weight, sel, factor)


def job_finding_savings(
    joined: Joined,
    findings: Sequence[Mapping[str, Any]],
    traces: Mapping[int, Trace],
    matched: tuple[Mapping[int, Sequence[Mapping[str, Any]]], Sequence[Mapping[str, Any]]],
) -> list[float | None]:
    """``step_savings_us`` of each of ``findings`` (None where it is not a job finding, or
    its fix cannot be projected; see the module docstring).  ``matched``: the ranks'
    collective records and their matched instances, as the job path was joined with."""
    records, instances = matched
    g = joined.graph
    weight = g.weight
    base = solve(g).length_ns
    out: list[float | None] = []
    for f in findings:
        kind = f.get("kind")
        projected: int | None = None
        if kind not in JOB_KINDS or f.get("rank") is not None:
            out.append(None)
            continue
        if kind == "straggler":
            rank = (f.get("details") or {}).get("rank")
            projected = None if rank is None else _straggler(joined, weight, int(rank), instances)
        elif kind == "load_imbalance":
            projected = _load_imbalance(joined, weight, f)
        else:
            projected = _comm_bandwidth(joined, weight, f, traces, records)
        if projected is None:
            out.append(None)
            continue
        saved_us = max(0, base - projected) / 1000.0
        out.append(round(min(float(f.get("time_at_stake_us") or 0.0), saved_us), 3))
    return out


__all__ = ["JOB_KINDS", "job_finding_savings"]
