"""The size cap of a tool result.

MCP clients cap a tool result at about 25k tokens, and a result that fills a model's context
leaves no room for the work.  Every result here stays under :data:`MAX_STRUCTURED_BYTES` of
structured content (compact JSON; about 3 bytes a token for JSON full of numbers, so about
13k tokens) plus :data:`MAX_TEXT_CHARS` of Markdown text:

* strings longer than :data:`MAX_STRING` are cut (``...[+N chars]``): a hostile trace can
  name an op with megabytes;
* a page (``rows`` + ``next_offset``) that is too large keeps fewer rows, and its
  ``next_offset`` and ``truncated`` say where the rest starts (:func:`fit_page`);
* any other result has its longest lists halved until it fits, each cut list's path listed
  in ``trimmed`` and ``truncated`` set (:func:`fit`).
"""

from __future__ import annotations

from typing import Any

import orjson

from opscope.mcp.untrusted import cut

MAX_STRUCTURED_BYTES = 40_000
MAX_TEXT_CHARS = 6_000
MAX_STRING = 1_000


def size(obj: Any) -> int:
    """Bytes of ``obj`` as compact JSON."""
    return len(orjson.dumps(obj, default=str))


def plain(obj: Any) -> Any:
    """``obj`` as plain JSON values: NumPy arrays and scalars, lazy sequences (a critical
    path's segments) and other objects the service returns become lists, numbers, strings."""
    from opscope.analysis.critical.path import json_default

    return orjson.loads(orjson.dumps(obj, default=json_default, option=orjson.OPT_SERIALIZE_NUMPY))


def clip_strings(obj: Any, limit: int = MAX_STRING) -> Any:
    """``obj`` with every string (keys too) longer than ``limit`` cut."""
    if isinstance(obj, str):
        return cut(obj, limit)
    if isinstance(obj, dict):
        return {clip_strings(k, limit): clip_strings(v, limit) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clip_strings(v, limit) for v in obj]
    return obj


def is_page(result: Any) -> bool:
    """Whether ``result`` is a page: ``rows`` with the ``offset`` they start at."""
    return isinstance(result, dict) and isinstance(result.get("rows"), list) and "offset" in result


def fit_page(page: dict[str, Any], max_bytes: int = MAX_STRUCTURED_BYTES) -> dict[str, Any]:
    """A page (``rows``, ``offset``, ``next_offset``, ``truncated``; see
    :mod:`opscope.service.queries`), with every key the result will carry, keeping as many of
    its rows as fit in ``max_bytes``.  Its ``next_offset`` is always ``offset`` plus the rows
    it keeps (``None`` on the last page), so walking the pages by ``next_offset`` returns
    every row once, whatever the cap cut."""
    page = clip_strings(plain(page))
    if size(page) <= max_bytes:
        return page
    rows = page["rows"]
    lo, hi = 0, len(rows)  # the largest row count that fits lies in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if size({**page, "rows": rows[:mid]}) <= max_bytes:
            lo = mid
        else:
            hi = mid
    keep = max(lo, 1)  # one row always goes (cut strings bound its size)
    if keep >= len(rows):
        return page
    nxt = int(page.get("offset") or 0) + keep
    return {**page, "rows": rows[:keep], "next_offset": nxt, "truncated": True}


def _lists(obj: Any, path: str, out: list[tuple[int, str, list[Any]]]) -> None:
    if isinstance(obj, list):
        if len(obj) > 1:
            out.append((size(obj), path, obj))
        for i, v in enumerate(obj):
            if isinstance(v, dict | list):
                _lists(v, f"{path}[{i}]", out)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, dict | list):
                _lists(v, f"{path}.{k}" if path else str(k), out)


def fit(result: dict[str, Any], max_bytes: int = MAX_STRUCTURED_BYTES) -> dict[str, Any]:
    """``result`` under ``max_bytes``: long strings cut, then the largest list halved (in
    place of the copy) until it fits; ``trimmed`` names the lists cut and ``truncated`` is set
    when anything was."""
    out: dict[str, Any] = clip_strings(plain(result))
    trimmed: list[str] = []
    for _ in range(200):
        if size(out) <= max_bytes:
            break
        found: list[tuple[int, str, list[Any]]] = []
        _lists(out, "", found)
        if not found:
            break
        _, path, biggest = max(found, key=lambda t: t[0])
        del biggest[max(1, len(biggest) // 2) :]
        if path not in trimmed:
            trimmed.append(path)
    if trimmed:
        out["truncated"] = True
        out["trimmed"] = trimmed
    return out


def fit_result(result: dict[str, Any], max_bytes: int = MAX_STRUCTURED_BYTES) -> dict[str, Any]:
    """``result`` under ``max_bytes``: a page by :func:`fit_page` (fewer rows, its
    ``next_offset`` where they stop), anything else by :func:`fit`."""
    return fit_page(result, max_bytes) if is_page(result) else fit(result, max_bytes)


def fit_text(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut at a line end under ``limit`` characters, saying so."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit - 80)
    head = text[: cut if cut > 0 else limit - 80]
    if head.count("```") % 2:  # close a fence the cut left open
        head += "\n```"
    return head + "\n\n(text cut; the structured content has the full result)"
