"""A large trace's preview in real Chromium: the timeline paints the trace's head (marked as a
preview) while the whole trace loads, then switches to the whole trace by itself and shows the
Summary.  The whole load is held back by a gate until the preview has painted.  Fails on a
console error, a page error or a JavaScript dialog."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
NCCL = SHARED / "cuda" / "a100_nccl_rank0_of2.json.gz"

pytestmark = pytest.mark.e2e


def test_the_timeline_paints_the_head_then_the_whole_trace(
    page: Any, load_gate: threading.Event, shot: Any
) -> None:
    if not NCCL.exists():
        pytest.skip(f"{NCCL} not present (../shared/traces is not part of a user's clone)")
    from opscope.explorer.data import Session
    from opscope.explorer.server import ExplorerServer
    from opscope.trace import load

    full = len(load(NCCL, cache=False))
    session = Session.open(NCCL, preview_bytes=1 << 20)
    assert session.preview is not None
    head = session.preview.describe()["events"]
    server = ExplorerServer(session, "127.0.0.1", 0)
    server.start_background()
    try:
        page.goto(server.url + "#timeline")
        page.wait_for_function("() => window.__opscope && window.__opscope.firstPaint !== null")
        assert page.get_attribute("body", "data-preview") == "1"
        state = page.evaluate("() => window.__opscope")
        assert state["lanesDrawn"] > 0 and state["events"] == head
        text = page.inner_text("[data-testid=notice]")
        assert "Preview" in text and f"{head:,}" in text, text
        assert page.get_attribute("body", "data-ready") is None  # the Summary waits
        shot(page, "preview-head")
        fetches = page.evaluate("() => window.__opscope.fetches")

        load_gate.set()
        page.wait_for_selector("body[data-loaded='1']", timeout=60_000)
        page.wait_for_selector("body[data-ready='1']", timeout=60_000)
        assert page.get_attribute("body", "data-preview") is None
        assert "whole trace is loaded" in page.inner_text("[data-testid=notice]")
        assert f"{full} events" in page.inner_text("#source")
        page.wait_for_function(f"() => window.__opscope.fetches > {fetches}")
        page.wait_for_function(f"() => window.__opscope.events === {full}")
        assert page.evaluate("() => window.__opscope.lanesDrawn") > 0
        shot(page, "preview-whole")
        assert not page.errors, page.errors
    finally:
        server.stop()
