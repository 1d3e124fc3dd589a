"""The explorer as one self-contained HTML file: the HTML report (``opscope report --format html``).

No server and no network: the page works from ``file://``.  The app's script and stylesheet are
inlined and allowed by their SHA-256 hashes in the Content-Security-Policy (no
``'unsafe-inline'``); the data sits in inert ``<script type="application/json">`` elements with
every ``<`` escaped, so no trace string can close them (:func:`opscope.explorer.page.static_page`).
The study section (the demo's comparison table and its reading), the roofline chart and, for
readers without JavaScript, the plain tables come from the HTML renderer
(:mod:`opscope.render.html`), every trace string escaped; the app renders trace strings as text
only.

The timeline is one level-of-detail window over the whole trace
(:meth:`opscope.trace.viewport.Viewport.window`): events at least one pixel wide at
:data:`STATIC_PX` pixels are embedded individually, at most :data:`STATIC_MAX_EVENTS`; the rest
are summed into per-pixel cells, and the page says so.  Dependency chains and event details are
embedded for the top ops' occurrences and the findings' evidence only.  The critical path's
segments are embedded placed on their lanes (:func:`opscope.service.critical.drawn_path`), the
:data:`STATIC_MAX_SEGMENTS` longest at most, so that the timeline's toggle draws it; the
Summary's breakdown bar and the findings' notes read the report itself.

Collectives (:func:`static_collectives`) are embedded as the live explorer's ``/api/collective``
answers them (:class:`opscope.service.collectives.CollectiveLookup`), so that selecting a
collective's kernel, host op or backend range draws it across the ranks with each rank's wait:
the matched instances with the longest waits, :data:`STATIC_MAX_COLLECTIVES` at most (of a
single rank, its longest records), each rank's work drawn up to :data:`STATIC_DRAWN` events,
and a map from the records' event ids to them; the page says when more exist.
"""

from __future__ import annotations

from typing import Any

from opscope.analysis.chain import dependency_chain
from opscope.explorer.data import with_relative_times
from opscope.explorer.page import static_page
from opscope.render import html
from opscope.service.collectives import CollectiveLookup
from opscope.service.critical import drawn_path
from opscope.trace import Trace
from opscope.trace.viewport import Viewport

STATIC_PX = 4000
STATIC_MAX_EVENTS = 20_000
STATIC_TOP_OPS = 15
STATIC_OCCURRENCES = 200
STATIC_MAX_CHAINS = 120
STATIC_MAX_SEGMENTS = 4000
STATIC_MAX_COLLECTIVES = 2000
STATIC_DRAWN = 8


def render_html(data: dict[str, Any], top: int = 50, *, trace: Trace | None = None) -> str:
    """The HTML report: the explorer UI as one self-contained file (timeline embedded when
    ``trace``), with the renderer's sections and its plain tables (``top`` rows) for readers
    without JavaScript."""
    return render_static(
        data, trace, study_html=html.sections(data), fallback_html=html.plain_tables(data, top)
    )


def explorer_payload(report: dict[str, Any], trace: Trace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(report with relative evidence times, the embedded explorer data) for one trace."""
    index = Viewport(trace)
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
    path = static_path(report.get("critical_path"), index)
    if path is not None:
        explorer["critical_path"] = path
    colls = static_collectives(report, trace, index)
    if colls is not None:
        explorer["collectives"] = colls
    return data, explorer


def _records(trace: Trace, steps: tuple[int, int] | None) -> dict[int, list[dict[str, Any]]]:
    """Each rank's collective records, as the analysis made them (same steps)."""
    from opscope.analysis.collectives import collective_records
    from opscope.analysis.rank_split import rank_traces

    ranks = list(trace.meta.ranks)
    if len(set(ranks)) <= 1:
        return {int(ranks[0]) if ranks else 0: collective_records(trace, steps)}
    return {int(t.meta.ranks[0]): collective_records(t, steps) for t in rank_traces(trace)}


def static_collectives(
    report: dict[str, Any], trace: Trace, index: Viewport, limit: int | None = None
) -> dict[str, Any] | None:
    """The collectives to embed (see the module docstring), ``limit`` at most (default
    :data:`STATIC_MAX_COLLECTIVES`): ``items`` (answers as ``/api/collective`` gives them, less
    the selected rank and absolute times), ``by_event`` (event id -> ``[item, rank]``),
    ``total`` (instances, or records of a single rank), ``embedded`` and ``matched``; None
    when the report has no ``distributed`` section."""
    dist = report.get("distributed")
    if not isinstance(dist, dict):
        return None
    limit = STATIC_MAX_COLLECTIVES if limit is None else limit
    selection = (report.get("window") or {}).get("selection")
    steps = (int(selection[0]), int(selection[1])) if selection else None
    records = _records(trace, steps)
    instances = list(dist.get("instances") or [])
    lookup = CollectiveLookup.of_records(records, instances)
    picks: list[tuple[int, int]] = []  # (rank, position) standing for each embedded item
    if instances:
        order = sorted(
            range(len(instances)),
            key=lambda i: (-max((instances[i].get("wait_us") or {}).values(), default=0.0), i),
        )
        total = len(instances)
        for i in order[:limit]:
            members = lookup.members[i]
            if members:
                picks.append(min(members.items()))
    else:
        flat = [(r, p) for r, recs in records.items() for p in range(len(recs))]
        flat.sort(key=lambda rp: (-float(records[rp[0]][rp[1]]["dur_us"] or 0.0), rp))
        total = len(flat)
        picks = flat[:limit]
    items: list[dict[str, Any]] = []
    by_event: dict[str, list[int]] = {}
    for rank, pos in picks:
        answer = lookup.answer(index, rank, pos, drawn=STATIC_DRAWN)
        answer.pop("rank", None)  # the selected rank: the page sets it
        for member in answer["ranks"]:
            member.pop("arrival_ns", None)  # absolute: the page draws the relative t0/t1
            member.pop("end_ns", None)
        k = len(items)
        items.append(answer)
        for member in answer["ranks"]:
            for eid in [member.get("event_id"), *member.get("work_event_ids", [])]:
                if eid is not None:
                    by_event.setdefault(str(int(eid)), [k, int(member["rank"])])
    return {
        "items": items,
        "by_event": by_event,
        "total": total,
        "embedded": len(items),
        "matched": bool(instances),
    }


def static_path(section: Any, index: Viewport) -> dict[str, Any] | None:
    """What the timeline's toggle draws, for embedding: the path's segments placed on their
    lanes (what the page needs of each: no absolute times) and the section's totals; None
    when the report has no path with segments."""
    if not isinstance(section, dict) or not section.get("segments"):
        return None
    placed = drawn_path(section, index, STATIC_MAX_SEGMENTS)
    keys = ("i", "rank", "label", "name", "event_id", "lane", "row", "t", "dur_ns")
    return {
        "scope": placed.get("scope"),
        "length_us": placed.get("length_us"),
        "segments": [{k: s[k] for k in keys} for s in placed["segments"]],
        "segments_total": placed["segments_total"],
        "truncated": placed["truncated"],
    }


def render_static(
    report_dict: dict[str, Any],
    trace: Trace | None = None,
    *,
    study_html: str = "",
    fallback_html: str = "",
) -> str:
    """The explorer UI as one HTML file (see the module docstring); ``study_html`` and
    ``fallback_html`` are trusted HTML (every trace string in them escaped)."""
    if trace is not None:
        data, explorer = explorer_payload(report_dict, trace)
    else:
        start = (report_dict.get("window") or {}).get("start_ns")
        data = with_relative_times(report_dict, int(start) if isinstance(start, int) else 0)
        data["explorer"] = {**data["explorer"], "mode": "static", "compare": False}
        explorer = {"mode": "static", "lanes": None}
    return static_page(data, explorer, sections=study_html, fallback=fallback_html)
