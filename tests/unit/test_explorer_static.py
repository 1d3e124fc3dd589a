"""The static explorer page: hash-based CSP that matches the inline script, inert embedded data,
a bounded level-of-detail timeline, and the report renderer's contract."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

import pytest
from test_explorer_api import EVIL, gpu_doc  # same folder (rootdir on sys.path)

from opscope.analysis.pipeline import analyze
from opscope.explorer import static_html
from opscope.trace import load_document


def _blocks(page: str) -> dict[str, Any]:
    out = {}
    for m in re.finditer(
        r'<script type="application/json" id="([\w-]+)">(.*?)</script>', page, re.S
    ):
        assert "<" not in m.group(2)
        out[m.group(1)] = json.loads(m.group(2))
    return out


def _sha(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_csp_hashes_match_inline_script_and_style() -> None:
    tr = load_document(gpu_doc(), "evil.json")
    page = static_html.render_html(analyze(tr).to_dict(), trace=tr)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "unsafe-inline" not in csp and "default-src 'none'" in csp
    scripts = re.findall(r'<script type="module">(.*?)</script>', page, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(scripts) == 1 and len(styles) == 1
    assert f"script-src 'sha256-{_sha(scripts[0])}'" in csp
    assert f"style-src 'sha256-{_sha(styles[0])}'" in csp
    # nothing loads from elsewhere (the data may quote a URL as text: a peaks source)
    assert "<script src" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert EVIL not in page
    data = _blocks(page)
    assert data["opscope-data"]["schema"] == "opscope.report/1"
    ex = data["opscope-explorer"]
    assert [ln["group"] for ln in ex["lanes"]["lanes"]] == ["framework", "runtime", "hardware"]
    assert ex["occurrences"] and ex["chains"]
    names = {n for n in ex["window"]["names"]}
    assert EVIL in names  # embedded as data, escaped


def test_static_timeline_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    tr = load_document(gpu_doc(steps=60, ops=40), "big.json")
    monkeypatch.setattr(static_html, "STATIC_MAX_EVENTS", 500)
    monkeypatch.setattr(static_html, "STATIC_PX", 400)
    page = static_html.render_static(analyze(tr).to_dict(), tr)
    w = _blocks(page)["opscope-explorer"]["window"]
    shown = sum(len(ln["ev"]["id"]) for ln in w["lanes"])
    cells = sum(sum(ln["agg"]["n"]) for ln in w["lanes"])
    assert shown <= 500 and w["aggregated"] == cells > 0
    assert shown + cells == len(tr)


def test_render_without_trace_keeps_study_and_fallback() -> None:
    tr = load_document(gpu_doc(), "evil.json")
    data = analyze(tr).to_dict()
    data["study"] = {
        "shape": [4, 8],
        "dtype": "float32",
        "variants": [{"name": "naive", "device_ops": 3, "numerics_ok": True}],
        "reading": ["builtin is 2.0× faster than naive"],
    }
    page = static_html.render_html(data)
    assert "RMSNorm study at 4×8 float32" in page
    assert "builtin is 2.0× faster than naive" in page
    assert "<noscript>" in page and "&lt;img src=x" in page
    assert _blocks(page)["opscope-explorer"]["lanes"] is None


def test_static_page_embeds_the_critical_path_placed_and_capped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tr = load_document(gpu_doc(steps=3, ops=4), "path.json")
    data = analyze(tr).to_dict()
    total = len(data["critical_path"]["segments"])
    assert total > 6
    ex = _blocks(static_html.render_static(data, tr))["opscope-explorer"]
    cp = ex["critical_path"]
    assert (cp["segments_total"], cp["truncated"], len(cp["segments"])) == (total, False, total)
    assert cp["length_us"] == data["critical_path"]["length_us"]
    lanes = ex["lanes"]["lanes"]
    origin = int(ex["lanes"]["origin_ns"])
    for placed, orig in zip(cp["segments"], data["critical_path"]["segments"], strict=True):
        assert "start_ns" not in placed  # relative times only
        assert placed["t"] == orig["start_ns"] - origin
        assert lanes[placed["lane"]]["rank"] == orig["rank"]
    monkeypatch.setattr(static_html, "STATIC_MAX_SEGMENTS", 3)
    cp = _blocks(static_html.render_static(data, tr))["opscope-explorer"]["critical_path"]
    assert (len(cp["segments"]), cp["truncated"], cp["segments_total"]) == (3, True, total)
    # a report with no path: nothing embedded, and the page hides the toggle
    data.pop("critical_path")
    assert "critical_path" not in _blocks(static_html.render_static(data, tr))["opscope-explorer"]


def _job(tmp_path: Any) -> Any:
    """A 2-rank NCCL job of 3 all-reduces whose process group is the XSS probe; rank 1 is 200
    µs later into the third than into the others."""
    from distjobs import nccl_rank_doc
    from opscope.trace import load

    folder = tmp_path / "job"
    folder.mkdir()
    for r in range(2):
        doc = nccl_rank_doc(r, 2, n=3, pg=EVIL)
        if r == 1:
            kernels = sorted(
                (e for e in doc["traceEvents"] if str(e["name"]).startswith("ncclDevKernel")),
                key=lambda e: e["ts"],
            )
            kernels[2]["ts"] += 200.0
            kernels[2]["dur"] -= 200.0
        (folder / f"trace_rank_{r}.json").write_text(json.dumps(doc))
    return load(folder)


def test_static_page_embeds_the_collectives_as_the_api_answers(tmp_path: Any) -> None:
    from opscope.service.collectives import CollectiveLookup
    from opscope.trace.viewport import Viewport

    tr = _job(tmp_path)
    report = analyze(tr)
    page = static_html.render_html(report.to_dict(), trace=tr)
    assert EVIL not in page
    colls = _blocks(page)["opscope-explorer"]["collectives"]
    assert (colls["total"], colls["embedded"], colls["matched"]) == (3, 3, True)
    first = colls["items"][0]  # the longest wait first: rank 0 waits 200 µs in the third
    assert first["seq"] == 2 and first["pg"] == EVIL and first["last_rank"] == 1
    waits = {m["rank"]: m["wait_us"] for m in first["ranks"]}
    assert waits[0] == pytest.approx(200.0) and waits[1] == 0.0
    # every NCCL kernel of the job maps to its instance and rank, as the live lookup finds it
    index = Viewport(tr)
    live = CollectiveLookup.of_report(report, tr.meta.ranks)
    names, ids = tr.events.column("name").to_pylist(), tr.events.column("id").to_pylist()
    kernels = [i for n, i in zip(names, ids, strict=True) if n.startswith("ncclDevKernel")]
    assert len(kernels) == 6
    for eid in kernels:
        k, rank = colls["by_event"][str(eid)]
        hit = live.find(index, index.row_of(eid))
        assert hit is not None and hit[0] == rank
        want = live.answer(index, *hit)
        got = colls["items"][k]
        for key in ("name", "pg", "seq", "bytes", "last_rank", "start_skew_us", "dur_us"):
            assert got[key] == want[key], key
        for g, w in zip(got["ranks"], want["ranks"], strict=True):
            assert (g["rank"], g["t0"], g["t1"], g["wait_us"]) == (
                w["rank"],
                w["t0"],
                w["t1"],
                w["wait_us"],
            )
            assert g["drawn"] == w["drawn"] and g["drawn"]
            assert "arrival_ns" not in g  # absolute times stay out of the page


def test_static_collectives_are_capped_longest_waits_first(tmp_path: Any) -> None:
    from opscope.trace.viewport import Viewport

    tr = _job(tmp_path)
    data = analyze(tr).to_dict()
    colls = static_html.static_collectives(data, tr, Viewport(tr), limit=1)
    assert colls is not None
    assert (colls["total"], colls["embedded"]) == (3, 1)
    assert [c["seq"] for c in colls["items"]] == [2]
    assert {k for k, _r in colls["by_event"].values()} == {0}
    # a single rank: its longest records, unmatched (the third, 200 µs shorter, comes last)
    from opscope.trace import load

    rank1 = load(tmp_path / "job" / "trace_rank_1.json")
    solo = static_html.static_collectives(analyze(rank1).to_dict(), rank1, Viewport(rank1))
    assert solo is not None and (solo["total"], solo["embedded"], solo["matched"]) == (3, 3, False)
    assert [c["seq"] for c in solo["items"]][-1] == 2
    assert all(not c["matched"] and len(c["ranks"]) == 1 for c in solo["items"])
    # no communication: nothing embedded
    one = load_document(gpu_doc(), "one.json")
    assert static_html.static_collectives(analyze(one).to_dict(), one, Viewport(one)) is None
