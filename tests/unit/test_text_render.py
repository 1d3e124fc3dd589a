"""Terminal renderers print trace strings literally: rich markup in an op name is not markup."""

from __future__ import annotations

from opscope.analysis.pipeline import analyze
from opscope.render import text
from opscope.trace import load_document

NAME = "aten::index[/bold][red]x"


def _doc() -> dict[str, object]:
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": NAME, "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "[bold]aten::add",
            "pid": 1,
            "tid": 1,
            "ts": 20.0,
            "dur": 5.0,
        },
    ]
    return {"traceEvents": ev}


def test_text_renderer_does_not_interpret_markup_in_trace_strings() -> None:
    out = text.render_text(analyze(load_document(_doc(), "[red]markup.json")).to_dict(), width=100)
    assert NAME in out
    assert "[bold]aten::add" in out
    assert "[red]markup.json" in out


def test_the_details_a_recommendation_points_at_are_shown() -> None:
    finding = {
        "kind": "idle_gaps",
        "severity": "high",
        "title": "Device idle",
        "time_at_stake_us": 10.0,
        "recommendation": "Find what the host does in these gaps (see details.host_activity).",
        "details": {"host_activity": {"loader": 300.0, "## forward ##": 1200.0}, "n": 3},
    }
    assert text.referenced_details(finding) == [
        "host activity: ## forward ## 1.20 ms, loader 300 µs"
    ]
    assert text.referenced_details({**finding, "recommendation": "no pointer"}) == []
    data = {"findings": [finding]}
    lines = text.referenced_details(data["findings"][0])
    assert lines and "loader" in lines[0]
