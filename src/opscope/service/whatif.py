"""What-if on an open trace: the critical path recomputed with some events made faster.

:func:`what_if` answers for one rank (its path) or a job (each rank's path and the job path,
the ranks joined at their collectives).  The spec is ``NAME=FACTOR[,NAME=FACTOR...]``: a path
label (``launch_overhead=0``) or an event name (``aten::mul=0.5``: the device work of that op
and the ops under it; a kernel's own time; an op's host time where it launched no device
work); see :func:`opscope.analysis.critical.section.scaled_weights`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opscope.analysis.critical.section import parse_what_if, rank_graph
from opscope.analysis.critical.section import what_if as rank_what_if

if TYPE_CHECKING:
    from opscope.analysis.report import Report


def what_if(report: Report, spec: str) -> dict[str, Any]:
    """``{"spec", "changes", "scope", "length_us", "projected_us", "saved_us", "steps",
    "ranks"?}`` for the report's trace and window (raises ``WhatIfError`` on a bad spec)."""
    from opscope.analysis.report import rank_traces

    parse_what_if(spec)  # a bad spec fails before any work
    trace = report.trace
    if trace is None:
        raise ValueError("what-if needs the report's trace")
    steps = report.window_steps
    if not report.ranks:
        graph = rank_graph(trace, steps, report.collectives)
        return {"scope": "rank", "rank": graph.rank, **rank_what_if(trace, graph, spec)}
    records = {int(r.rank): r.collectives for r in report.ranks}
    ranks: list[dict[str, Any]] = []
    for t in rank_traces(trace):
        rank = int(t.meta.ranks[0])
        graph = rank_graph(t, steps, records.get(rank, ()))
        ranks.append({"rank": rank, **rank_what_if(t, graph, spec)})
    worst = max(ranks, key=lambda r: float(r["length_us"])) if ranks else None
    out: dict[str, Any] = {"scope": "ranks", "spec": spec, "ranks": ranks}
    if worst is not None:
        out.update(
            {
                "changes": worst["changes"],
                "rank": worst["rank"],
                "length_us": worst["length_us"],
                "projected_us": max(float(r["projected_us"]) for r in ranks),
                "saved_us": round(
                    float(worst["length_us"]) - max(float(r["projected_us"]) for r in ranks), 3
                ),
                "steps": worst["steps"],
            }
        )
    return out


__all__ = ["what_if"]
