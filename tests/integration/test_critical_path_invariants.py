"""What holds for the critical path and the findings' savings on every shared trace:

* each step's path is its wall (the report's ``steps[].wall_us``) within 2 %, and the time per
  label adds up to the path, as do the window path's segments;
* an ``untraced`` piece names no event, and its evidence names the thread and the events on
  either side, which exist;
* every finding's ``step_savings_us`` is at most its time at stake and at most the path;
* a hotspot's saving is the what-if its ``details.what_if`` spec gives (the same number
  ``opscope report --what-if`` prints), within 2 %;
* a fix that leaves the window's path alone (``fixes.off_the_path``: not solved again)
  saves exactly what solving its what-if gives;
* a fix whose factors all lie in [0, 1] (``fixes.only_lowers``, which lets the savings skip
  a pass over every edge) weighs no edge more than the graph does.

A trace with graph replays and a capture beside it is checked as read and with the capture
merged (the golden reports' ``+graph_capture`` cases).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from golden_reports import CAPTURED, SHARED, cases
from opscope.analysis.critical.fixes import fix_savings, fix_weights, off_the_path, only_lowers
from opscope.analysis.critical.section import rank_graph, what_if, window_path
from opscope.analysis.pipeline import analyze
from opscope.trace import load

pytestmark = pytest.mark.shared

TRACES = [c for c in cases() if c.startswith("traces/") and "capture_traces/" not in c]
#: the analysed reports (their findings, with their fixes), by case
_REPORTS: dict[str, Any] = {}


@cache
def _analysed(rel: str) -> tuple[Any, dict[str, Any]] | None:
    try:
        trace = load(SHARED / rel.removesuffix(CAPTURED))
    except Exception:  # a file opscope refuses (an execution trace): nothing to check
        return None
    if rel.endswith(CAPTURED):  # graph replays attributed to the captured ops
        from opscope.trace.graphs import with_captures

        trace = with_captures(trace, SHARED / rel.removesuffix(CAPTURED))
        assert trace.graph_capture is not None and trace.graph_capture.matched_kernels > 0
    report = analyze(trace)
    _REPORTS[rel] = report
    return trace, report.to_dict()


def _report(rel: str) -> tuple[Any, dict[str, Any]]:
    got = _analysed(rel)
    if got is None or not got[1].get("critical_path"):
        pytest.skip(f"{rel}: no report with a critical path")
    return got


@pytest.mark.parametrize("rel", TRACES)
def test_each_step_s_path_is_its_wall(shared: Callable[[str], Path], rel: str) -> None:
    _trace, doc = _report(rel)
    cp = doc["critical_path"]
    walls = {s["step"]: s["wall_us"] for s in doc.get("steps") or []}
    assert {s["step"] for s in cp["steps"]} == set(walls)
    for s in cp["steps"]:
        assert s["wall_us"] == pytest.approx(walls[s["step"]])
        assert s["length_us"] == pytest.approx(walls[s["step"]], rel=0.02), s
        assert sum(s["bound_by_us"].values()) == pytest.approx(s["length_us"], abs=0.01)
    assert sum(cp["bound_by_us"].values()) == pytest.approx(cp["length_us"], abs=0.01)
    assert sum(g["dur_us"] for g in cp["segments"]) == pytest.approx(cp["length_us"], abs=0.05)


@pytest.mark.parametrize("rel", TRACES)
def test_untraced_pieces_name_their_neighbours(shared: Callable[[str], Path], rel: str) -> None:
    trace, doc = _report(rel)
    ids = set(trace.events.column("id").to_pylist())
    tids = {str(t) for t in trace.events.column("tid").to_pylist()}
    for g in doc["critical_path"]["segments"]:
        if g["label"] != "untraced":
            assert "evidence" not in g
            continue
        assert g["event_id"] is None and g["name"] is None
        ev = g["evidence"]
        assert ev["thread"] in tids
        sides = [ev["before_event_id"], ev["after_event_id"]]
        assert any(x is not None for x in sides)
        assert all(x in ids for x in sides if x is not None)


@pytest.mark.parametrize("rel", TRACES)
def test_savings_are_bounded_and_hotspots_are_their_what_if(
    shared: Callable[[str], Path], rel: str
) -> None:
    trace, doc = _report(rel)
    length = float(doc["critical_path"]["length_us"])
    graph = None
    for f in doc["findings"]:
        saved = f.get("step_savings_us")
        assert saved is not None, f["kind"]
        assert 0.0 <= saved <= float(f["time_at_stake_us"]) + 1e-6, f["title"]
        assert saved <= length + 1e-6, f["title"]
        if f["kind"] == "hotspots":
            graph = graph or rank_graph(trace, None)
            answer = what_if(trace, graph, f["details"]["what_if"])
            assert saved == pytest.approx(answer["saved_us"], rel=0.02, abs=0.01), f["title"]


@pytest.mark.parametrize("rel", TRACES)
def test_a_fix_off_the_path_saves_what_solving_its_what_if_gives(
    shared: Callable[[str], Path], rel: str
) -> None:
    trace, _doc = _report(rel)
    findings = _REPORTS[rel].findings
    fixes = [f.fix for f in findings]
    if not any(fix is not None for fix in fixes):
        pytest.skip(f"{rel}: no finding with a fix")
    graph = rank_graph(trace, None)
    base = window_path(trace, graph)
    rows = [f.to_dict() for f in findings]
    solved = fix_savings(trace.index, graph, rows, fixes, base.length_ns)
    assert (
        fix_savings(trace.index, graph, rows, fixes, base.length_ns, base_edges=base.edges)
        == solved
    )


def test_fixes_off_the_path_are_found(shared: Callable[[str], Path]) -> None:
    """On the MI300X OWLv2 trace the hotspots' and the fusion's fixes lighten ops that are
    off the window's path: not solved again, they save nothing, as solving them says."""
    rel = "traces/rocm/mi300x_models/owlv2_large.json.gz"
    if rel not in TRACES:
        pytest.skip(f"{rel}: not a shared case here")
    trace, _doc = _report(rel)
    graph = rank_graph(trace, None)
    base = window_path(trace, graph)
    off = [
        f
        for f in _REPORTS[rel].findings
        if f.fix is not None
        and off_the_path(graph.weight, *fix_weights(trace.index, graph, f.fix), base.edges)
    ]
    assert len(off) >= 3 and {f.kind for f in off} >= {"hotspots", "fusion"}
    assert all(f.step_savings_us == 0.0 for f in off)


@pytest.mark.parametrize("rel", TRACES)
def test_a_fix_of_factors_up_to_one_weighs_no_edge_more(
    shared: Callable[[str], Path], rel: str
) -> None:
    trace, _doc = _report(rel)
    fixes = [f.fix for f in _REPORTS[rel].findings if f.fix is not None]
    if not fixes:
        pytest.skip(f"{rel}: no finding with a fix")
    graph = rank_graph(trace, None)
    assert int(graph.weight.min(initial=0)) >= 0
    lowering = [fix for fix in fixes if only_lowers(fix)]
    for fix in lowering:
        fixed, _keep = fix_weights(trace.index, graph, fix)
        assert bool((fixed <= graph.weight).all()), fix
