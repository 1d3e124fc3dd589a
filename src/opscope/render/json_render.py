"""JSON renderer: the report's data as written in ``report.json``."""

from __future__ import annotations

from typing import Any

import orjson

from opscope.analysis.critical.path import json_default

EXTENSION = ".json"


def render_bytes(data: dict[str, Any]) -> bytes:
    """The whole report as UTF-8 bytes (no text copy: a large report's JSON is written as is)."""
    return orjson.dumps(
        data,
        default=json_default,
        option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE,
    )


def render(data: dict[str, Any], top: int | None = None) -> str:
    """The whole report (``top`` is accepted for a uniform interface; JSON is never cut)."""
    return (
        orjson.dumps(
            data, default=json_default, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
        ).decode()
        + "\n"
    )
