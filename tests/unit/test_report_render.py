"""Renderers: every format from one report, trace strings escaped, nothing executable."""

from __future__ import annotations

import json

import orjson
import pytest

from opscope.analysis.pipeline import analyze
from opscope.analysis.report import REPORT_SCHEMA
from opscope.explorer import static_html
from opscope.render import json_render, markdown, text
from opscope.trace import load_document

EVIL = '<img src=x onerror=alert("pwned")>'


def _trace() -> dict[str, object]:
    ev = []
    t = 1000.0
    for i in range(3):
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 100.0,
                "args": {},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": EVIL,
                "pid": 1,
                "tid": 1,
                "ts": t + 1,
                "dur": 50.0,
                "args": {"External id": i + 1},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mul",
                "pid": 1,
                "tid": 1,
                "ts": t + 2,
                "dur": 20.0,
                "args": {},
            }
        )
        t += 200
    return {"traceEvents": ev}


@pytest.fixture
def data() -> dict[str, object]:
    return analyze(load_document(_trace(), "evil.json")).to_dict()


def test_report_schema_and_tables(data: dict[str, object]) -> None:
    assert data["schema"] == REPORT_SCHEMA
    ops = {o["name"]: o for o in data["ops"]}  # type: ignore[attr-defined]
    assert ops[EVIL]["calls"] == 3
    assert ops[EVIL]["cpu_self_us"] == pytest.approx(3 * 30.0)
    assert ops["aten::mul"]["device_self_us"] == pytest.approx(60.0)  # CPU: leaf execution
    assert [s["step"] for s in data["steps"]] == [0, 1, 2]  # type: ignore[attr-defined]


def test_html_escapes_trace_strings(data: dict[str, object]) -> None:
    page = static_html.render_html(data)
    assert EVIL not in page
    assert "&lt;img src=x onerror=alert(&quot;pwned&quot;)&gt;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # the embedded data is inert JSON that cannot close its script element
    start = page.index('id="opscope-data">') + len('id="opscope-data">')
    end = page.index("</script>", start)
    embedded = json.loads(page[start:end].replace("<\\/", "</"))
    assert embedded["schema"] == REPORT_SCHEMA
    assert "</" not in page[start:end]


def test_json_markdown_text_render(data: dict[str, object]) -> None:
    assert orjson.loads(json_render.render_json(data))["schema"] == REPORT_SCHEMA
    md = markdown.render_markdown(data)
    assert "| op | calls | device calls |" in md and "share of device time |" in md
    assert "aten::mul" in md
    ops = data["ops"]
    assert isinstance(ops, list)
    row = next(r for r in ops if r["name"] == "aten::mul")
    assert f"| {row['calls']} | {row['device_calls']} |" in md
    txt = text.render_text(data, width=100)
    assert "aten::mul" in txt and "calls as torch counts them; share of all" in txt
    assert max(len(line) for line in txt.splitlines()) <= 100
