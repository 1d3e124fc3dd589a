"""The report: everything the analysis says about one trace, as data (schema ``opscope.report/1``).

Renderers turn it into text, JSON, Markdown or HTML; no analysis happens there.  The analysis
that makes a report is :func:`opscope.analysis.pipeline.analyze`; a job's report is the merge
of its ranks' (:mod:`opscope.analysis.job_report`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opscope.analysis import job
from opscope.analysis.critical.path import plain
from opscope.analysis.findings.finding import Finding
from opscope.analysis.job import RankReport
from opscope.analysis.kernels import KernelRow
from opscope.analysis.optable import OpTable
from opscope.analysis.roofline import Roofline, annotate
from opscope.analysis.steps import StepStats
from opscope.analysis.timeline import TimelineSummary
from opscope.trace import Trace
from opscope.trace.gcpause import collector_paused

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
    findings: list[Finding] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    run_info: dict[str, Any] | None = None  # run.json when the trace came from a run folder
    roofline: Roofline | None = None
    ranks: list[RankReport] = field(default_factory=list)  # a job's ranks (empty: one rank)
    job: dict[str, Any] | None = None  # a job's merged source/device/window sections
    # one rank's collective records (analysis.collectives); they travel in its RankReport,
    # not in the report document
    collectives: list[dict[str, Any]] = field(default_factory=list)
    # each step's compute in µs (analysis.steps.step_compute), read while the tables are
    # made: None until then (a rank's report then reads it off its trace)
    step_compute_us: dict[int, float] | None = field(default=None, repr=False, compare=False)
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
                "steps": [s.step for s in self.steps if self.in_window(s.step)],
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
            "steps": [s.to_dict() for s in self.steps if self.in_window(s.step)],
            "ops": [r.to_dict() for r in self.ops.rows],
            "op_shapes": [r.to_dict() for r in self.ops.by_shape],
            "kernels": [k.to_dict() for k in self.kernels],
            "findings": [f.to_dict() for f in self.findings],
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

    def in_window(self, step: int) -> bool:
        """Whether ``step`` is in the report's window (every step, without a selection)."""
        if self.window_steps is None:
            return True
        return self.window_steps[0] <= step <= self.window_steps[1]


__all__ = ["REPORT_SCHEMA", "Report"]
