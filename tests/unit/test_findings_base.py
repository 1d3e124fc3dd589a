"""The finding factory, and rules that never assume event ids are row positions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from test_findings_kit import context, shared

from opscope.analysis.findings import Context, run_rules
from opscope.analysis.findings.base import make_finding, severity_of, share_of_wall
from opscope.analysis.pipeline import analyze
from opscope.trace import Trace
from opscope.trace.arrays import ints


def test_make_finding_share_and_severity() -> None:
    ctx = context(shared("cuda/critical_path_alexnet.json.gz"))
    wall = ctx.wall_us
    f = make_finding(
        ctx.wall_us,
        title="t",
        time_at_stake_us=0.05 * wall,
        evidence=[],
        recommendation="r",
    )
    assert f.share == share_of_wall(ctx, 0.05 * wall) and abs(f.share - 0.05) < 1e-12
    assert f.severity == "medium" == severity_of(0.05)
    assert f.details == {} and f.confidence == "medium"
    g = make_finding(
        ctx.wall_us,
        title="t",
        time_at_stake_us=2 * wall,
        evidence=[],
        recommendation="r",
        severity="info",
        share=0.0,
    )
    assert (g.severity, g.share) == ("info", 0.0)
    assert share_of_wall(ctx, 2 * wall) == 1.0
    assert [severity_of(x) for x in (0.2, 0.05, 0.02, 0.001)] == ["high", "medium", "low", "info"]


def _renumbered(trace: Trace, scale: int = 7, offset: int = 1000) -> Trace:
    """The same events, in the same rows, under ids that are not row positions."""
    ev = trace.events
    cols = {}
    for name in ev.column_names:
        col = ev.column(name)
        if name in ("id", "parent_id", "op_id", "launch_id"):
            old = ints(col)
            new = np.where(old >= 0, old * scale + offset, 0)
            col = pa.array(new, pa.int64(), mask=old < 0)
        cols[name] = col
    out = Trace(pa.table(cols, schema=ev.schema), trace.meta)
    return out


def _ids_back(value: Any, scale: int = 7, offset: int = 1000) -> Any:
    if isinstance(value, dict):
        return {
            k: [(i - offset) // scale for i in v] if k == "event_ids" else _ids_back(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_ids_back(v) for v in value]
    return value


def _context(trace: Trace) -> Context:
    rep = analyze(trace, findings=False, roofline=False)
    return Context(trace=trace, op_table=rep.ops, timeline=rep.timeline, steps=rep.steps)


def test_rules_on_ids_that_are_not_rows() -> None:
    for rel in (
        "cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz",
        "cpu/rank_not_found.json.gz",
    ):
        trace = shared(rel)
        other = _renumbered(trace)
        assert not other.index.contiguous
        want = [f.to_dict() for f in run_rules(_context(trace))]
        got = [_ids_back(f.to_dict()) for f in run_rules(_context(other))]
        assert want and got == want, rel


def test_the_whole_report_on_ids_that_are_not_rows() -> None:
    """Roofline and kernel names read args through the index's id -> row map, not id - base."""
    trace = shared("cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz")
    other = _renumbered(trace)
    peaks = {"devices": {"cpu": {"tflops": {"fp32": 1.0}, "bandwidth_gbs": 10.0}}}
    want = analyze(trace, peaks=peaks).to_dict()
    got = _ids_back(analyze(other, peaks=peaks).to_dict())
    assert want["roofline"]["op_shapes"] and got["roofline"] == want["roofline"]
    assert got["ops"] == want["ops"] and got["findings"] == want["findings"]
