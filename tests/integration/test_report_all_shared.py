"""Every shared trace produces a report in all four formats (text, json, md, html)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opscope.analysis.pipeline import analyze
from opscope.analysis.report import REPORT_SCHEMA
from opscope.errors import TraceError
from opscope.explorer import static_html
from opscope.render import json_render, markdown, text
from opscope.trace import load

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
TRACES = sorted(
    str(p.relative_to(SHARED))
    for p in SHARED.rglob("*")
    if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz"))
)


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces not present (a user's clone)")
@pytest.mark.parametrize("rel", TRACES or ["<none>"])
def test_report_in_all_formats(rel: str) -> None:
    path = SHARED / rel
    try:
        trace = load(path)
    except TraceError as exc:
        # execution traces (graphs of ops, no timings) are refused with a reason, not reported
        assert "execution trace" in str(exc), exc
        pytest.skip(str(exc))
    report = analyze(trace)
    data = report.to_dict()
    assert data["schema"] == REPORT_SCHEMA
    assert json.loads(json_render.render_json(data))["source"]["events"] == len(trace)
    md = markdown.render_markdown(data)
    assert md.startswith("# opscope report")
    txt = text.render_text(data, width=100)
    assert max((len(line) for line in txt.splitlines()), default=0) <= 100
    page = static_html.render_html(data, trace=trace)
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert 'id="opscope-data"' in page
    for finding in data["findings"]:
        assert finding["time_at_stake_us"] >= 0
        assert 0.0 <= finding["share"] <= 1.0
