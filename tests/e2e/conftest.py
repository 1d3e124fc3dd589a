"""Browser fixtures: Debian's Chromium driven by Playwright (no browser download), and explorer
servers on 127.0.0.1 that every test stops.  Everything skips with the reason when Chromium or
Playwright is absent.  Screenshots go to test-artifacts/ (gitignored)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium not present: browser tests skipped")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed: browser tests skipped"
    )
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page that records console errors and page errors in ``page.errors``."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    pg.errors = errors
    try:
        yield pg
    finally:
        ctx.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """``serve(path_or_trace, [b])`` -> the URL of an explorer on 127.0.0.1 (stopped after)."""
    from opscope.explorer.data import Session, Side
    from opscope.explorer.server import ExplorerServer
    from opscope.trace import Trace, load

    servers: list[ExplorerServer] = []

    def start(a: Any, b: Any = None) -> str:
        def side(x: Any) -> Side:
            return Side.from_trace(x if isinstance(x, Trace) else load(Path(x)))

        server = ExplorerServer(
            Session(side(a), side(b) if b is not None else None), "127.0.0.1", 0
        )
        server.start_background()
        servers.append(server)
        return server.url

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def shot() -> Callable[[Any, str], Path]:
    def take(pg: Any, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"explorer-{name}.png"
        pg.screenshot(path=str(path))
        return path

    return take
