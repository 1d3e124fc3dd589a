"""The explorer as one self-contained HTML file: the report and a bounded timeline embedded.

No server and no network: the page works from ``file://``.  The app's script and stylesheet are
inlined and allowed by their SHA-256 hashes in the Content-Security-Policy (no
``'unsafe-inline'``); the data sits in inert ``<script type="application/json">`` elements with
every ``<`` escaped, so no trace string can close them.

The timeline is one level-of-detail window over the whole trace
(:meth:`opscope.trace.viewport.EventIndex.window`): events at least one pixel wide at
:data:`STATIC_PX` pixels are embedded individually, at most :data:`STATIC_MAX_EVENTS`; the rest
are summed into per-pixel cells, and the page says so.  Dependency chains and event details are
embedded for the top ops' occurrences and the findings' evidence only.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson

from opscope.trace import Trace

STATIC_PX = 4000
STATIC_MAX_EVENTS = 20_000
STATIC_TOP_OPS = 15
STATIC_OCCURRENCES = 200
STATIC_MAX_CHAINS = 120


def _asset(name: str) -> str:
    from opscope.explorer.server import asset

    return asset(name)


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


def json_script(element_id: str, data: Any) -> str:
    """An inert JSON data block; ``<`` escaped so nothing in it can end the element."""
    payload = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).replace(b"<", b"\\u003c")
    return f'<script type="application/json" id="{element_id}">{payload.decode()}</script>'


def explorer_payload(report: dict[str, Any], trace: Trace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(report with relative evidence times, the embedded explorer data) for one trace."""
    from opscope.analysis.chain import dependency_chain
    from opscope.explorer.data import with_relative_times
    from opscope.trace.viewport import EventIndex

    index = EventIndex(trace)
    data = with_relative_times(report, index.origin_ns)
    data["explorer"] = {**data["explorer"], "mode": "static", "compare": False}
    window = index.window(None, 0, max(1, index.span_ns), STATIC_PX, max_events=STATIC_MAX_EVENTS)
    top = sorted(report.get("ops") or [], key=lambda o: -float(o.get("device_self_us") or 0))
    occurrences: dict[str, Any] = {}
    chain_ids: list[int] = []
    for op in top[:STATIC_TOP_OPS]:
        occ = index.occurrences(str(op["name"]), limit=STATIC_OCCURRENCES)
        occurrences[str(op["name"])] = occ
        if len(occ["ids"]):
            longest = int(occ["ids"][int(occ["dur"].argmax())])
            chain_ids.append(longest)
    for f in report.get("findings") or []:
        for e in f.get("evidence") or []:
            if isinstance(e, dict):
                chain_ids.extend(int(i) for i in (e.get("event_ids") or [])[:4])
    chains: dict[str, Any] = {}
    events: dict[str, Any] = {}
    for eid in dict.fromkeys(chain_ids):
        if len(chains) >= STATIC_MAX_CHAINS:
            break
        try:
            chain = dependency_chain(index, eid, max_paths=24)
        except KeyError:
            continue
        chains[str(eid)] = chain
        for path in chain["paths"]:
            for hop in path:
                hid = int(hop["id"])
                if str(hid) not in events and len(events) < 4 * STATIC_MAX_CHAINS:
                    rec = index.event(hid)
                    if rec is not None:
                        events[str(hid)] = rec
    explorer = {
        "mode": "static",
        "lanes": index.lanes_dict(),
        "window": window,
        "occurrences": occurrences,
        "chains": chains,
        "events": events,
    }
    return data, explorer


def render_static(
    report_dict: dict[str, Any],
    trace: Trace | None = None,
    *,
    study_html: str = "",
    fallback_html: str = "",
) -> str:
    """The explorer UI as one HTML file (see the module docstring)."""
    if trace is not None:
        data, explorer = explorer_payload(report_dict, trace)
    else:
        start = (report_dict.get("window") or {}).get("start_ns")
        from opscope.explorer.data import with_relative_times

        data = with_relative_times(report_dict, int(start) if isinstance(start, int) else 0)
        data["explorer"] = {**data["explorer"], "mode": "static", "compare": False}
        explorer = {"mode": "static", "lanes": None}
    script = _asset("app.js")
    style = _asset("style.css")
    for text in (script, style):  # inlined as is: nothing in them may end their element
        if "</script" in text.lower() or "</style" in text.lower() or "<!--" in text:
            raise ValueError("an explorer asset contains a closing tag or <!--")
    csp = (
        f"default-src 'none'; script-src {_csp_hash(script)}; style-src {_csp_hash(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    page = _asset("index.html")
    return (
        page.replace("<!--CSP-->", f'<meta http-equiv="Content-Security-Policy" content="{csp}">')
        .replace("<!--HEAD-->", f"<style>{style}</style>")
        .replace("<!--STUDY-->", study_html)
        .replace(
            "<!--FALLBACK-->", f"<noscript>{fallback_html}</noscript>" if fallback_html else ""
        )
        .replace(
            "<!--DATA-->",
            json_script("opscope-data", data) + json_script("opscope-explorer", explorer),
        )
        .replace("<!--SCRIPTS-->", f'<script type="module">{script}</script>')
    )
