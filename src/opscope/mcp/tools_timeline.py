"""Tools over the timeline: its lanes, a bounded slice of its events, one event, and the
dependency chain of an event or of an op's Nth call."""

from __future__ import annotations

from typing import Any

from opscope.mcp import schemas as s
from opscope.mcp.budget import fit, fit_page
from opscope.mcp.registry import Answer, Session, ToolError, ToolSpec
from opscope.mcp.textfmt import footer, name_col, us
from opscope.mcp.untrusted import NOTICE, block, quote
from opscope.service.queries import MAX_EVENT_ROWS, EventsRequest, page_of


def _lanes(session: Session, a: dict[str, Any]) -> Answer:
    opened = session.workspace.get(a["trace"])
    lanes = opened.index.lanes_dict()
    page = fit_page(
        page_of(
            lanes["lanes"],
            a["limit"],
            a["offset"],
            trace=opened.handle,
            span_ns=lanes["span_ns"],
            ranks=lanes["ranks"],
        )
    )
    lines = [
        f"Timeline lanes ({us(lanes['span_ns'] / 1e3)} long): framework (ops per thread), "
        "runtime (runtime calls per thread), hardware (device work per stream).",
        NOTICE,
        block(
            f"lane {r['id']:>4} rank {r['rank']:>3} {r['group']:<9} {r['events']:>8} events  "
            f"{name_col(r['title'], 80)}"
            for r in page["rows"]
        ),
        footer(page, "lanes", "lanes", a),
    ]
    return Answer("\n".join(lines), page)


def _events(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    t0 = None if a["t0"] is None else round(a["t0"] * 1e3)
    t1 = None if a["t1"] is None else round(a["t1"] * 1e3)
    lanes = None if a["lanes"] is None else tuple(a["lanes"])
    req = EventsRequest(
        t0_ns=t0,
        t1_ns=t1,
        lanes=lanes,
        name_filter=a["name_filter"],
        limit=a["limit"],
        offset=a["offset"],
    )
    page = fit_page({"trace": ws.get(a["trace"]).handle, **ws.events(a["trace"], request=req)})
    lines = [
        f"Events overlapping [{us(page['t0_ns'] / 1e3)}, {us(page['t1_ns'] / 1e3)}) from the "
        f"trace's start (its length: {us(page['span_ns'] / 1e3)}), in start order.",
        NOTICE,
    ]
    if page["rows"]:
        lines.append(
            block(
                f"{r['id']:>8} t={us(r['t_us']):>10} dur={us(r['dur_us']):>10} "
                f"lane {r['lane_id']:>3} {r['kind']:<8} {name_col(r['name'])}"
                for r in page["rows"]
            )
        )
    lines.append(footer(page, "events", "events", a))
    return Answer("\n".join(lines), page)


def _event(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    rec = ws.event(a["event_id"], a["trace"])
    if rec is None:
        raise ToolError(
            f"no event {a['event_id']} in this trace (ids come from events, ops' "
            "chains, findings' evidence)"
        )
    # t and dur_ns are ns (as the explorer has them); t_us and dur_us are what events takes
    rec = fit({**rec, "t_us": rec["t"] / 1e3, "dur_us": rec["dur_ns"] / 1e3})
    text = (
        f"Event **{rec['id']}** {rec['kind']} on lane {rec['lane_id']} ({quote(rec['lane'], 60)}"
        f", rank {rec['rank']}): {quote(rec['name'])}, t={us(rec['t_us'])} from the trace's "
        f"start, dur {us(rec['dur_us'])}; parent {rec.get('parent_id')}, op {rec.get('op_id')}, "
        f"launch {rec.get('launch_id')}. Its args are in the structured content.\n{NOTICE}"
    )
    return Answer(text, {"trace": ws.get(a["trace"]).handle, "event": rec})


def _chain(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    if (a["event_id"] is None) == (a["op"] is None):
        raise ToolError("chain: give event_id, or op (with occurrence), not both")
    if a["event_id"] is not None:
        try:
            chain = ws.chain(a["event_id"], a["trace"])
        except KeyError:
            raise ToolError(f"no event {a['event_id']} in this trace") from None
    else:
        chain = ws.chain_of_op(a["op"], a["occurrence"], a["trace"])
    out = fit({"trace": ws.get(a["trace"]).handle, "chain": chain})
    c = out["chain"]
    ev = c["event"]
    lines = [
        f"Dependency chain of event {ev['id']} {quote(ev['name'])} ({ev['group']}): "
        f"{c['device_executions']} device executions, {us(c['device_ns'] / 1e3)} of device time.",
        NOTICE,
    ]
    if c.get("stack"):
        lines.append("Called from: " + " > ".join(quote(r["name"], 60) for r in c["stack"][-6:]))
    path_lines = []
    for p in c.get("paths", [])[:12]:
        steps = p.get("steps") if isinstance(p, dict) else p
        if isinstance(steps, list):
            path_lines.append(
                " -> ".join(
                    f"{name_col(x.get('name'), 60)} "
                    f"[{x.get('group')}, {us(x.get('dur_ns', 0) / 1e3)}]"
                    for x in steps
                    if isinstance(x, dict)
                )
            )
    if path_lines:
        lines += ["Dispatch -> runtime -> device:", block(path_lines)]
    if c.get("note"):
        lines.append(f"Note: {c['note']}")
    return Answer("\n".join(lines), out)


_TRACE_ONLY = {"trace": s.TRACE}
_EVENT_ID: s.JsonSchema = {
    "type": "integer",
    "minimum": 0,
    "maximum": 2**62,
    "description": "an event id (from events, evidence, chains, critical_path segments)",
}

TOOLS = [
    ToolSpec(
        name="lanes",
        title="Timeline lanes",
        description=(
            "The timeline's lanes (ids for events' lanes argument): framework (ops per "
            "thread), runtime (runtime/driver calls per thread) and hardware (device work per "
            "stream or core), per rank, with their event counts."
        ),
        input_schema=s.args(
            {**_TRACE_ONLY, "limit": s.limit(100, 1000, "lanes"), "offset": s.OFFSET}
        ),
        output=lambda: s.page(
            {"type": "object"},
            {"span_ns": {"type": "integer"}, "ranks": {"type": "array"}},
        ),
        handler=_lanes,
    ),
    ToolSpec(
        name="events",
        title="Events in a window",
        description=(
            "A bounded slice of the timeline: the events overlapping [t0, t1) (microseconds "
            "from the trace's first event), on some lanes, whose name contains name_filter, "
            "in start order, paged. Never the whole trace: aggregate with sql instead."
        ),
        input_schema=s.args(
            {
                **_TRACE_ONLY,
                "t0": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1e12,
                    "description": "window start, us from the trace's first event",
                },
                "t1": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1e12,
                    "description": "window end, us from the trace's first event",
                },
                "lanes": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 0, "maximum": 10_000_000},
                    "maxItems": 1000,
                    "description": "lane ids (from lanes); default all",
                },
                "name_filter": s.NAME_FILTER,
                "limit": s.limit(100, MAX_EVENT_ROWS // 2, "events"),
                "offset": s.OFFSET,
            }
        ),
        output=lambda: s.page(
            {"type": "object"},
            {
                "t0_ns": {"type": "integer"},
                "t1_ns": {"type": "integer"},
                "span_ns": {"type": "integer"},
            },
        ),
        handler=_events,
    ),
    ToolSpec(
        name="event",
        title="One event",
        description="One event in full: name, times, lane, links (parent, op, launch), args.",
        input_schema=s.args({"event_id": _EVENT_ID, **_TRACE_ONLY}, ["event_id"]),
        output=lambda: s.result({"event": {"type": "object"}}, ["event"]),
        handler=_event,
    ),
    ToolSpec(
        name="chain",
        title="Dependency chain",
        description=(
            "The dependency chain of one event, or of the Nth call (occurrence, 0-based, in "
            "time order) of an op: the op stack that dispatched it, the runtime calls it "
            "made and the device work they launched."
        ),
        input_schema=s.args(
            {
                "event_id": _EVENT_ID,
                "op": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1000,
                    "description": "an op name (exact, as in ops)",
                },
                "occurrence": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 1_000_000_000,
                    "default": 0,
                    "description": "which call of op (0 = first)",
                },
                **_TRACE_ONLY,
            }
        ),
        output=lambda: s.result({"chain": s.shallow("Chain")}, ["chain"]),
        handler=_chain,
    ),
]
