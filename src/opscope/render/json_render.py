"""JSON renderer: the report's data as written in ``report.json``."""

from __future__ import annotations

from typing import Any

import orjson

EXTENSION = ".json"


def render(data: dict[str, Any], top: int | None = None) -> str:
    """The whole report (``top`` is accepted for a uniform interface; JSON is never cut)."""
    return (
        orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n"
    )
