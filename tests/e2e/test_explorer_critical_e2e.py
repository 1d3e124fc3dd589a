"""The critical path in real Chromium: the Summary's breakdown bar, the findings' notes, and
the timeline's toggle drawing the path over a recorded CUDA trace's lanes (server mode,
../shared) and across the two ranks of a synthetic NCCL job (the static file, from file://).
Every test fails on a console error, a page error or a JavaScript dialog."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distjobs import write_nccl_job

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
EVENT_SYNC = SHARED / "cuda" / "critical_path_event_sync.json.gz"

pytestmark = pytest.mark.e2e


def _ready(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=30_000)


def _timeline(page: Any) -> None:
    page.click("#tabs button[data-view=timeline]")
    page.wait_for_function("() => window.__opscope && window.__opscope.lanesDrawn > 0")


def _toggle_on(page: Any) -> int:
    assert page.evaluate("() => window.__opscope.criticalDrawn") == 0
    assert not page.is_visible("[data-testid=cp-legend]")
    page.check("[data-testid=cp-toggle]")
    page.wait_for_function("() => window.__opscope.criticalDrawn > 0", timeout=20_000)
    assert page.is_visible("[data-testid=cp-legend]")
    return int(page.evaluate("() => window.__opscope.criticalDrawn"))


def _anchored(segment: dict[str, Any]) -> bool:
    ev = segment.get("evidence") or {}
    return segment["event_id"] is not None or any(
        ev.get(k) is not None for k in ("after_event_id", "before_event_id")
    )


def test_breakdown_bar_notes_and_the_path_over_the_lanes(
    page: Any, serve: Callable[..., str], shot: Callable[[Any, str], Path]
) -> None:
    if not EVENT_SYNC.exists():
        pytest.skip(f"{EVENT_SYNC} not present (../shared/traces is not part of a user's clone)")
    from opscope.analysis.pipeline import analyze

    report = analyze(EVENT_SYNC).to_dict()
    cp = report["critical_path"]
    labels = [k for k, v in cp["bound_by_us"].items() if v > 0]
    url = serve(EVENT_SYNC)
    _ready(page, url)
    # the Summary: one part of the bar per label with time on the path, in the report's order
    parts = page.locator("[data-testid=cp-bar] > div")
    assert [parts.nth(i).get_attribute("data-label") for i in range(parts.count())] == labels
    legend = page.text_content("[data-testid=cp-bar-legend]")
    assert all(k in legend for k in labels) and "%" in legend
    shot(page, "critical-summary")
    # each finding says whether its fix can shorten the path
    page.click("#tabs button[data-view=findings]")
    notes = page.locator("[data-testid=finding-cp]").all_text_contents()
    assert len(notes) == len(report["findings"]) > 0
    for note, f in zip(notes, report["findings"], strict=True):
        on = f["step_savings_us"] > 0
        assert note.startswith("on the critical path: saves ≤" if on else "off the critical path")
    # the timeline: the whole trace in view, every segment on a lane is drawn
    _timeline(page)
    drawn = _toggle_on(page)
    # a segment is drawn by its event, or (untraced time) at the top of its evidence's lane
    assert drawn == sum(1 for s in cp["segments"] if _anchored(s))
    assert page.evaluate("() => window.__opscope.criticalLinks") > 0  # host -> runtime -> device
    legend = page.text_content("[data-testid=cp-legend]")
    assert all(k in legend for k in labels)
    assert f"critical path: {drawn} segments" in page.text_content("[data-testid=tl-status]")
    shot(page, "critical-timeline")
    # off: nothing drawn, no legend
    page.uncheck("[data-testid=cp-toggle]")
    page.wait_for_function("() => window.__opscope.criticalDrawn === 0")
    assert not page.is_visible("[data-testid=cp-legend]")
    assert page.errors == [], page.errors


def test_static_file_draws_the_job_path_across_ranks(
    page: Any, tmp_path: Path, shot: Callable[[Any, str], Path]
) -> None:
    from opscope.analysis.pipeline import analyze
    from opscope.explorer import static_html
    from opscope.trace import load

    write_nccl_job(tmp_path / "job", 2, n=3, late_rank=1, late_us=120.0, sync=True, comm_stream=8)
    trace = load(tmp_path / "job")
    report = analyze(trace).to_dict()
    out = tmp_path / "report.html"
    out.write_text(static_html.render_html(report, trace=trace), encoding="utf-8")
    _ready(page, out.as_uri())
    assert page.locator("[data-testid=cp-bar] > div").count() >= 1
    assert "job path over ranks 0, 1" in page.text_content("[data-testid=cp-breakdown]")
    _timeline(page)
    assert page.is_visible("[data-testid=cp-toggle]")
    _toggle_on(page)
    assert page.evaluate("() => window.__opscope.criticalRanks") == [0, 1]
    assert page.evaluate("() => window.__opscope.criticalLinks") > 0
    shot(page, "critical-static-job")
    assert page.errors == [], page.errors
