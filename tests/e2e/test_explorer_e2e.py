"""The explorer in real Chromium: server mode on a shared GPU trace and on a CPU trace made
here, and the static HTML report from file://.  Every test fails on a console error, a page
error or a JavaScript dialog (the XSS probe would open one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# torch writes record_function names into the JSON unescaped, so the probe recorded by the
# profiler in the CPU trace has no double quote
CPU_EVIL = "<img src=x onerror=alert(1)>"
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
BERT = SHARED / "rocm" / "mi300x_models" / "bert_small.json.gz"

pytestmark = pytest.mark.e2e


def _bert() -> Path:
    if not BERT.exists():
        pytest.skip(f"{BERT} not present (../shared/traces is not part of a user's clone)")
    return BERT


def _ready(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)


def _wait_drawn(page: Any) -> None:
    page.wait_for_function("() => window.__opscope && window.__opscope.lanesDrawn > 0")


def _no_errors(page: Any) -> None:
    assert page.errors == [], page.errors


def test_gpu_trace_lanes_top_op_chain_and_finding(
    page: Any, serve: Callable[..., str], shot: Callable[[Any, str], Path]
) -> None:
    url = serve(_bert())
    _ready(page, url)
    assert "bert_small" in page.text_content("[data-testid=source]")
    assert page.locator("#summary-ops tbody tr").count() == 10
    shot(page, "summary")
    # the timeline shows the lanes of the three groups
    page.click("#tabs button[data-view=timeline]")
    _wait_drawn(page)
    lanes = page.evaluate("() => window.__opscope.lanes")
    assert lanes == 5
    # the top op (by device time) selects its occurrences and shows a chain reaching the device
    page.click("#tabs button[data-view=ops]")
    top = page.locator("#ops-table tbody tr").first
    top_name = top.get_attribute("data-op")
    assert top_name == "aten::addmm"
    top.click()
    page.wait_for_selector("#mini-chain [data-role='device execution']")
    assert "occurrence(s) of aten::addmm" in page.text_content("[data-testid=tl-status]")
    assert page.text_content("#details .kvtable td") == "aten::addmm"
    shot(page, "timeline-op")
    page.click("#tabs button[data-view=chain]")
    hops = page.locator("#chain .chain-path").first.locator(".hop")
    roles = [hops.nth(i).get_attribute("data-role") for i in range(hops.count())]
    assert roles == ["framework op", "runtime launch", "device execution"]
    shot(page, "chain")
    # keyboard zoom (W) narrows the view; A pans
    page.click("#tabs button[data-view=timeline]")
    before = page.evaluate("() => window.__opscope.view")
    page.locator("#tl-canvas").focus()
    page.keyboard.down("w")
    page.wait_for_timeout(250)
    page.keyboard.up("w")
    after = page.evaluate("() => window.__opscope.view")
    assert after[1] - after[0] < 0.9 * (before[1] - before[0])
    page.keyboard.down("a")
    page.wait_for_timeout(150)
    page.keyboard.up("a")
    panned = page.evaluate("() => window.__opscope.view")
    assert panned[0] < after[0]
    # follow a finding to its evidence in the timeline
    page.click("#tabs button[data-view=findings]")
    page.locator("[data-testid=finding-show]").first.click()
    page.wait_for_function("() => location.hash === '#timeline'")
    assert "Δ" in page.text_content("[data-testid=measure]")
    page.wait_for_selector("#details .kvtable")
    shot(page, "finding")
    _no_errors(page)


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            with record_function(CPU_EVIL):
                y = torch.mm(x, x).relu()
            _ = (y + 1).sum()
    path = tmp_path_factory.mktemp("cpu") / "cpu_trace.json"
    prof.export_chrome_trace(str(path))
    return path


def test_cpu_trace_and_xss_probe_render_as_text(
    page: Any, serve: Callable[..., str], cpu_trace: Path, shot: Callable[[Any, str], Path]
) -> None:
    _ready(page, serve(cpu_trace))
    assert "cpu" in page.text_content("[data-testid=source]")
    page.click("#tabs button[data-view=ops]")
    page.fill("[data-testid=ops-filter]", "onerror")
    cell = page.locator("#ops-table tbody tr td.name").first
    assert cell.text_content() == CPU_EVIL  # shown as text...
    assert page.locator("img").count() == 0  # ...never parsed as markup
    cell.click()
    page.wait_for_selector("#mini-chain .hop")
    assert page.text_content("#details .kvtable td") == CPU_EVIL
    _wait_drawn(page)
    page.click("#tabs button[data-view=chain]")
    assert page.locator("#chain [data-role='framework op']").count() >= 1
    shot(page, "cpu-xss")
    assert page.locator("img").count() == 0
    _no_errors(page)


def test_static_report_from_file(
    page: Any, tmp_path: Path, shot: Callable[[Any, str], Path]
) -> None:
    from opscope.analysis.pipeline import analyze
    from opscope.explorer import static_html
    from opscope.trace import load

    trace = load(_bert())
    out = tmp_path / "report.html"
    out.write_text(static_html.render_html(analyze(trace).to_dict(), trace=trace), encoding="utf-8")
    _ready(page, out.as_uri())
    assert "Static report" in page.text_content("[data-testid=notice]")
    page.click("#tabs button[data-view=ops]")
    page.locator("#ops-table tbody tr").first.click()
    page.wait_for_selector("#mini-chain [data-role='device execution']")
    _wait_drawn(page)
    assert page.evaluate("() => window.__opscope.lanes") == 5
    shot(page, "static")
    page.click("#tabs button[data-view=findings]")
    page.locator("[data-testid=finding-show]").first.click()
    page.wait_for_selector("#details .kvtable")
    _no_errors(page)  # a CSP violation (hash mismatch) would be a console error
