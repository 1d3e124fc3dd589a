"""JSON renderer: a document as written in ``report.json`` (indented, a final newline)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from opscope.analysis.critical.path import Segments, json_default

OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
#: stands for the K-th segments list in the document while it is written: orjson escapes
#: every control character inside a string, so a raw byte 0x01 appears nowhere else
_MARK = b"\x01"


def render_json_bytes(data: dict[str, Any]) -> bytes:
    """The whole report as UTF-8 bytes (no text copy: a large report's JSON is written as is)."""
    return orjson.dumps(data, default=json_default, option=OPTIONS)


def render_json_chunks(data: dict[str, Any]) -> Iterator[bytes]:
    """:func:`render_json_bytes` in pieces, the same bytes: the critical path's segments (over
    100 MB of JSON at a million of them) are written a piece at a time, so that the report is
    never held whole in memory (a 1M-event report's peak RSS was about 290 MB higher)."""
    found: list[Segments] = []

    def default(obj: Any) -> Any:
        if isinstance(obj, Segments):
            found.append(obj)
            return orjson.Fragment(_MARK + str(len(found) - 1).encode() + _MARK)
        return json_default(obj)

    doc = orjson.dumps(data, default=default, option=OPTIONS)
    if not found:
        yield doc
        return
    parts = doc.split(_MARK)
    del doc
    for i, part in enumerate(parts):
        if i % 2 == 0:
            if part:
                yield part
        else:
            yield from found[int(part)].json_chunks()


def render_json(data: dict[str, Any]) -> str:
    """The whole document (any kind: report, diff, optimize, compare, demo) as JSON text."""
    return render_json_bytes(data).decode()
