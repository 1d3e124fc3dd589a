"""``opscope.analyze``: :func:`opscope.analysis.report.analyze`, on this process or with the
per-rank analysis of a job on a Dask cluster (:mod:`opscope.analysis.cluster`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opscope.analysis.finding_view import typed
from opscope.analysis.report import Report
from opscope.analysis.report import analyze as analyze_here
from opscope.errors import OpscopeError
from opscope.trace import Trace


def steps_arg(steps: Any) -> tuple[int, int] | None:
    """``steps`` as ``(first, last)``: None, one step (an int) or two ints in order (a tuple
    or list); anything else is an :class:`OpscopeError` that says what to pass."""
    if steps is None:
        return None

    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if whole(steps):
        return (int(steps), int(steps))
    if isinstance(steps, tuple | list) and len(steps) == 2 and all(whole(v) for v in steps):
        first, last = int(steps[0]), int(steps[1])
        if first > last:
            raise OpscopeError(f"steps {steps!r}: the first step comes after the last")
        return (first, last)
    raise OpscopeError(
        f"steps {steps!r}: give a step number (7) or a (first, last) pair of step numbers, "
        "e.g. steps=(5, 8)"
    )


def analyze(
    source: Trace | str | Path | Sequence[str | Path],
    steps: tuple[int, int] | list[int] | int | None = None,
    *,
    findings: bool = True,
    roofline: bool = True,
    peaks: str | Path | dict[str, Any] | None = None,
    cluster: Any = None,
    store: str | Path | None = None,
    cache: bool = True,
    progress: Callable[[str, int, int], None] | None = None,
) -> Report:
    """Analyse a trace, a folder of ranks, a glob pattern or a list of rank files (see
    :func:`opscope.analysis.report.analyze`).

    ``cluster``: run the per-rank analysis on Dask: ``"local"``, ``"local:N"``,
    ``"tcp://host:port"``, True (``$OPSCOPE_DASK_SCHEDULER``) or an open
    ``distributed.Client``; the report is the local one but for ``source.engine``
    (docs/scale.md).  The findings are :class:`~opscope.analysis.finding_view.Finding`: dicts
    read also by attribute (``f.kind``, ``f.time_at_stake_us``).  ``store``: a folder where
    the workers write each rank's event table as Parquet.  ``progress(stage, done, total)``
    is told as ranks finish on the cluster.
    """
    steps = steps_arg(steps)
    if cluster is None or cluster is False:
        if store is not None:
            raise OpscopeError("store: the event tables are written by a cluster run (cluster=)")
        return _typed(
            analyze_here(
                source, steps, findings=findings, roofline=roofline, peaks=peaks, cache=cache
            )
        )
    if isinstance(source, Trace):
        raise OpscopeError("cluster: give the rank files' paths, not a loaded trace")
    from opscope.analysis.cluster import Options, analyze_on_cluster

    options = Options(
        steps=steps, findings=findings, roofline=roofline, peaks=peaks, cache=cache, store=store
    )
    report: Report = analyze_on_cluster(
        source, None if cluster is True else cluster, options, progress=progress
    )
    return _typed(report)


def _typed(report: Report) -> Report:
    """The report's findings (and each rank's) as typed :class:`Finding` objects."""
    report.findings = typed(report.findings)
    for rank in report.ranks or []:
        rank.findings = typed(rank.findings)
    return report


__all__ = ["analyze"]
