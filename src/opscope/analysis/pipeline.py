"""The analysis of a trace: :func:`analyze`, the single entry point that makes a
:class:`~opscope.analysis.report.Report`.

The unit of analysis is one rank: its tables, findings and critical path
(:func:`job_rank`); a trace of several ranks is split into its ranks
(:mod:`opscope.analysis.rank_split`), each analysed alone, and its report is the merge of the
rank reports (:mod:`opscope.analysis.job_report`), with the job's critical path joined from
the ranks' events and the job's own findings measured against it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from opscope.analysis.beside import TABLES_FIRST_EVENTS, beside
from opscope.analysis.collectives import collective_records
from opscope.analysis.critical import section as critical
from opscope.analysis.critical.model import Graph
from opscope.analysis.distributed import distributed_section
from opscope.analysis.findings import Context, run_rules
from opscope.analysis.job import RankReport
from opscope.analysis.job_findings import comm_bandwidth, rerank
from opscope.analysis.job_report import matching, merge, note_unreadable, rank_report
from opscope.analysis.job_role import chosen_rank
from opscope.analysis.kernels import kernel_table
from opscope.analysis.optable import op_table, select_window
from opscope.analysis.report import Report
from opscope.analysis.roofline import roofline as roofline_of_report
from opscope.analysis.steps import step_compute, step_stats
from opscope.analysis.timeline import timeline_summary
from opscope.errors import OpscopeError
from opscope.trace import Trace, load
from opscope.trace.gcpause import collector_paused
from opscope.trace.heap import between_parts
from opscope.trace.jobs import MixedJobsError
from opscope.trace.progress import tell


def run_info_of(source: Trace | str | Path) -> dict[str, Any] | None:
    """run.json of a run folder (or of the folder a trace file sits in), if there is one."""
    paths = [Path(p) for p in source.meta.paths] if isinstance(source, Trace) else [Path(source)]
    for p in paths:
        candidates = [p / "run.json", p.parent / "run.json"]
        if p.parent.name == "traces":  # traces/rank<N>.json.gz inside a run folder
            candidates.append(p.parent.parent / "run.json")
        for candidate in candidates:
            if candidate.is_file():
                try:
                    data = orjson.loads(candidate.read_bytes())
                except (OSError, orjson.JSONDecodeError):
                    return None
                return data if isinstance(data, dict) else None
    return None


def _rank_tables(
    trace: Trace,
    steps: tuple[int, int] | None,
    collectives: list[dict[str, Any]],
    *,
    roofline: bool,
    peaks: str | Path | dict[str, Any] | None,
) -> Report:
    """A rank's report with its tables (and roofline), before findings and the path."""
    events = select_window(trace.events, steps) if steps is not None else None
    report = Report(
        trace=trace,
        ops=op_table(trace, steps),
        kernels=kernel_table(trace, steps),
        timeline=timeline_summary(trace, events),
        steps=step_stats(trace),
        window_steps=steps,
        collectives=collectives,
        # read now, beside the op table it reads on a CPU trace: a distributed section asks
        # for it after the derived tables are dropped, and would build them again
        step_compute_us=step_compute(trace),
    )
    if roofline:
        report.roofline = roofline_of_report(report, overrides=peaks)
    return report


def _context(report: Report, trace: Trace) -> Context:
    """The findings' context of a rank's report."""
    return Context(
        trace=trace,
        op_table=report.ops,
        timeline=report.timeline,
        steps=report.steps,
        window_steps=report.window_steps,
        run_info=report.run_info,
    )


def _analyze_rank(
    trace: Trace,
    *,
    steps: tuple[int, int] | None,
    findings: bool,
    roofline: bool,
    peaks: str | Path | dict[str, Any] | None,
    run_info: dict[str, Any] | None,
) -> Report:
    idx = trace.index  # made before the side thread starts: both share this one
    derived_before = trace.derived_built()
    collectives = collective_records(trace, steps)
    between_parts()  # the load's and the compaction's freed memory back before the analysis

    def rank_path() -> tuple[Graph, dict[str, Any]]:
        graph = critical.rank_graph(trace, steps, collectives)
        between_parts()
        return graph, critical.section(trace, graph)

    def tables() -> Report:
        got = _rank_tables(trace, steps, collectives, roofline=roofline, peaks=peaks)
        # the derived op and kernel tables are read by the tables only (the rules read the
        # index): those this analysis built go before the rules, the graph's cut and the
        # path's section (at 10M events about 1.3 GB)
        trace.drop_derived(keep=derived_before)
        return got

    # on a large trace the tables go first: their derived tables and the graph's
    # temporaries would meet (beside.TABLES_FIRST_EVENTS)
    first = tables() if idx.n >= TABLES_FIRST_EVENTS else None
    # the critical path runs beside the tables and rules where a second core pays
    with beside(rank_path, idx.n) as path_result:
        report = first if first is not None else tables()
        del first
        report.run_info = run_info
        if findings:
            report.findings = run_rules(_context(report, trace))
        if report.timeline.comm_us > 0 or report.collectives:
            section = distributed_section([rank_report(report)])
            report.extra["distributed"] = section
            extra = comm_bandwidth(section, report.timeline.wall_us, report.collectives)
            if extra and findings:
                fixed = [
                    f.updated(fix=critical.comm_bandwidth_fix(trace, collectives, f)) for f in extra
                ]
                report.findings = [*report.findings, *fixed]
        if trace.args_packed:
            # a packed trace is one command's, analysed once: the tables and rules have read
            # the shapes, and the path's section and the savings want the memory
            idx.forget_args()
        # the tables' and rules' freed temporaries back while the path may still be building
        between_parts()
        graph, report.extra["critical_path"] = path_result()
    role = trace.meta.extra.get("job_role")
    if isinstance(role, dict) and isinstance(report.extra.get("distributed"), dict):
        chosen_rank(report, role, findings)
    if findings and report.findings:
        # each finding's saving is the what-if of its fix on the window's path
        between_parts()
        saved = critical.finding_savings(trace, graph, report.findings)
        report.findings = rerank(
            [f.updated(step_savings_us=s) for f, s in zip(report.findings, saved, strict=True)]
        )
    if trace.neuron is not None and trace.device.kind == "neuron":
        from opscope.analysis.neuron_engines import neuron_engines

        engines = neuron_engines(trace)
        if engines is not None:
            report.extra["neuron"] = engines.to_dict()
    return report


def with_loader(
    report: Report, trace: Trace, loader_traces: Sequence[str | Path], *, cache: bool
) -> None:
    """The report's ``critical_path.data_loading``: its path's data_loading time shared out
    among the loader workers' own events, and a note saying where it went."""
    from opscope.analysis.critical.loader import loader_section
    from opscope.trace.loader_work import load_loader_work

    work = load_loader_work(loader_traces, trace, cache=cache)
    cp = report.extra.get("critical_path")
    if not isinstance(cp, dict) or not len(work.workers):
        return
    section = loader_section(cp["segments"], work)
    cp["data_loading"] = section
    cp.setdefault("notes", []).append(loader_note(section))


def loader_note(section: Mapping[str, Any]) -> str:
    """One line on where the path's data_loading time went in the workers."""
    n = len(section["workers"])
    total = float(section["on_path_us"])
    if total <= 0:
        return f"data_loading is not on the path: the {n} loader worker trace(s) are not read"
    top = section["top"][:3]
    named = ", ".join(f"{t['name']} {100 * t['share']:.0f}%" for t in top) or "no traced work"
    rest = float(section["not_in_workers_us"])
    return (
        f"data_loading on the path, {total / 1000:.2f} ms, in the {n} loader workers' traces: "
        f"{named}; {100 * rest / total:.0f}% while no worker was busy (queues, IPC, pinning)"
    )


def add_savings(
    report: Report, measure: Callable[[Sequence[Mapping[str, Any]]], list[float | None]]
) -> None:
    """The job's own findings' ``step_savings_us`` (``measure``: from the job path), and the
    findings ranked again."""
    saved = measure(report.findings)
    report.findings = rerank(
        [
            f if s is None else f.updated(step_savings_us=s)
            for f, s in zip(report.findings, saved, strict=True)
        ]
    )


def job_rank(
    trace: Trace,
    *,
    steps: tuple[int, int] | None,
    findings: bool,
    roofline: bool,
    peaks: str | Path | dict[str, Any] | None,
    run_info: dict[str, Any] | None,
) -> RankReport:
    """The :class:`RankReport` of one rank of a job (a trace of :func:`rank_traces`); its
    critical path is the rank's alone until the job's matching gives its waits."""
    report = _analyze_rank(
        trace, steps=steps, findings=findings, roofline=roofline, peaks=peaks, run_info=run_info
    )
    return rank_report(report, trace.meta.ranks[0])


@collector_paused()  # the analysis makes many containers and no cycle
def analyze(
    source: Trace | str | Path | Sequence[str | Path],
    steps: tuple[int, int] | None = None,
    *,
    findings: bool = True,
    roofline: bool = True,
    peaks: str | Path | dict[str, Any] | None = None,
    cache: bool = True,
    loader_traces: Sequence[str | Path] | None = None,
    pack_args: bool = False,
) -> Report:
    """Analyse a trace (or a path to one) over the whole trace or the given steps.

    A trace of several ranks is analysed rank by rank and merged (:func:`merge`); its report
    has a ``ranks`` section.  ``roofline``: add FLOPs, bytes and the compute/memory/overhead
    bound per op (the first report on a CPU trace measures the CPU's peaks once, about a
    second, then caches them); ``peaks``: a JSON file or dict overriding device peaks.

    ``source`` may also be a glob pattern or a list of rank files; ``cache=False`` bypasses
    the ingest cache.  (``opscope.analyze`` adds ``cluster=``: :mod:`opscope.analysis.api`.)
    ``loader_traces``: the traces of the DataLoader's worker processes (files or globs) that
    break the critical path's ``data_loading`` down (``critical_path.data_loading``,
    :mod:`opscope.analysis.critical.loader`); one process's trace only.
    ``pack_args``: hold a one-process trace compactly once the index has read it
    (:meth:`Trace.compact`; the trace keeps it so): its ``args`` text compressed, out of its
    event table (:meth:`Trace.pack_args`, about 95 bytes an event less for the rest of the
    analysis), its string columns made of the index's codes (:meth:`Trace.share_codes`,
    about 27) and its link columns held as the index's rows (:meth:`Trace.hold_links`, 24).
    """
    if isinstance(source, Trace):
        trace = source
    elif isinstance(source, (str, Path)):  # a path, or a glob pattern of rank files
        from opscope.trace.formats.listing import is_pattern

        trace = load(source, cache=cache)
        if is_pattern(source):
            source = trace  # its run info is found through the files it matched
    else:
        from opscope.trace.formats.listing import job_files, load_job

        trace = load_job(job_files(list(source)), cache=cache)
        source = trace
    run_info = run_info_of(source)
    tell("analyse", 0, trace.events.num_rows)
    if len(set(trace.meta.ranks)) <= 1:
        if pack_args:
            between_parts()  # the read's freed temporaries back before the compaction's own
            trace.compact()
        single = _analyze_rank(
            trace, steps=steps, findings=findings, roofline=roofline, peaks=peaks, run_info=run_info
        )
        note_unreadable(single, trace.meta.unreadable)
        if loader_traces:
            with_loader(single, trace, loader_traces, cache=cache)
        return single
    if loader_traces:
        raise OpscopeError(
            "loader traces: give them with one process's trace (a rank's), not a job of "
            f"{len(set(trace.meta.ranks))} ranks"
        )
    # a job's modules (its path joined across ranks, about 12 ms of imports) are a job's only
    from opscope.analysis.critical.job import job_paths
    from opscope.analysis.job_files import not_one_job
    from opscope.analysis.rank_split import rank_traces

    reason = not_one_job(trace)
    if reason is not None:
        raise MixedJobsError(reason)
    traces = rank_traces(trace)
    parts = []
    for i, t in enumerate(traces):
        tell("rank", i, len(traces))
        parts.append(
            job_rank(
                t, steps=steps, findings=findings, roofline=roofline, peaks=peaks, run_info=run_info
            )
        )
    tell("rank", len(traces), len(traces))
    # the job's critical path needs the ranks' events: it is joined here, not in the merge
    got = matching(parts)
    by_rank = {int(t.meta.ranks[0]): t for t in traces}
    paths = job_paths(by_rank, got.records, got.instances, steps)
    for part in parts:
        if part.rank in paths.per_rank:
            part.extra["critical_path"] = paths.per_rank[part.rank]
    report = merge(
        parts,
        trace=trace,
        window_steps=steps,
        run_info=run_info,
        unreadable=trace.meta.unreadable,
        matched=got,
    )
    if paths.job is not None:
        report.extra["critical_path"] = paths.job
    if paths.measure is not None:  # the job's own findings, measured against the job path
        add_savings(report, paths.measure)
    if report.job is not None:  # what ingestion noticed is the whole trace's
        report.job["source"]["warnings"] = list(trace.meta.warnings)
        report.job["source"]["skipped"] = dict(trace.meta.skipped)
    return report


__all__ = ["add_savings", "analyze", "job_rank", "run_info_of"]
