"""Explorer performance on a large trace: first paint and pan/zoom frame times in Chromium.

Builds a synthetic Kineto trace of about 1M events (steps of nested framework ops, runtime
launches and device kernels linked by correlation, like a real GPU trace), serves it with the
explorer on 127.0.0.1, opens the timeline in headless Chromium and prints:

* explore to first paint: ``opscope explore FILE`` started as a process on the trace written to
  disk (cold cache) -> the first timeline frame drawn with data in the browser (goal <= 4 s at
  1M events; the timeline does not wait for the analysis, which the server runs meanwhile);
* server start: ingest + analysis + viewport index (seconds);
* first paint: navigation start -> first timeline frame drawn with data (ms);
* frames: time to draw one frame (the canvas work) while zooming with the wheel, panning by drag
  and holding W/A/S/D, median / p95 / max (ms), and the viewport queries' latency.

Run:  .venv/bin/python benchmarks/explorer.py [--events 1000000]
Needs Playwright for Python and /usr/bin/chromium.  Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OPS = ("aten::linear", "aten::layer_norm", "aten::gelu", "aten::add", "aten::mul")


def synthetic_trace(n_events: int) -> dict[str, Any]:
    """~n_events Kineto events: ProfilerStep > op > child op > launch -> kernel (4 per group)."""
    per_step = 250
    steps = max(1, n_events // (4 * per_step))
    ev: list[dict[str, Any]] = []
    t = 1000.0
    corr = 0
    gpu_t = t
    for s in range(steps):
        step_start = t
        for i in range(per_step):
            name = OPS[i % len(OPS)]
            corr += 1
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": name,
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 9.0,
                    "args": {"External id": corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": name + "_impl",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 1,
                    "dur": 7.0,
                    "args": {"External id": corr},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 2,
                    "dur": 4.0,
                    "args": {"correlation": corr},
                }
            )
            gpu_t = max(gpu_t, t + 5)
            kdur = 3.0 + (i % 7)
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"kernel_{name[6:]}_{i % 3}",
                    "pid": 0,
                    "tid": 7,
                    "ts": gpu_t,
                    "dur": kdur,
                    "args": {"correlation": corr, "stream": 7, "device": 0},
                }
            )
            gpu_t += kdur + 0.5
            t += 10.0
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s}",
                "pid": 1,
                "tid": 1,
                "ts": step_start - 0.5,
                "dur": t - step_start + 0.4,
                "args": {},
            }
        )
        t += 20.0
    return {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}]}


def first_paint(path: Path, timeout_s: float = 600.0) -> dict[str, Any]:
    """Seconds from starting ``opscope explore PATH`` (cold cache) to its server listening
    (``listen_s``), to the first timeline frame drawn with data (``paint_s``; ``preview``:
    that frame was the head of a large trace, shown while the whole trace loads), to the
    whole trace on the timeline (``loaded_s``) and to the summary and findings shown
    (``ready_s``); a stage not reached within ``timeout_s`` is None, with ``error`` naming it
    and the page's own errors (``page_errors``)."""
    import os
    import re
    import subprocess
    import sys
    import tempfile

    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, OPSCOPE_CACHE_DIR=str(Path(d) / "cache"), PYTHONUNBUFFERED="1")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            t0 = time.perf_counter()
            t_paint: float | None = None
            t_ready: float | None = None
            t_loaded: float | None = None
            preview = False
            failed: str | None = None
            cmd = [sys.executable, "-m", "opscope", "explore", str(path), "--no-open"]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
            try:
                assert proc.stdout is not None
                line = proc.stdout.readline()
                m = re.search(r"(http://\S+)", line)
                if not m:
                    raise SystemExit(f"explore did not start: {line!r}")
                t_listen = time.perf_counter() - t0
                page.goto(m.group(1) + "#timeline")
                try:
                    page.wait_for_function(
                        "() => window.__opscope && window.__opscope.firstPaint !== null",
                        timeout=timeout_s * 1000,
                    )
                    t_paint = time.perf_counter() - t0
                    preview = page.get_attribute("body", "data-preview") == "1"
                    if preview:  # the trace's head painted: the whole trace replaces it
                        page.wait_for_function(
                            "() => document.body.dataset.loaded === '1'", timeout=timeout_s * 1000
                        )
                        t_loaded = time.perf_counter() - t0
                    page.wait_for_function(
                        "() => document.body.dataset.ready === '1'", timeout=timeout_s * 1000
                    )
                    t_ready = time.perf_counter() - t0
                except PlaywrightTimeout:
                    stage = (
                        "first paint"
                        if t_paint is None
                        else "whole trace on the timeline"
                        if preview and t_loaded is None
                        else "summary shown"
                    )
                    failed = f"{stage} not reached within {timeout_s:.0f} s"
            finally:
                proc.terminate()
                proc.wait(10)
            browser.close()
    out: dict[str, Any] = {
        "listen_s": t_listen,
        "paint_s": t_paint,
        "preview": preview,
        "loaded_s": t_loaded if preview else t_paint,
        "ready_s": t_ready,
    }
    if failed is not None:
        out["error"] = failed
        out["page_errors"] = errors[:5]
    return out


def explore_to_first_paint(doc: dict[str, Any]) -> None:
    """Wall time from starting ``opscope explore`` to the first timeline frame with data."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "synthetic.json"
        path.write_text(json.dumps(doc))
        got = first_paint(path)
    if got["paint_s"] is None or got["ready_s"] is None:
        print(f"explore: {got['error']} (serving after {got['listen_s']:.2f} s)")
        return
    print(
        f"explore to first paint: {got['paint_s']:.2f} s"
        f"{' (a preview: the trace head)' if got['preview'] else ''} (serving after "
        f"{got['listen_s']:.2f} s; whole trace on the timeline after {got['loaded_s']:.2f} s; "
        f"summary and findings shown after {got['ready_s']:.2f} s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    args = ap.parse_args()
    explore_to_first_paint(synthetic_trace(args.events))

    from playwright.sync_api import sync_playwright

    from opscope.analysis.pipeline import analyze
    from opscope.explorer.data import Session, Side
    from opscope.explorer.server import ExplorerServer
    from opscope.trace import load_document

    t = time.perf_counter()
    doc = synthetic_trace(args.events)
    trace = load_document(doc, "synthetic.json")
    del doc
    t_ingest = time.perf_counter() - t
    t = time.perf_counter()
    report = analyze(trace)
    t_analyze = time.perf_counter() - t
    t = time.perf_counter()
    side = Side.from_trace(trace, report)
    _ = side.index
    t_index = time.perf_counter() - t
    print(f"trace: {len(trace):,} events")
    print(
        f"server start: ingest {t_ingest:.1f} s, analyze {t_analyze:.1f} s, index {t_index:.2f} s"
    )
    idx = side.index
    for px in (1400, 4200):
        q = time.perf_counter()
        w = idx.window(None, 0, idx.span_ns, px)
        print(
            f"full-view query at {px} px: {1e3 * (time.perf_counter() - q):.0f} ms, "
            f"{sum(len(x['ev']['id']) for x in w['lanes'])} events + aggregated {w['aggregated']:,}"
        )

    server = ExplorerServer(Session(side), "127.0.0.1", 0)
    server.start_background()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(server.url + "#timeline")
            page.wait_for_function(
                "() => window.__opscope && window.__opscope.firstPaint !== null", timeout=60_000
            )
            fp = page.evaluate("window.__opscope.firstPaint")
            print(f"first paint (navigation -> timeline drawn with data): {fp:.0f} ms")
            page.evaluate("window.__opscope.frames.length = 0")
            box = page.locator("#tl-canvas").bounding_box()
            assert box is not None
            cx, cy = box["x"] + box["width"] * 0.6, box["y"] + 120
            page.mouse.move(cx, cy)
            wall: list[float] = []
            for i in range(40):  # zoom in, then out, with the wheel
                s = time.perf_counter()
                page.mouse.wheel(0, -120 if i < 25 else 120)
                page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")
                wall.append(1e3 * (time.perf_counter() - s))
            page.mouse.down()
            for i in range(30):  # drag to pan
                page.mouse.move(cx - 10 * i, cy)
            page.mouse.up()
            page.locator("#tl-canvas").focus()
            for key in ("w", "d", "s", "a"):
                page.keyboard.down(key)
                page.wait_for_timeout(400)
                page.keyboard.up(key)
            page.wait_for_timeout(300)
            frames = page.evaluate("Array.from(window.__opscope.frames)")
            fetches = page.evaluate("window.__opscope.fetches")
            frames.sort()
            p95 = frames[int(0.95 * (len(frames) - 1))]
            print(
                f"frames: {len(frames)} drawn, median {statistics.median(frames):.1f} ms, "
                f"p95 {p95:.1f} ms, max {frames[-1]:.1f} ms; {fetches} viewport fetches"
            )
            wall.sort()
            print(
                f"wheel step -> next animation frame (round trip through the test driver): "
                f"median {statistics.median(wall):.1f} ms"
            )
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
