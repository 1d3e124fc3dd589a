"""The report: everything the analysis says about one trace, as data (schema ``opscope.report/1``).

Renderers (``opscope.report``) turn it into text, JSON, Markdown or HTML; no analysis happens
there.  ``analyze(trace)`` is the single entry point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from opscope.analysis.findings import Context, run_rules
from opscope.analysis.optable import OpTable, op_table, select_window
from opscope.analysis.roofline import Roofline, annotate
from opscope.analysis.roofline import roofline as roofline_of_report
from opscope.analysis.steps import StepStats, step_stats
from opscope.analysis.timeline import TimelineSummary, timeline_summary
from opscope.trace import Trace, load

REPORT_SCHEMA = "opscope.report/1"


@dataclass
class KernelRow:
    name: str
    calls: int
    device_us: float
    mean_us: float
    min_us: float
    max_us: float
    ops: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls": self.calls,
            "device_us": self.device_us,
            "mean_us": self.mean_us,
            "min_us": self.min_us,
            "max_us": self.max_us,
            "op": self.ops[0] if self.ops else None,
            "ops": self.ops,
        }


@dataclass
class Report:
    trace: Trace
    ops: OpTable
    kernels: list[KernelRow]
    timeline: TimelineSummary
    steps: list[StepStats]
    window_steps: tuple[int, int] | None
    findings: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    run_info: dict[str, Any] | None = None  # run.json when the trace came from a run folder
    roofline: Roofline | None = None

    def to_dict(self) -> dict[str, Any]:
        meta = self.trace.meta
        device = self.trace.device.to_dict()
        captured = (self.run_info or {}).get("device")
        if isinstance(captured, dict) and captured.get("kind") == device["kind"]:
            # the run folder knows the device's full name (the trace only knows its kind)
            device["name"] = captured.get("name") or device["name"]
        device["peaks"] = {}
        if self.ops.device_is_host:
            device["note"] = (
                "CPU-only trace: the device is the CPU; device columns hold the work of the "
                "computing leaf ops"
            )
        out = {
            "schema": REPORT_SCHEMA,
            "source": {
                "paths": meta.paths,
                "format": meta.format,
                "ranks": meta.ranks,
                "events": len(self.trace),
                "warnings": meta.warnings,
                "skipped": meta.skipped,
            },
            "device": device,
            "window": {
                "start_ns": self.timeline.start_ns,
                "end_ns": self.timeline.end_ns,
                "steps": [s.step for s in self.steps if self._in_window(s.step)],
                "selection": None if self.window_steps is None else list(self.window_steps),
            },
            "summary": {
                **self.timeline.to_dict(),
                "device_time_us": self.ops.device_time_us,
                "cpu_busy_us": sum(r.cpu_self_us for r in self.ops.rows),
            },
            "steps": [s.to_dict() for s in self.steps if self._in_window(s.step)],
            "ops": [r.to_dict() for r in self.ops.rows],
            "op_shapes": [r.to_dict() for r in self.ops.by_shape],
            "kernels": [k.to_dict() for k in self.kernels],
            "findings": self.findings,
            **self.extra,
        }
        if self.roofline is not None:
            annotate(out, self.roofline)
            out["roofline"] = self.roofline.to_dict()
        return out

    def _in_window(self, step: int) -> bool:
        if self.window_steps is None:
            return True
        return self.window_steps[0] <= step <= self.window_steps[1]


def _neff_names(trace: Trace, k: pa.Table) -> list[str]:
    """On Neuron every execution is ``nc_exec_running``: name it by the NEFF it ran."""
    base = int(trace.events.column("id")[0].as_py()) if len(trace) else 0
    rows = pc.subtract(k.column("id"), pa.scalar(base, pa.int64()))
    out: list[str] = []
    for name, args in zip(
        k.column("name").cast(pa.string()).to_pylist(),
        trace.events.column("args").take(rows).to_pylist(),
        strict=True,
    ):
        model = None
        if args:
            try:
                model = orjson.loads(args).get("model_name")
            except (orjson.JSONDecodeError, AttributeError):
                model = None
        out.append(f"{name} [{model}]" if model else str(name))
    return out


def kernel_table(trace: Trace, steps: tuple[int, int] | None = None) -> list[KernelRow]:
    k = select_window(trace.kernels, steps)
    k = k.filter(pc.not_equal(k.column("kind").cast(pa.string()), "annotation"))
    if k.num_rows == 0:
        return []
    names = k.column("name").cast(pa.string())
    if trace.device.kind == "neuron":
        names = pa.chunked_array([_neff_names(trace, k)], pa.string())
    t = pa.table(
        {
            "name": names,
            "dur_ns": k.column("dur_ns"),
            "op_name": k.column("op_name").cast(pa.string()),
        }
    )
    g = t.group_by("name", use_threads=False).aggregate(
        [
            ("dur_ns", "count"),
            ("dur_ns", "sum"),
            ("dur_ns", "min"),
            ("dur_ns", "max"),
            ("op_name", "distinct"),
        ]
    )
    rows = [
        KernelRow(
            name=r["name"],
            calls=r["dur_ns_count"],
            device_us=r["dur_ns_sum"] / 1e3,
            mean_us=r["dur_ns_sum"] / r["dur_ns_count"] / 1e3,
            min_us=r["dur_ns_min"] / 1e3,
            max_us=r["dur_ns_max"] / 1e3,
            ops=sorted(o for o in r["op_name_distinct"] if o is not None),
        )
        for r in g.to_pylist()
    ]
    rows.sort(key=lambda r: (-r.device_us, r.name))
    return rows


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


def analyze(
    source: Trace | str | Path,
    steps: tuple[int, int] | None = None,
    *,
    findings: bool = True,
    roofline: bool = True,
    peaks: str | Path | dict[str, Any] | None = None,
) -> Report:
    """Analyse a trace (or a path to one) over the whole trace or the given steps.

    ``roofline``: add FLOPs, bytes and the compute/memory/overhead bound per op (the first
    report on a CPU trace measures the CPU's peaks once, about a second, then caches them);
    ``peaks``: a JSON file or dict overriding device peaks.
    """
    trace = source if isinstance(source, Trace) else load(source)
    events = select_window(trace.events, steps) if steps is not None else None
    report = Report(
        trace=trace,
        ops=op_table(trace, steps),
        kernels=kernel_table(trace, steps),
        timeline=timeline_summary(trace, events),
        steps=step_stats(trace),
        window_steps=steps,
    )
    report.run_info = _run_info(source)
    if roofline:
        report.roofline = roofline_of_report(report, overrides=peaks)
    if findings:
        ctx = Context(
            trace=trace,
            op_table=report.ops,
            timeline=report.timeline,
            steps=report.steps,
            window_steps=steps,
            run_info=report.run_info,
        )
        report.findings = [f.to_dict() for f in run_rules(ctx)]
    return report
