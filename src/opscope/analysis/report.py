"""The report: everything the analysis says about one trace, as data (schema ``opscope.report/1``).

Renderers turn it into text, JSON, Markdown or HTML; no analysis happens there.
``analyze(trace)`` is the single entry point.  The unit of analysis is one rank
(:class:`~opscope.analysis.job.RankReport`): a trace of several ranks is analysed rank by rank
and its report is :func:`merge` of the rank reports, which needs no events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson

from opscope.analysis import clocks, job
from opscope.analysis.beside import beside
from opscope.analysis.collective_match import match_collectives, stragglers
from opscope.analysis.collectives import collective_records
from opscope.analysis.critical import section as critical
from opscope.analysis.critical.fixes import Fix
from opscope.analysis.critical.job import job_paths
from opscope.analysis.critical.model import Graph
from opscope.analysis.critical.path import plain
from opscope.analysis.distributed import distributed_section, has_distributed
from opscope.analysis.findings import Context, run_rules
from opscope.analysis.instance_table import Instances
from opscope.analysis.job import RankReport
from opscope.analysis.job_files import not_one_job
from opscope.analysis.job_findings import (
    comm_bandwidth,
    discount_waits,
    job_findings,
    rerank,
    straggler_why,
    window_notes,
    worst_arrivals,
)
from opscope.analysis.job_role import chosen_rank
from opscope.analysis.kernels import KernelRow, kernel_table
from opscope.analysis.optable import OpTable, op_table, select_window
from opscope.analysis.roofline import Roofline, annotate
from opscope.analysis.roofline import roofline as roofline_of_report
from opscope.analysis.steps import StepStats, step_compute, step_stats
from opscope.analysis.timeline import TimelineSummary, timeline_summary
from opscope.trace import Trace, load
from opscope.trace.gcpause import collector_paused
from opscope.trace.jobs import MixedJobsError
from opscope.trace.model import TraceMeta

REPORT_SCHEMA = "opscope.report/1"


def _plain_but(doc: dict[str, Any], made: set[int]) -> dict[str, Any]:
    """:func:`~opscope.analysis.critical.path.plain` of a document, except the lists whose
    ids are in ``made``, which are kept as they are (its dicts are walked to find them)."""

    def copy(v: Any) -> Any:
        if id(v) in made:
            return v
        if type(v) is dict:
            return {k: copy(x) for k, x in v.items()}
        return plain(v)

    return {k: copy(v) for k, v in doc.items()}


@dataclass
class Report:
    """The analysis of one rank, or the merge of a job's ranks (``ranks`` then holds them and
    ``trace`` is the job's event table, or None when the ranks were analysed elsewhere).
    ``print(report)`` shows the text report when the caller gave one (:attr:`text_renderer`:
    ``opscope.analyze`` does, from the renderer registry; the analysis never imports a
    renderer), else the dataclass ``repr``."""

    def __str__(self) -> str:
        if self.text_renderer is None:
            return repr(self)
        return self.text_renderer(self.to_dict(lazy=True))

    trace: Trace | None
    ops: OpTable
    kernels: list[KernelRow]
    timeline: TimelineSummary
    steps: list[StepStats]
    window_steps: tuple[int, int] | None
    findings: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    run_info: dict[str, Any] | None = None  # run.json when the trace came from a run folder
    roofline: Roofline | None = None
    ranks: list[RankReport] = field(default_factory=list)  # a job's ranks (empty: one rank)
    job: dict[str, Any] | None = None  # a job's merged source/device/window sections
    # one rank's collective records (analysis.collectives); they travel in its RankReport,
    # not in the report document
    collectives: list[dict[str, Any]] = field(default_factory=list)
    # how str(report) reads: a renderer of the report document (document -> text), or None
    text_renderer: Callable[[dict[str, Any]], str] | None = field(
        default=None, repr=False, compare=False
    )

    def head(self) -> dict[str, Any]:
        """The ``source``, ``device`` and ``window`` sections (a job's, when merged), without
        building the rest of the document."""
        if self.job is not None:
            return {k: dict(self.job[k]) for k in ("source", "device", "window")}
        if self.trace is None:
            raise ValueError("a report of one rank needs its trace")
        meta = self.trace.meta
        device = self.trace.device.to_dict()
        captured = (self.run_info or {}).get("device")
        if isinstance(captured, dict) and captured.get("kind") == device["kind"]:
            # the run folder knows the device's full name (the trace only knows its kind)
            device["name"] = captured.get("name") or device["name"]
        source: dict[str, Any] = {
            "paths": meta.paths,
            "format": meta.format,
            "ranks": meta.ranks,
            "events": len(self.trace),
            "warnings": meta.warnings,
            "skipped": meta.skipped,
        }
        if meta.unreadable:
            source["unreadable"] = [dict(u) for u in meta.unreadable]
        if self.trace.graph_capture is not None:
            source["graph_capture"] = self.trace.graph_capture.to_dict()
        return {
            "source": source,
            "device": device,
            "window": {
                "start_ns": self.timeline.start_ns,
                "end_ns": self.timeline.end_ns,
                "steps": [s.step for s in self.steps if self._in_window(s.step)],
                "selection": None if self.window_steps is None else list(self.window_steps),
            },
        }

    @collector_paused()
    def to_dict(self, *, lazy: bool = False) -> dict[str, Any]:
        """The ``opscope.report/1`` document, plain JSON-ready data.  ``lazy``: keep the
        critical path's ``segments`` as a :class:`~opscope.analysis.critical.path.Segments`
        sequence (built only when read; ``orjson.dumps(doc, default=json_default)`` writes
        it in one C pass): what the front-ends take, since a large path has a million
        pieces that a text report never reads."""
        head = self.head()
        device = {**head["device"], "peaks": {}}
        if self.ops.device_is_host:
            device["note"] = (
                "CPU-only trace: the device is the CPU; device columns hold each computing op's "
                "own (self) time"
            )
        out: dict[str, Any] = {
            "schema": REPORT_SCHEMA,
            "source": head["source"],
            "device": device,
            "window": head["window"],
            "summary": job.summary(self.timeline, self.ops),
            "steps": [s.to_dict() for s in self.steps if self._in_window(s.step)],
            "ops": [r.to_dict() for r in self.ops.rows],
            "op_shapes": [r.to_dict() for r in self.ops.by_shape],
            "kernels": [k.to_dict() for k in self.kernels],
            "findings": self.findings,
        }
        # rows made anew by this call, of scalars only: not copied again below (thousands of
        # shape rows cost more to copy than the rest of the document)
        fresh = [out["steps"], out["ops"], out["op_shapes"]]
        if self.ranks:
            out["ranks"] = [job.rank_summary(r) for r in self.ranks]
            if len(self.ranks) > 1:  # a job's headline figures per rank: max and median
                out["summary"]["per_rank"] = job.per_rank_figures(self.ranks)
        out.update(self.extra)
        if self.roofline is not None:
            annotate(out, self.roofline)
            out["roofline"] = self.roofline.to_dict()
            fresh += [out["roofline"]["ops"], out["roofline"]["op_shapes"]]
        if lazy:
            return out
        made = {id(rows) for rows in fresh}
        return _plain_but(out, made)

    def _in_window(self, step: int) -> bool:
        if self.window_steps is None:
            return True
        return self.window_steps[0] <= step <= self.window_steps[1]


def _run_info(source: Trace | str | Path) -> dict[str, Any] | None:
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


def rank_report(report: Report, rank: int | None = None) -> RankReport:
    """The :class:`RankReport` of a one-rank report (its events are not kept)."""
    head = report.head()
    src = head["source"]
    rank = int(rank if rank is not None else (src["ranks"] or [0])[0])
    source = {k: src[k] for k in ("paths", "format", "events", "warnings", "skipped")}
    if report.trace is not None:
        meta = report.trace.meta
        source["rank_source"] = meta.rank_origin.get(rank, "order")
        info = meta.distributed_info or {}
        world = info.get("world_size") if isinstance(info, dict) else None
        source["world_size"] = world if isinstance(world, int) and world > 0 else None
    return RankReport(
        rank=rank,
        source=source,
        device=head["device"],
        window=head["window"],
        ops=report.ops,
        kernels=report.kernels,
        timeline=report.timeline,
        steps=[s for s in report.steps if report._in_window(s.step)],
        findings=report.findings,
        roofline=report.roofline,
        collectives=list(report.collectives),
        extra={k: v for k, v in report.extra.items() if k != "distributed"},
        step_compute_us=_step_compute(report),
    )


def _step_compute(report: Report) -> dict[int, float]:
    """Each step of the report's window: its compute (none without the trace)."""
    if report.trace is None:
        return {}
    return {k: v for k, v in step_compute(report.trace).items() if report._in_window(k)}


def merge(
    ranks: list[RankReport],
    *,
    trace: Trace | None = None,
    window_steps: tuple[int, int] | None = None,
    run_info: dict[str, Any] | None = None,
    unreadable: Sequence[dict[str, Any]] = (),
    matched: Matching | None = None,
) -> Report:
    """The job report of rank reports (see :mod:`opscope.analysis.job`): no events needed;
    ``trace``, when given, is kept for renderers that draw the timeline.  ``unreadable``: the
    job's files that could not be read (``TraceMeta.unreadable``), named in ``source`` and,
    where their rank is known, in ``distributed.missing_ranks``.  ``matched``: the
    :func:`matching` of these ranks, when the caller has made it (else it is made here)."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    ops = job.merge_op_tables([r.ops for r in ranks])
    timeline = job.merge_timelines([r.timeline for r in ranks])
    steps = job.merge_steps(ranks)
    report = Report(
        trace=trace,
        ops=ops,
        kernels=job.merge_kernels([r.kernels for r in ranks]),
        timeline=timeline,
        steps=steps,
        window_steps=window_steps,
        findings=[],
        run_info=run_info,
        roofline=job.merge_rooflines([r.roofline for r in ranks if r.roofline], ops),
        ranks=ranks,
    )
    if has_distributed(ranks):
        report.extra["distributed"] = _distributed(ranks, matched)
    dist = report.extra.get("distributed") or {}
    waits = {r["rank"]: r.get("wait_us") for r in dist.get("per_rank") or []}
    found_in = [replace(r, findings=discount_waits(r, waits.get(r.rank))) for r in ranks]
    report.findings = job.merge_findings(
        found_in, job_findings(ranks, timeline.wall_us, dist.get("stragglers") or [], dist)
    )
    report.job = {
        "source": job.merge_sources(ranks),
        "device": job.merge_devices(ranks),
        "window": {
            "start_ns": timeline.start_ns,
            "end_ns": timeline.end_ns,
            "steps": sorted({s.step for s in steps}),
            "selection": None if window_steps is None else list(window_steps),
        },
    }
    note_unreadable(report, unreadable)
    return report


def note_unreadable(report: Report, unreadable: Sequence[dict[str, Any]]) -> None:
    """Name the job's files that could not be read: ``source.unreadable`` and their ranks (from
    the file names) among ``distributed.missing_ranks`` (the world size names the others)."""
    if not unreadable:
        return
    if report.job is not None:
        report.job["source"]["unreadable"] = [dict(u) for u in unreadable]
    dist = report.extra.get("distributed")
    if isinstance(dist, dict):
        known = {int(u["rank"]) for u in unreadable if u.get("rank") is not None}
        present = set(dist.get("ranks") or [])
        dist["missing_ranks"] = sorted((set(dist.get("missing_ranks") or []) | known) - present)


class Matching(NamedTuple):
    """A job's collectives matched across its ranks (:func:`matching`)."""

    records: dict[int, list[dict[str, Any]]]  # each rank's, on one clock where applied
    instances: Instances
    warnings: list[str]
    clock: dict[str, Any]


def matching(ranks: Sequence[RankReport]) -> Matching:
    """The ranks' collective records (on one clock where the data support it), matched."""
    records = {r.rank: r.collectives for r in ranks}
    clock = clocks.estimate(records)
    if clock["applied"]:
        records = clocks.corrected(records, clock["offsets_us"])
    instances, warnings = match_collectives(records)
    return Matching(records, instances, warnings, clock)


def matched(ranks: list[RankReport]) -> tuple[dict[int, list[dict[str, Any]]], Instances]:
    """The ranks' collective records (clock-corrected where applied) and their instances."""
    got = matching(ranks)
    return got.records, got.instances


def _distributed(ranks: list[RankReport], got: Matching | None = None) -> dict[str, Any]:
    """The ``distributed`` section of a job: its ranks' collectives matched into instances
    (``got``: that matching, when the caller has it already)."""
    records, instances, warnings, clock = got if got is not None else matching(ranks)
    late = [{**s, **straggler_why(int(s["rank"]), ranks)} for s in stragglers(instances)]
    if late:
        worst = worst_arrivals(records, instances, [int(s["rank"]) for s in late])
        late = [{**s, "worst": worst.get(int(s["rank"]))} for s in late]
    notes = list(warnings) + window_notes(ranks, instances)
    return distributed_section(ranks, instances, late, notes, clock=clock)


def rank_traces(trace: Trace) -> list[Trace]:
    """One :class:`Trace` per rank of a trace of several (each rank's rows are one block of
    the event table, ids kept: evidence event ids stay valid in the whole table)."""
    ranks = list(trace.meta.ranks)
    col = np.asarray(trace.events.column("rank").to_numpy(zero_copy_only=False))
    out: list[Trace] = []
    meta = trace.meta
    for i, r in enumerate(ranks):
        rows = np.flatnonzero(col == r)
        if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
            events = trace.events.slice(int(rows[0]), len(rows))
        else:
            events = trace.events.take(rows)
        sub = Trace(events, rank_meta(meta, i, r))
        sub.neuron = trace.neuron
        out.append(sub)
    return out


def rank_meta(meta: TraceMeta, i: int, rank: int) -> TraceMeta:
    """The metadata of the ``i``-th rank (``rank``) of a job whose stacked metadata is
    ``meta``: its own path and rank, the job's device, names and the rest."""
    paths = [meta.paths[i]] if len(meta.paths) == len(meta.ranks) else list(meta.paths)
    return TraceMeta(
        paths=paths,
        format=meta.format,
        ranks=[rank],
        rank_origin={rank: meta.rank_origin.get(rank, "order")},
        device_properties=meta.device_properties,
        distributed_info=meta.distributed_info,
        base_time_ns=meta.base_time_ns,
        process_names=meta.process_names,
        thread_names=meta.thread_names,
        extra=meta.extra,
        cached=meta.cached,
        alignment=meta.alignment,
    )


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
    collectives = collective_records(trace, steps)

    def rank_path() -> tuple[Graph, dict[str, Any]]:
        graph = critical.rank_graph(trace, steps, collectives)
        return graph, critical.section(trace, graph)

    # the critical path runs beside the tables and rules where a second core pays
    fixes: list[Fix | None] = []
    with beside(rank_path, idx.n) as path_result:
        report = _rank_tables(trace, steps, collectives, roofline=roofline, peaks=peaks)
        report.run_info = run_info
        if findings:
            found = run_rules(_context(report, trace))
            report.findings = [f.to_dict() for f in found]
            fixes = [f.fix for f in found]
        if report.timeline.comm_us > 0 or report.collectives:
            section = distributed_section([rank_report(report)])
            report.extra["distributed"] = section
            extra = comm_bandwidth(section, report.timeline.wall_us, report.collectives)
            if extra and findings:
                report.findings = [*report.findings, *extra]
                fixes += [critical.comm_bandwidth_fix(trace, collectives, f) for f in extra]
        graph, report.extra["critical_path"] = path_result()
    role = trace.meta.extra.get("job_role")
    if isinstance(role, dict) and isinstance(report.extra.get("distributed"), dict):
        fixes += chosen_rank(report, role, findings)
    if findings and report.findings:
        # each finding's saving is the what-if of its fix on the window's path
        saved = critical.finding_savings(trace, graph, report.findings, fixes)
        for f, s in zip(report.findings, saved, strict=True):
            f["step_savings_us"] = s
        report.findings = rerank(report.findings)
    if trace.neuron is not None and trace.device.kind == "neuron":
        from opscope.analysis.neuron_engines import neuron_engines

        engines = neuron_engines(trace)
        if engines is not None:
            report.extra["neuron"] = engines.to_dict()
    return report


def add_savings(
    report: Report, measure: Callable[[Sequence[Mapping[str, Any]]], list[float | None]]
) -> None:
    """The job's own findings' ``step_savings_us`` (``measure``: from the job path), and the
    findings ranked again."""
    saved = measure(report.findings)
    for f, s in zip(report.findings, saved, strict=True):
        if s is not None:
            f["step_savings_us"] = s
    report.findings = rerank(report.findings)


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
) -> Report:
    """Analyse a trace (or a path to one) over the whole trace or the given steps.

    A trace of several ranks is analysed rank by rank and merged (:func:`merge`); its report
    has a ``ranks`` section.  ``roofline``: add FLOPs, bytes and the compute/memory/overhead
    bound per op (the first report on a CPU trace measures the CPU's peaks once, about a
    second, then caches them); ``peaks``: a JSON file or dict overriding device peaks.

    ``source`` may also be a glob pattern or a list of rank files; ``cache=False`` bypasses
    the ingest cache.  (``opscope.analyze`` adds ``cluster=``: :mod:`opscope.analysis.api`.)
    """
    if isinstance(source, Trace):
        trace = source
    elif isinstance(source, (str, Path)):  # a path, or a glob pattern of rank files
        from opscope.trace.formats.kineto_json import is_pattern

        trace = load(source, cache=cache)
        if is_pattern(source):
            source = trace  # its run info is found through the files it matched
    else:
        from opscope.trace.formats.kineto_json import job_files, load_files

        files, folder = job_files(list(source))
        trace = load_files(files, cache=cache, folder=folder)
        source = trace
    run_info = _run_info(source)
    if len(set(trace.meta.ranks)) <= 1:
        single = _analyze_rank(
            trace, steps=steps, findings=findings, roofline=roofline, peaks=peaks, run_info=run_info
        )
        note_unreadable(single, trace.meta.unreadable)
        return single
    reason = not_one_job(trace)
    if reason is not None:
        raise MixedJobsError(reason)
    traces = rank_traces(trace)
    parts = [
        job_rank(
            t, steps=steps, findings=findings, roofline=roofline, peaks=peaks, run_info=run_info
        )
        for t in traces
    ]
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


__all__ = [
    "REPORT_SCHEMA",
    "KernelRow",
    "Report",
    "analyze",
    "kernel_table",
    "merge",
    "rank_report",
]
