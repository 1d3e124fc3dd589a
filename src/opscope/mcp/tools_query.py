"""Tools that query: read-only SQL over the trace's tables, the tables' columns, and the diff
of two traces."""

from __future__ import annotations

from typing import Any

from opscope.mcp import schemas as s
from opscope.mcp.budget import fit, fit_page
from opscope.mcp.registry import Answer, Session, ToolError, ToolSpec
from opscope.mcp.textfmt import name_col, us
from opscope.mcp.untrusted import NOTICE, block, clean, quote

SQL_MAX_ROWS = 1000
SQL_TIMEOUT_S = 10.0


def _sql(session: Session, a: dict[str, Any]) -> Answer:
    from opscope.errors import OpscopeError

    ws = session.workspace
    try:
        out = ws.sql(
            a["query"], a["trace"], limit=a["limit"], offset=a["offset"], timeout_s=SQL_TIMEOUT_S
        )
    except OpscopeError as exc:
        message = str(exc)
        if "not found" in message.lower() or "does not have a column" in message.lower():
            message += " (call tables to list the tables and their columns)"
        raise ToolError(message) from None
    page = fit_page({**out, "total": None})
    page.pop("total", None)
    cols = page["columns"]
    lines = [f"{len(page['rows'])} rows; columns: {', '.join(clean(c, 60) for c in cols)}.", NOTICE]
    if page["rows"]:
        lines.append(
            block(" | ".join(name_col(r.get(c), 60) for c in cols) for r in page["rows"][:30])
        )
        if len(page["rows"]) > 30:
            lines.append("(the text shows 30 rows; the structured content has them all)")
    if page.get("next_offset") is not None:
        lines.append(f"More rows: sql(..., offset={page['next_offset']}); better, aggregate.")
    return Answer("\n".join(lines), {"trace": ws.get(a["trace"]).handle, **page})


def _tables(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    tables = ws.tables(a["trace"])
    lines = ["SQL tables (DuckDB dialect; times are integer ns, *_us columns microseconds):"]
    lines.append(
        block(
            f"{t['name']} ({t['rows']} rows): "
            + ", ".join(f"{clean(c['name'], 60)} {clean(c['type'], 40)}" for c in t["columns"])
            for t in tables
        )
    )
    return Answer("\n".join(lines), fit({"trace": ws.get(a["trace"]).handle, "tables": tables}))


def _side(session: Session, value: str) -> str:
    ws = session.workspace
    if value in {h["handle"] for h in ws.handles()}:
        return value
    from opscope.mcp.tools_trace import readable

    path = readable(session, value, "neither an open trace's handle nor a file or folder")
    session.progress(0, 1, f"loading {path.name}")
    return ws.open(path).handle


def _compare(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    ha, hb = _side(session, a["a"]), _side(session, a["b"])
    d = fit({"trace": hb, **ws.diff(ha, hb)})
    totals = d.get("totals") or {}
    lines = [
        f"**{hb}** against **{ha}**"
        f"{' (different devices)' if d.get('cross_device') else ''}: device time "
        f"{us(totals.get('delta_device_us'))}, CPU time {us(totals.get('delta_cpu_us'))} "
        "(positive: b is slower).",
        NOTICE,
    ]
    ops = d.get("ops") or []
    if ops:
        lines += ["Largest op changes (device time):"]
        lines.append(
            block(
                f"{us(r.get('delta_device_us')):>10}  {name_col(r.get('name'))}" for r in ops[:10]
            )
        )
    f = d.get("findings") or {}
    if isinstance(f, dict):
        for key in ("new", "resolved"):
            items = f.get(key) or []
            if items:
                lines.append(
                    f"Findings {key}: " + "; ".join(quote(x.get("title"), 120) for x in items[:5])
                )
    return Answer("\n".join(lines), d)


TOOLS = [
    ToolSpec(
        name="sql",
        title="SQL over the trace",
        description=(
            "One read-only SELECT (DuckDB dialect) over the tables events, ops and kernels "
            "(and neuron_* on a Neuron profile); call tables for their columns. No file, "
            "network or settings access; at most 1000 rows a call and a 10 s limit: results "
            "should be aggregates (GROUP BY, ORDER BY ... LIMIT). Pages (offset) are stable "
            "only with an ORDER BY."
        ),
        input_schema=s.args(
            {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 20_000,
                    "description": "one SELECT over events, ops, kernels",
                },
                "trace": s.TRACE,
                "limit": s.limit(100, SQL_MAX_ROWS),
                "offset": s.OFFSET,
            },
            ["query"],
        ),
        output=lambda: s.result(
            {
                "columns": {"type": "array", "items": {"type": "string"}},
                "rows": {"type": "array", "items": {"type": "object"}},
                "row_count": {"type": "integer", "description": "rows returned"},
                "offset": {"type": "integer"},
                "next_offset": {"type": ["integer", "null"]},
            },
            ["columns", "rows", "truncated"],
        ),
        handler=_sql,
    ),
    ToolSpec(
        name="tables",
        title="SQL tables and columns",
        description="The tables sql can read, with each column's name and type and row counts.",
        input_schema=s.args({"trace": s.TRACE}),
        output=lambda: s.result(
            {
                "tables": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "rows": {"type": "integer"},
                            "columns": {"type": "array", "items": {"type": "object"}},
                        },
                        "required": ["name", "rows", "columns"],
                    },
                }
            },
            ["tables"],
        ),
        handler=_tables,
    ),
    ToolSpec(
        name="compare",
        title="Compare two traces",
        description=(
            "The diff of trace b against trace a (handles, or paths to open): totals, "
            "timeline deltas, ops and kernels by change in device time, ops only in one, and "
            "findings new, resolved and changed."
        ),
        input_schema=s.args(
            {
                "a": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 4096,
                    "description": "the baseline: a handle or a path",
                },
                "b": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 4096,
                    "description": "the changed run: a handle or a path",
                },
            },
            ["a", "b"],
        ),
        output=lambda: s.result({}, [], base=s.doc("Diff")),
        handler=_compare,
        opens=True,
    ),
]
