"""What-if on an open trace: the critical path recomputed with some events made faster.

:func:`what_if` answers for one rank (its path) or a job (each rank's path and the job path,
the ranks joined at their collectives).  The spec is ``NAME=FACTOR[,NAME=FACTOR...]``: a path
label (``launch_overhead=0``) or an event name (``aten::mul=0.5``: the device work of that op
and the ops under it; a kernel's own time; an op's host time where it launched no device
work); see :func:`opscope.analysis.critical.section.scaled_weights`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from opscope.analysis.critical.section import WhatIfError, parse_what_if, rank_graph
from opscope.analysis.critical.section import what_if as rank_what_if

if TYPE_CHECKING:
    from opscope.analysis.report import Report


def check_factors(spec: str) -> None:
    """A :class:`WhatIfError` that says why, for a change whose factor is a number no time can
    be scaled by (negative, infinite, not a number); the other malformed changes are
    :func:`parse_what_if`'s to refuse."""
    for part in spec.split(","):
        name, eq, factor = part.rpartition("=")
        if not eq or not name.strip():
            continue
        try:
            value = float(factor)
        except ValueError:
            continue
        if value < 0 or not math.isfinite(value):
            raise WhatIfError(
                f"what-if {part.strip()!r}: the factor {factor.strip()} is not a time scale: a "
                "factor multiplies the time of what the name selects (0: gone, 0.5: twice as "
                "fast, 1: unchanged, 2: twice as long), so it is a finite number >= 0"
            )


def check_spec(spec: str) -> None:
    """A :class:`WhatIfError` that says why, for a spec no what-if can answer (a factor that is
    no time scale, a malformed change), before any work."""
    check_factors(spec)
    parse_what_if(spec)


def what_if(report: Report, spec: str) -> dict[str, Any]:
    """``{"spec", "changes", "scope", "length_us", "projected_us", "saved_us", "bound_by_us",
    "steps"}`` for the report's trace and window (raises ``WhatIfError`` on a bad spec).  For
    a job the figures are the job path's (the ranks joined at their collectives) and
    ``ranks`` gives each rank's own path, projected alone."""
    from opscope.analysis.rank_split import rank_traces

    check_spec(spec)  # a bad spec fails before any work
    trace = report.trace
    if trace is None:
        raise ValueError("what-if needs the report's trace")
    steps = report.window_steps
    if not report.ranks:
        graph = rank_graph(trace, steps, report.collectives)
        return {"scope": "rank", "rank": graph.rank, **rank_what_if(trace, graph, spec)}
    from opscope.analysis.critical.job import job_what_if
    from opscope.analysis.job_report import matched

    traces = {int(t.meta.ranks[0]): t for t in rank_traces(trace)}
    records, instances = matched(report.ranks)
    ranks: list[dict[str, Any]] = []
    for rank, t in sorted(traces.items()):
        graph = rank_graph(t, steps, records.get(rank, ()))
        ranks.append({"rank": rank, **rank_what_if(t, graph, spec)})
    job = job_what_if(traces, records, instances, spec, steps)
    return {"scope": "job", **job, "ranks": ranks}


__all__ = ["check_factors", "check_spec", "what_if"]
