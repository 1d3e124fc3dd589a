"""Small pieces of the tools' Markdown text (trace strings always through
:mod:`opscope.mcp.untrusted`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from opscope.mcp.untrusted import clean
from opscope.render.fmt import num, pct, us

__all__ = ["call", "footer", "name_col", "num", "pct", "us"]


def call(
    tool: str, args: Mapping[str, Any] | None = None, *, width: int = 200, **override: Any
) -> str:
    """A call a model can make as written: ``ops(by_shapes=true, offset=20)``.  ``args``: the
    arguments of the call being answered (a :class:`~opscope.mcp.registry.Arguments` repeats
    only those the caller passed), ``override``: what changes (None drops an argument);
    ``width``: the longest value shown (a longer one is cut, and the call with it)."""
    given = getattr(args, "given", None)
    keys = list(given if given is not None else (args or {}))
    chosen = {k: (args or {})[k] for k in keys if k not in override}
    chosen.update({k: v for k, v in override.items() if v is not None})
    parts = [
        f"{k}={clean(orjson.dumps(v).decode(), width)}" for k, v in chosen.items() if v is not None
    ]
    return f"{tool}({', '.join(parts)})"


def footer(
    page: Mapping[str, Any], noun: str, tool: str, args: Mapping[str, Any] | None = None
) -> str:
    """``rows 1-20 of 97; more: tool(..., offset=20)`` for a page (the call repeats ``args``,
    the arguments of the call answered)."""
    rows = page.get("rows") or []
    first = int(page.get("offset") or 0)
    total = page.get("total")
    if not rows:
        return f"no {noun} (of {total})" if total else f"no {noun}"
    span = f"{noun} {first + 1}-{first + len(rows)} of {total}"
    nxt = page.get("next_offset")
    return f"{span}; more: {call(tool, args, offset=nxt)}" if nxt is not None else span


def name_col(value: Any, limit: int = 100) -> str:
    """A trace string for a line inside a ``trace-data`` block."""
    return clean(value, limit)
