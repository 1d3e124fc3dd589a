"""Tools that query: read-only SQL over the trace's tables, the tables' columns, and the diff
of two traces."""

from __future__ import annotations

from typing import Any

from opscope.mcp import schemas as s
from opscope.mcp.budget import fit, fit_page
from opscope.mcp.registry import Answer, Arguments, Session, ToolError, ToolSpec
from opscope.mcp.textfmt import call, footer, name_col, us
from opscope.mcp.untrusted import NOTICE, block, clean, quote
from opscope.service.queries import page_of

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
    page = fit_page({"trace": ws.get(a["trace"]).handle, **out})
    page["row_count"] = len(page["rows"])
    cols = page["columns"]
    lines = [f"{len(page['rows'])} rows; columns: {', '.join(clean(c, 60) for c in cols)}.", NOTICE]
    if page["rows"]:
        lines.append(
            block(" | ".join(name_col(r.get(c), 60) for c in cols) for r in page["rows"][:30])
        )
        if len(page["rows"]) > 30:
            lines.append("(the text shows 30 rows; the structured content has them all)")
    if page.get("next_offset") is not None:
        more = call("sql", a, width=2000, offset=page["next_offset"])
        lines.append(f"More rows: {more}; better, aggregate.")
    return Answer("\n".join(lines), page)


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


def _schema(session: Session, a: dict[str, Any]) -> Answer:
    known = s.type_schemas()
    schema = known.get(a["name"])
    if schema is None:
        raise ToolError(f"schema: no type {a['name']!r}; the types are {', '.join(known)}")
    fields = ", ".join(schema.get("properties") or {})
    text = (
        f"JSON Schema of {a['name']} (draft 2020-12; keys may be added, never renamed): "
        f"{clean(schema.get('description') or '', 300)} Fields: {fields}."
    )
    return Answer(text, fit({"trace": "", "name": a["name"], "schema": schema}))


def _side(session: Session, value: str) -> str:
    """The handle of one side of a comparison: an open trace's, or that of the file or folder
    ``value`` names, opened without becoming the default trace."""
    ws = session.workspace
    if value in {h["handle"] for h in ws.handles()}:
        return value
    from opscope.mcp.tools_trace import open_trace, readable

    path = readable(session, value, "neither an open trace's handle nor a file or folder")
    session.progress(0, 1, f"loading {path.name}")
    return str(open_trace(session, path, make_default=False).handle)


COMPARE_TABLES = ("ops", "kernels")


def _diff_head(d: dict[str, Any]) -> dict[str, Any]:
    """The diff without its two tables, its findings without their evidence (each finding
    keeps its id on its side: resolved ones on trace a, new and persisting ones on b)."""
    from opscope.service.brief import finding_head

    out = {k: v for k, v in d.items() if k not in COMPARE_TABLES}
    changes = d.get("findings")
    if isinstance(changes, dict):
        out["findings"] = {
            k: [finding_head(f) for f in v] if k != "matched" else v for k, v in changes.items()
        }
    return out


def _compare(session: Session, a: Arguments) -> Answer:
    ws = session.workspace
    ha, hb = _side(session, a["a"]), _side(session, a["b"])
    if a["table"] is None and a["offset"]:
        raise ToolError("compare: offset pages one table; pass table (ops or kernels) with it")
    full = ws.diff(ha, hb)
    head = {"trace": hb, "traces": {"a": ha, "b": hb}}
    if a["table"] is not None:  # one page of one table
        page = fit_page(
            {**head, "table": a["table"], **page_of(full[a["table"]], a["limit"], a["offset"])}
        )
        lines = [
            f"**{hb}** against **{ha}**: {a['table']} by the size of the device time delta.",
            NOTICE,
        ]
        if page["rows"]:
            lines.append(block(_delta_line(r) for r in page["rows"]))
        lines.append(footer(page, "rows", "compare", _sides(a, ha, hb)))
        return Answer("\n".join(lines), page)
    pages = {t: page_of(full[t], a["limit"], 0) for t in COMPARE_TABLES}
    d = fit(
        {
            **head,
            **_diff_head(full),
            **{t: p["rows"] for t, p in pages.items()},
            "tables": {t: {k: p[k] for k in ("total", "next_offset")} for t, p in pages.items()},
        }
    )
    for t in COMPARE_TABLES:  # a cut list: the next page starts where it stops
        shown = len(d.get(t) or [])
        d["tables"][t]["next_offset"] = shown if shown < pages[t]["total"] else None
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
        lines.append(block(_delta_line(r) for r in ops[:10]))
    f = d.get("findings") or {}
    if isinstance(f, dict):
        for key in ("new", "resolved"):
            items = f.get(key) or []
            if items:
                lines.append(
                    f"Findings {key}: " + "; ".join(quote(x.get("title"), 120) for x in items[:5])
                )
    for t in COMPARE_TABLES:
        nxt = d["tables"][t]["next_offset"]
        if nxt is not None:
            more = call("compare", _sides(a, ha, hb), table=t, offset=nxt)
            shown, total = len(d.get(t) or []), d["tables"][t]["total"]
            lines.append(f"{t}: {shown} of {total} rows shown; more: {more}")
    return Answer("\n".join(lines), d)


def _sides(a: Arguments, ha: str, hb: str) -> Arguments:
    """The call's arguments with its sides as the handles they were opened under (a hint
    that repeats the call must not open the files again)."""
    out = Arguments({**a, "a": ha, "b": hb})
    out.given = a.given
    return out


def _delta_line(r: dict[str, Any]) -> str:
    return f"{us(r.get('delta_device_us')):>10}  {name_col(r.get('name'))}"


def _compare_schema() -> s.JsonSchema:
    diff = s.shallow("Diff")
    page = s.page({"anyOf": [{"title": "OpDelta"}, {"title": "KernelDelta"}]})
    tables = {
        "type": "object",
        "description": "per table: its rows in all and where its next page starts",
        "additionalProperties": {
            "type": "object",
            "properties": {
                "total": {"type": "integer"},
                "next_offset": {"type": ["integer", "null"]},
            },
        },
    }
    return s.result(
        {
            **diff["properties"],
            "traces": {
                "type": "object",
                "description": "the handles compared: a (the baseline) and b",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            },
            "tables": tables,
            "table": {"type": "string", "description": "the table paged (with table)"},
            **{
                k: v
                for k, v in page["properties"].items()
                if k not in ("trace", "truncated", "trimmed")
            },
        }
    )


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
        name="schema",
        title="Schema of a type",
        description=(
            "The full JSON Schema of a type the other tools' outputs name by title (OpRow, "
            "KernelRow, RooflineRow, Finding, CriticalPath, Segment, Chain, Distributed, "
            "Diff, Summary, ...): every field with its type and meaning."
        ),
        input_schema=s.args(
            {
                "name": {
                    "type": "string",
                    "pattern": "^[A-Za-z]{1,40}$",
                    "description": "a type's title, e.g. OpRow",
                }
            },
            ["name"],
        ),
        output=lambda: s.result(
            {"name": {"type": "string"}, "schema": {"type": "object"}}, ["name", "schema"]
        ),
        handler=_schema,
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
                "table": s.enum(
                    COMPARE_TABLES,
                    "page through one table of the diff (its rows by the size of the device "
                    "time delta); default: the diff with the first limit rows of each",
                ),
                "limit": s.limit(20, 200),
                "offset": s.OFFSET,
            },
            ["a", "b"],
        ),
        output=_compare_schema,
        handler=_compare,
        opens=True,
    ),
]
