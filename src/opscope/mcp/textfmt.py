"""Small pieces of the tools' Markdown text (trace strings always through
:mod:`opscope.mcp.untrusted`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opscope.mcp.untrusted import clean
from opscope.render.fmt import pct, us

__all__ = ["footer", "name_col", "pct", "us"]


def footer(page: Mapping[str, Any], noun: str, tool: str) -> str:
    """``rows 1-20 of 97; more: tool(offset=20)`` for a page."""
    rows = page.get("rows") or []
    first = int(page.get("offset") or 0)
    total = page.get("total")
    if not rows:
        return f"no {noun} (of {total})" if total else f"no {noun}"
    span = f"{noun} {first + 1}-{first + len(rows)} of {total}"
    nxt = page.get("next_offset")
    return f"{span}; more: {tool}(offset={nxt})" if nxt is not None else span


def name_col(value: Any, limit: int = 100) -> str:
    """A trace string for a line inside a ``trace-data`` block."""
    return clean(value, limit)
