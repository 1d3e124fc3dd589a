"""The explorer on a 2-rank job in real Chromium: lanes under rank headers that collapse and
expand, and a selected collective drawn across the ranks with the waits.  The job is synthetic
(``distjobs.write_nccl_job``) and its process group is named by the XSS probe: shown as text."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distjobs import write_nccl_job

EVIL = '<img src=x onerror=alert("pg")>'
KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)"

pytestmark = pytest.mark.e2e


def _headers(page: Any) -> dict[int, dict[str, Any]]:
    return {h["rank"]: h for h in page.evaluate("() => window.__opscope.rankHeaders")}


def test_rank_headers_collapse_and_the_collective_waits(
    page: Any, serve: Callable[..., str], tmp_path: Path, shot: Callable[[Any, str], Path]
) -> None:
    write_nccl_job(tmp_path / "job", 2, n=3, late_rank=1, late_us=120.0, pg=EVIL)
    from opscope.trace import load

    trace = load(tmp_path / "job")
    names, ids = trace.events.column("name").to_pylist(), trace.events.column("id").to_pylist()
    kernel = ids[names.index(KERNEL)]  # rank 0's first NCCL kernel
    page.goto(serve(trace) + "#timeline")
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    page.wait_for_function("() => window.__opscope && window.__opscope.lanesDrawn > 0")
    heads = _headers(page)
    assert sorted(heads) == [0, 1] and not heads[0]["closed"] and not heads[1]["closed"]
    lanes_open = page.evaluate("() => window.__opscope.lanesDrawn")
    canvas = page.locator("#tl-canvas")
    # close rank 0: its lanes go, rank 1's header moves up; open it again
    canvas.click(position={"x": 60, "y": heads[0]["y"]})
    page.wait_for_function("() => window.__opscope.collapsed.includes(0)")
    assert page.evaluate("() => window.__opscope.lanesDrawn") < lanes_open
    assert _headers(page)[1]["y"] < heads[1]["y"]
    shot(page, "ranks-collapsed")
    canvas.click(position={"x": 60, "y": heads[0]["y"]})
    page.wait_for_function("() => window.__opscope.collapsed.length === 0")
    page.wait_for_function(f"() => window.__opscope.lanesDrawn === {lanes_open}")
    # select the collective's kernel: the waits table and the instance drawn on both ranks
    page.evaluate(f"() => window.__opscope.select({kernel})")
    page.wait_for_selector("[data-testid=coll-waits] tbody tr")
    rows = page.locator("[data-testid=coll-waits] tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).get_attribute("data-rank") == "0"
    assert "120" in rows.nth(0).locator("td").nth(2).text_content()
    assert rows.nth(1).locator("td").nth(0).text_content() == "1 (last)"
    head = page.text_content("[data-testid=collective] h3")
    assert EVIL in head  # the hostile pg name as text...
    assert page.locator("img").count() == 0  # ...never as markup
    page.wait_for_function("() => window.__opscope.collectiveDrawn >= 2")
    shot(page, "ranks-collective")
    assert page.errors == [], page.errors


def test_static_report_draws_the_selected_collective(
    page: Any, tmp_path: Path, shot: Callable[[Any, str], Path]
) -> None:
    # the same job as one self-contained HTML file opened from file://: no server to ask
    write_nccl_job(tmp_path / "job", 2, n=3, late_rank=1, late_us=120.0, pg=EVIL)
    from opscope.analysis.pipeline import analyze
    from opscope.explorer import static_html
    from opscope.trace import load

    trace = load(tmp_path / "job")
    names, ids = trace.events.column("name").to_pylist(), trace.events.column("id").to_pylist()
    kernel = ids[names.index(KERNEL)]
    out = tmp_path / "report.html"
    out.write_text(static_html.render_html(analyze(trace).to_dict(), trace=trace), encoding="utf-8")
    page.goto(out.as_uri() + "#timeline")
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    page.wait_for_function("() => window.__opscope && window.__opscope.lanesDrawn > 0")
    assert sorted(_headers(page)) == [0, 1]
    page.evaluate(f"() => window.__opscope.select({kernel})")
    page.wait_for_selector("[data-testid=coll-waits] tbody tr")
    rows = page.locator("[data-testid=coll-waits] tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).get_attribute("data-rank") == "0"
    assert "120" in rows.nth(0).locator("td").nth(2).text_content()
    assert rows.nth(1).locator("td").nth(0).text_content() == "1 (last)"
    assert EVIL in page.text_content("[data-testid=collective] h3")
    assert page.locator("img").count() == 0
    page.wait_for_function("() => window.__opscope.collectiveDrawn >= 2")
    shot(page, "static-collective")
    assert page.errors == [], page.errors


def test_static_report_says_when_a_collective_was_left_out(
    page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_nccl_job(tmp_path / "job", 2, n=3, late_rank=1, late_us=120.0)
    from opscope.analysis.pipeline import analyze
    from opscope.explorer import static_html
    from opscope.trace import load

    monkeypatch.setattr(static_html, "STATIC_MAX_COLLECTIVES", 1)  # the first instance only
    trace = load(tmp_path / "job")
    names, ids = trace.events.column("name").to_pylist(), trace.events.column("id").to_pylist()
    last = [i for n, i in zip(names, ids, strict=True) if n == KERNEL][2]  # rank 0's third
    out = tmp_path / "report.html"
    out.write_text(static_html.render_html(analyze(trace).to_dict(), trace=trace), encoding="utf-8")
    page.goto(out.as_uri() + "#timeline")
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    page.evaluate(f"() => window.__opscope.select({last})")
    page.wait_for_selector("[data-testid=collective]")
    text = page.text_content("[data-testid=collective]")
    assert "not among the 1 of 3 embedded" in text
    assert page.locator("[data-testid=coll-waits]").count() == 0
    assert page.errors == [], page.errors


def test_a_jobs_same_finding_on_every_rank_is_listed_once(
    page: Any, serve: Callable[..., str], tmp_path: Path
) -> None:
    import opscope
    from opscope.render.finding_groups import group_findings

    write_nccl_job(tmp_path / "job", 3, n=3, late_rank=1, late_us=120.0)
    report = opscope.analyze(tmp_path / "job", roofline=False).to_dict()
    groups = group_findings(report["findings"])
    shared = [g for g in groups if len(g.members) > 1]
    assert shared, "the job must give a finding on several ranks"
    page.goto(serve(tmp_path / "job") + "#findings")
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    page.click("#tabs button[data-view=findings]")
    page.wait_for_selector("[data-testid=finding]")
    heads = page.locator("[data-testid=finding] h3").all_text_contents()
    assert len(heads) == len(groups) < len(report["findings"])
    # numbered as shown, without gaps (a group is one entry)
    numbers = [int(m.group(1)) for h in heads if (m := re.search(r"F(\d+)\. ", h))]
    assert numbers == list(range(1, len(heads) + 1))
    lead = shared[0].lead
    [head] = [h for h in heads if h.endswith(lead["title"])]
    assert f"[{shared[0].rank_label()}]" in head
    summary = page.locator("#summary-findings li").all_text_contents()
    assert len(summary) == min(5, len(groups))
