"""``opscope.analyze``: :func:`opscope.analysis.pipeline.analyze`, on this process or with the
per-rank analysis of a job on a Dask cluster (:mod:`opscope.analysis.cluster`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opscope.analysis.pipeline import analyze as analyze_here
from opscope.analysis.report import Report
from opscope.errors import OpscopeError
from opscope.trace import Trace
from opscope.trace.loader_work import loader_files


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
    graph_capture: str | Path | bool | None = None,
    loader_traces: str | Path | Sequence[str | Path] | bool | None = None,
    what_if: str | None = None,
) -> Report:
    """Analyse a trace, a folder of ranks, a glob pattern or a list of rank files (see
    :func:`opscope.analysis.pipeline.analyze`).

    ``cluster``: run the per-rank analysis on Dask: ``"local"``, ``"local:N"``,
    ``"tcp://host:port"``, True (``$OPSCOPE_DASK_SCHEDULER``) or an open
    ``distributed.Client``; the report is the local one but for ``source.engine``
    (docs/scale.md).  The findings are :class:`~opscope.analysis.findings.finding.Finding`:
    read by attribute (``f.kind``, ``f.time_at_stake_us``) or as the report's JSON objects
    (``f["kind"]``).  ``store``: a folder where
    the workers write each rank's event table as Parquet.  ``progress(stage, done, total)``
    is told as ranks finish on the cluster.  ``graph_capture``: the trace recorded while the
    CUDA/HIP graphs were captured (a file or a folder of them) that attributes the replayed
    kernels to the captured ops; ``False``: none; ``None`` (default): a ``capture_traces/``
    folder beside the trace, and captures recorded in the trace itself (docs/cuda-graphs.md).
    ``loader_traces``: the traces of the DataLoader's worker processes (a file, folder, glob
    or list) that break the critical path's ``data_loading`` down by the workers' own events;
    ``False``: none; ``None`` (default): a ``loader_traces/`` folder beside the trace
    (docs/critical-path.md).  ``what_if``: a what-if spec (``"aten::mul=0.5"``, see
    :mod:`opscope.analysis.whatif`), answered in ``report.extra["what_if"]`` (the report's
    ``what_if`` section) as ``opscope report --what-if`` answers it; on a cluster the workers
    compute each rank's part.
    """
    steps = steps_arg(steps)
    if what_if is not None:
        from opscope.analysis.whatif import check_spec

        check_spec(what_if)  # a bad spec fails before any work
    if cluster is None or cluster is False:
        if store is not None:
            raise OpscopeError("store: the event tables are written by a cluster run (cluster=)")
        loaders = loader_files(source, loader_traces)
        if graph_capture is not False and isinstance(source, (str, Path, Trace)):
            source = _with_captures(source, graph_capture, cache=cache)
        here = analyze_here(
            source,
            steps,
            findings=findings,
            roofline=roofline,
            peaks=peaks,
            cache=cache,
            loader_traces=loaders,
        )
        if what_if is not None:
            from opscope.analysis.whatif import what_if as answer

            here.extra["what_if"] = answer(here, what_if)
        return here
    if isinstance(source, Trace):
        raise OpscopeError("cluster: give the rank files' paths, not a loaded trace")
    if graph_capture not in (None, False):
        raise OpscopeError("graph_capture: attributed in this process, not on a cluster")
    if loader_traces not in (None, False):
        raise OpscopeError("loader_traces: read with one process's trace, not on a cluster")
    from opscope.analysis.cluster import Options, analyze_on_cluster

    options = Options(
        steps=steps,
        findings=findings,
        roofline=roofline,
        peaks=peaks,
        cache=cache,
        store=store,
        what_if=what_if,
    )
    report: Report = analyze_on_cluster(
        source, None if cluster is True else cluster, options, progress=progress
    )
    return report


def _with_captures(
    source: Trace | str | Path, graph_capture: str | Path | bool | None, *, cache: bool
) -> Trace | str | Path:
    """``source`` attributed by its graph captures (see :func:`analyze`); a path with nothing
    to attribute stays a path (its run folder is found through it)."""
    from opscope.trace.formats.listing import is_pattern
    from opscope.trace.graphs import with_captures
    from opscope.trace.ingest import load

    if isinstance(source, Trace):
        paths = source.meta.paths
        return with_captures(source, paths[0] if len(paths) == 1 else None, graph_capture)
    if is_pattern(source):
        return source
    trace = load(source, cache=cache)
    merged = with_captures(trace, source, graph_capture, cache=cache)
    return source if merged is trace else merged


__all__ = ["analyze"]
