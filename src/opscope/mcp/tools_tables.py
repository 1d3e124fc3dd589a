"""Tools over the report's tables: ``ops``, ``kernels`` and ``roofline``, paged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opscope.mcp import schemas as s
from opscope.mcp.budget import fit_page
from opscope.mcp.registry import Answer, Session, ToolSpec
from opscope.mcp.textfmt import footer, name_col, num, pct, us
from opscope.mcp.untrusted import NOTICE, block
from opscope.service.queries import SORT_KEYS, PageRequest


def _request(a: dict[str, Any]) -> PageRequest:
    return PageRequest(
        sort=a["sort"], name_filter=a["name_filter"], limit=a["limit"], offset=a["offset"]
    )


def _table_page(session: Session, table: str, a: dict[str, Any]) -> dict[str, Any]:
    """One page of a report table as the call asks, with its ``trace``, fitted to the size
    cap (the structured content as it goes out)."""
    ws = session.workspace
    handle = ws.get(a["trace"]).handle
    return fit_page({"trace": handle, **ws.table(table, a["trace"], request=_request(a))})


def _table_text(
    title: str,
    page: dict[str, Any],
    line: Callable[[dict[str, Any]], str],
    tool: str,
    a: dict[str, Any],
) -> str:
    rows = page["rows"]
    parts = [f"{title}, sorted by {page['sort']}.", NOTICE]
    if rows:
        parts.append(block(line(r) for r in rows))
    parts.append(footer(page, "rows", tool, a))
    return "\n".join(parts)


def _op_line(r: dict[str, Any]) -> str:
    shapes = r.get("input_dims")
    tail = f" {name_col(shapes, 60)}" if shapes else ""
    return (
        f"dev self {us(r.get('device_self_us')):>10} | dev total {us(r.get('device_total_us')):>10}"
        f" | cpu self {us(r.get('cpu_self_us')):>10} | {r.get('calls'):>6} calls | "
        f"{r.get('device_calls'):>6} device_calls | {name_col(r.get('name'))}{tail}"
    )


def _ops(session: Session, a: dict[str, Any]) -> Answer:
    table = "op_shapes" if a["by_shapes"] else "ops"
    page = _table_page(session, table, a)
    title = "Ops by name and input shapes" if a["by_shapes"] else "Ops (key-averages by name)"
    return Answer(_table_text(title, page, _op_line, "ops", a), page)


def _kernel_line(r: dict[str, Any]) -> str:
    return (
        f"{us(r.get('device_us')):>10} | {r.get('calls'):>6} calls | mean {us(r.get('mean_us')):>9}"
        f" | max {us(r.get('max_us')):>9} | {name_col(r.get('name'))} <- "
        f"{name_col(r.get('op'), 60)}"
    )


def _kernels(session: Session, a: dict[str, Any]) -> Answer:
    page = _table_page(session, "kernels", a)
    text = _table_text(
        "Device kernels (by name, with the op that launched them)", page, _kernel_line, "kernels", a
    )
    return Answer(text, page)


def _roof_line(r: dict[str, Any]) -> str:
    return (
        f"{us(r.get('device_self_us')):>10} | {r.get('bound') or '-'!s:>8} | "
        f"intensity {num(r.get('intensity'))} FLOP/B | "
        f"{name_col(r.get('name'))}"
    )


def _roofline(session: Session, a: dict[str, Any]) -> Answer:
    page = _table_page(session, "roofline", a)
    totals = page.get("totals") or {}
    peaks = page.get("peaks") or {}
    head = (
        f"Roofline against {name_col(peaks.get('name') or 'no known peaks', 80)}; "
        f"costed {pct(totals.get('coverage'))} of {us(totals.get('device_self_us'))} device time."
    )
    text = head + "\n" + _table_text("Ops on the roofline", page, _roof_line, "roofline", a)
    return Answer(text, page)


def _paged(
    table: str, default_limit: int, extra: dict[str, s.JsonSchema] | None = None
) -> s.JsonSchema:
    return s.args(
        {
            "trace": s.TRACE,
            "sort": s.enum(
                SORT_KEYS[table],
                f"sort key (default {SORT_KEYS[table][0]}; numbers largest first)",
            ),
            "limit": s.limit(default_limit, 200),
            "offset": s.OFFSET,
            "name_filter": s.NAME_FILTER,
            **(extra or {}),
        }
    )


TOOLS = [
    ToolSpec(
        name="ops",
        title="Op table",
        description=(
            "Key-averages per framework op (like torch.profiler's key_averages): calls (times "
            "the op was called, torch's count), device_calls (device executions it launched "
            "directly, TraceLens's Count), CPU and device self/total time in microseconds, "
            "device_share (of all device time), FLOPs, bytes, roofline bound. Sorted by "
            "device self time by default; by_shapes splits each op by its input shapes."
        ),
        input_schema=_paged(
            "ops",
            20,
            {
                "by_shapes": {
                    "type": "boolean",
                    "default": False,
                    "description": "one row per (op, input shapes)",
                }
            },
        ),
        output=lambda: s.page(
            s.shallow("OpShapeRow"),
            {"sort": {"type": "string"}},
        ),
        handler=_ops,
    ),
    ToolSpec(
        name="kernels",
        title="Kernel table",
        description=(
            "Device executions summed per kernel name: calls, total/mean/min/max time in "
            "microseconds, and the framework op that launched them."
        ),
        input_schema=_paged("kernels", 20),
        output=lambda: s.page(s.shallow("KernelRow"), {"sort": {"type": "string"}}),
        handler=_kernels,
    ),
    ToolSpec(
        name="roofline",
        title="Roofline",
        description=(
            "Each op's FLOPs, bytes, arithmetic intensity and achieved rates against the "
            "device's peaks, and whether it is compute- or memory-bound; totals and coverage."
        ),
        input_schema=_paged("roofline", 20),
        output=lambda: s.page(
            s.shallow("RooflineRow"),
            {
                "sort": {"type": "string"},
                "device": {"type": ["object", "null"]},
                "peaks": {"type": ["object", "null"]},
                "totals": {"type": ["object", "null"]},
                "notes": {"type": ["array", "null"]},
            },
        ),
        handler=_roofline,
    ),
]
