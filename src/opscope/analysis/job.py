"""The unit of analysis is one rank; a job's report is the merge of its ranks' reports.

* :class:`RankReport` - everything the analysis says about one rank: op tables, kernels, steps,
  timeline, findings, roofline and the rank's collective records.  Compact and serialisable
  (``to_dict()`` / ``from_dict()`` round-trip exactly), and holding no events: it is what a
  worker sends back when ranks are analysed elsewhere.
* :func:`merge` - the job report from rank reports alone, never the events (the way a profiler
  combines the sessions of several processes).  A single-rank trace is a job of one rank.

How a job's figures combine its ranks' (``docs/architecture.md``, "Per-rank units"):

* op and kernel tables - per name (and per name + shapes): calls, CPU and device times summed
  over the ranks, kernel min/max over the ranks, the device share over the job's device time;
* ``summary`` - wall time from the first to the last event of any rank; every device figure
  (span, busy, idle, compute, communication, copies) summed over the ranks' devices;
* ``steps`` - one row per rank and step (``rank`` says whose);
* findings - every rank's, each naming its ``rank``, ranked together by time at stake;
* roofline - FLOPs, bytes and times summed per (op, shapes), bounds placed again on the sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from opscope.analysis.critical.path import plain
from opscope.analysis.findings.finding import Finding, finding_key, renumbered
from opscope.analysis.kernels import KernelRow
from opscope.analysis.optable import OpRow, OpTable
from opscope.analysis.peaks import DevicePeaks
from opscope.analysis.roofline import Roofline, RooflineRow
from opscope.analysis.steps import StepStats
from opscope.analysis.timeline import TimelineSummary

RANK_REPORT_SCHEMA = "opscope.rank_report/1"


def _build(cls: Any, d: dict[str, Any]) -> Any:
    """A dataclass from the keys of ``d`` that are its fields (others are derived values)."""
    names = {f.name for f in fields(cls)}
    kwargs = {k: v for k, v in d.items() if k in names}
    for optional in ("input_dims", "input_types"):  # left out of a row's dict when None
        if optional in names:
            kwargs.setdefault(optional, None)
    return cls(**kwargs)


def _peaks_from_dict(d: dict[str, Any] | None) -> DevicePeaks | None:
    if not d:
        return None
    known = {"key", "name", "flops", "bandwidth", "source", "measured", "note"}
    return DevicePeaks(
        key=str(d["key"]),
        name=str(d["name"]),
        flops={str(k): float(v) for k, v in d["flops"].items()},
        bandwidth=float(d["bandwidth"]),
        source=str(d["source"]),
        note=d.get("note"),
        measured=bool(d.get("measured", False)),
        extra={k: v for k, v in d.items() if k not in known},
    )


def roofline_from_dict(d: dict[str, Any]) -> Roofline:
    """The inverse of :meth:`Roofline.to_dict`."""
    return Roofline(
        device_kind=str(d["device"]["kind"]),
        device_name=str(d["device"]["name"]),
        peaks=_peaks_from_dict(d.get("peaks")),
        ops=[_build(RooflineRow, r) for r in d["ops"]],
        op_shapes=[_build(RooflineRow, r) for r in d["op_shapes"]],
        overhead_factor=float(d["overhead_factor"]),
        notes=list(d.get("notes", [])),
    )


@dataclass
class RankReport:
    """The analysis of one rank (see the module docstring).  ``source``, ``device`` and
    ``window`` are those sections of the rank's report (``Report.head``: the device as the
    trace names it; peaks live in the roofline)."""

    rank: int
    source: dict[str, Any]
    device: dict[str, Any]
    window: dict[str, Any]
    ops: OpTable
    kernels: list[KernelRow]
    timeline: TimelineSummary
    steps: list[StepStats]
    findings: list[Finding] = field(default_factory=list)
    roofline: Roofline | None = None
    collectives: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    #: each step's compute, communication left out (:func:`opscope.analysis.steps.step_compute`)
    step_compute_us: dict[int, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RANK_REPORT_SCHEMA,
            "rank": self.rank,
            "source": self.source,
            "device": self.device,
            "window": self.window,
            "device_is_host": self.ops.device_is_host,
            "device_time_us": self.ops.device_time_us,
            "ops": [r.to_dict() for r in self.ops.rows],
            "op_shapes": [r.to_dict() for r in self.ops.by_shape],
            "kernels": [k.to_dict() for k in self.kernels],
            "timeline": self.timeline.to_dict(),
            "steps": [s.to_dict() for s in self.steps],
            "findings": [f.to_dict() for f in self.findings],
            "roofline": self.roofline.to_dict() if self.roofline is not None else None,
            "collectives": self.collectives,
            "extra": plain(self.extra),  # JSON-ready: the path's segments as a list
            "step_compute_us": {str(k): v for k, v in self.step_compute_us.items()},
        }

    def lean(self) -> RankReport:
        """This rank without its per-shape op rows, kernels and roofline, once they are folded
        into the job's tables (:class:`opscope.analysis.job_tables.TableFold`): what a job's
        report still reads of a rank (its per-name op rows, timeline, steps, findings,
        collectives, critical path) at a tenth of the memory."""
        ops = OpTable(
            rows=self.ops.rows,
            device_is_host=self.ops.device_is_host,
            device_time_us=self.ops.device_time_us,
            by_shape=[],
        )
        return replace(self, ops=ops, kernels=[], roofline=None)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RankReport:
        if d.get("schema") != RANK_REPORT_SCHEMA:
            raise ValueError(f"not a rank report: schema {d.get('schema')!r}")
        return cls(
            rank=int(d["rank"]),
            source=dict(d["source"]),
            device=dict(d["device"]),
            window=dict(d["window"]),
            ops=OpTable(
                rows=[_build(OpRow, r) for r in d["ops"]],
                device_is_host=bool(d["device_is_host"]),
                device_time_us=float(d["device_time_us"]),
                by_shape=[_build(OpRow, r) for r in d["op_shapes"]],
            ),
            kernels=[_build(KernelRow, k) for k in d["kernels"]],
            timeline=_build(TimelineSummary, d["timeline"]),
            steps=[_build(StepStats, s) for s in d["steps"]],
            findings=[Finding.from_dict(f) for f in d["findings"]],
            roofline=roofline_from_dict(d["roofline"]) if d.get("roofline") else None,
            collectives=list(d.get("collectives", [])),
            extra=dict(d.get("extra", {})),
            step_compute_us={int(k): float(v) for k, v in (d.get("step_compute_us") or {}).items()},
        )


# -- merging ------------------------------------------------------------------------------------


def merge_timelines(timelines: Sequence[TimelineSummary]) -> TimelineSummary:
    """The job's wall span; device figures summed over the ranks' devices."""
    live = [t for t in timelines if t.end_ns > t.start_ns or t.wall_us > 0]
    host = all(t.device_is_host for t in timelines) if timelines else False
    if not live:
        return TimelineSummary(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, host)
    start = min(t.start_ns for t in live)
    end = max(t.end_ns for t in live)
    comm = sum(t.comm_us for t in live)
    with_comm = [t.exposed_comm_us for t in live if t.exposed_comm_us is not None]
    exposed = sum(with_comm) if with_comm else None
    return TimelineSummary(
        wall_us=(end - start) / 1e3,
        device_span_us=sum(t.device_span_us for t in live),
        device_busy_us=sum(t.device_busy_us for t in live),
        device_idle_us=sum(t.device_idle_us for t in live),
        compute_us=sum(t.compute_us for t in live),
        comm_us=comm,
        memcpy_us=sum(t.memcpy_us for t in live),
        memset_us=sum(t.memset_us for t in live),
        start_ns=start,
        end_ns=end,
        device_is_host=host,
        pre_window_device_us=sum(t.pre_window_device_us for t in live),
        exposed_comm_us=exposed,
        compute_work_us=sum(t.compute_work_us or 0.0 for t in live),
        overlap_share=(1.0 - exposed / comm) if exposed is not None and comm > 0 else None,
    )


def merge_findings(ranks: Sequence[RankReport], job: Sequence[Finding] = ()) -> list[Finding]:
    """Every rank's findings, each naming its rank, and the ``job``'s own (``rank`` None),
    ranked together and numbered anew."""
    found = list(job)
    for rr in ranks:
        found += [f.updated(rank=rr.rank, rank_finding_id=f.get("id")) for f in rr.findings]
    found.sort(key=lambda f: (*finding_key(f), -1 if f.rank is None else f.rank))
    return renumbered(found)


def merge_steps(ranks: Sequence[RankReport]) -> list[StepStats]:
    out: list[StepStats] = []
    for rr in ranks:
        for s in rr.steps:
            out.append(
                StepStats(s.step, s.wall_us, s.cpu_us, s.device_us, s.device_ops, rank=rr.rank)
            )
    return sorted(out, key=lambda s: (s.step, s.rank if s.rank is not None else -1))


def merge_sources(ranks: Sequence[RankReport]) -> dict[str, Any]:
    paths: list[str] = []
    warnings: list[str] = []
    skipped: dict[str, int] = {}
    for rr in ranks:
        paths += [p for p in rr.source.get("paths", []) if p not in paths]
        warnings += list(rr.source.get("warnings", []))
        for reason, n in (rr.source.get("skipped") or {}).items():
            skipped[reason] = skipped.get(reason, 0) + int(n)
    formats = sorted({str(rr.source.get("format")) for rr in ranks})
    return {
        "paths": paths,
        "format": formats[0] if len(formats) == 1 else "+".join(formats),
        "ranks": [rr.rank for rr in ranks],
        "events": sum(int(rr.source.get("events", 0)) for rr in ranks),
        "warnings": warnings,
        "skipped": skipped,
    }


def merge_devices(ranks: Sequence[RankReport]) -> dict[str, Any]:
    if not ranks:
        return {"kind": "cpu", "name": "CPU", "count": 0}
    first = {k: v for k, v in ranks[0].device.items() if k != "peaks"}
    names = sorted({str(rr.device.get("name")) for rr in ranks})
    kinds = sorted({str(rr.device.get("kind")) for rr in ranks})
    first["count"] = sum(int(rr.device.get("count", 1)) for rr in ranks)
    if len(names) > 1 or len(kinds) > 1:
        first["note"] = (
            f"ranks ran on different devices ({', '.join(names)}); peaks are the first rank's"
        )
    return first


def summary(timeline: TimelineSummary, ops: OpTable) -> dict[str, Any]:
    """A report's ``summary`` section: the timeline with the op table's device time and the
    CPU time of every op."""
    return {
        **timeline.to_dict(),
        "device_time_us": ops.device_time_us,
        "cpu_busy_us": sum(r.cpu_self_us for r in ops.rows),
    }


#: The timeline figures a job's summary gives per rank (max and median over the ranks).
PER_RANK_FIGURES = (
    "wall_us",
    "device_span_us",
    "device_busy_us",
    "device_idle_us",
    "comm_us",
    "exposed_comm_us",
)


def per_rank_figures(ranks: Sequence[RankReport]) -> dict[str, dict[str, float]]:
    """``{figure: {"max", "median", "max_rank"}}`` over the ranks, for each of
    :data:`PER_RANK_FIGURES` some rank has: what a job's header shows (a sum of walls or
    spans over ranks is no time anyone waited)."""
    import statistics

    out: dict[str, dict[str, float]] = {}
    for name in PER_RANK_FIGURES:
        got = {r.rank: getattr(r.timeline, name) for r in ranks}
        vals = {k: float(v) for k, v in got.items() if v is not None}
        if not vals:
            continue
        top = max(vals, key=lambda k: (vals[k], -k))
        out[name] = {
            "max": vals[top],
            "median": float(statistics.median(vals.values())),
            "max_rank": top,
        }
    return out


def rank_summary(rr: RankReport) -> dict[str, Any]:
    """The compact line of one rank in a job report's ``ranks`` section."""
    top = [r.name for r in rr.ops.rows[:5] if r.device_self_us > 0]
    return {
        "rank": rr.rank,
        "paths": rr.source.get("paths", []),
        "events": rr.source.get("events", 0),
        "summary": summary(rr.timeline, rr.ops),
        "steps": [s.to_dict() for s in rr.steps],
        "findings": len(rr.findings),
        "top_findings": [f.title for f in rr.findings[:3]],
        "top_ops": top,
        "collectives": len(rr.collectives),
        "critical_path": _path_line(rr.extra.get("critical_path")),
    }


def _path_line(cp: Any) -> dict[str, Any] | None:
    """A rank's critical path in short: its length and time per label."""
    if not isinstance(cp, dict):
        return None
    return {"length_us": cp.get("length_us"), "bound_by_us": cp.get("bound_by_us")}


__all__ = [
    "RANK_REPORT_SCHEMA",
    "RankReport",
    "merge_devices",
    "merge_findings",
    "merge_sources",
    "merge_steps",
    "merge_timelines",
    "per_rank_figures",
    "rank_summary",
    "roofline_from_dict",
    "summary",
]
