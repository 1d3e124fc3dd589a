"""The one decoder of an event's ``args`` text (the event table keeps ``args`` as JSON text)."""

from __future__ import annotations

from typing import Any

import orjson


def decode_args(text: str | None, *, keep_raw: bool = False) -> dict[str, Any]:
    """The ``args`` object of an event: ``{}`` when absent, unreadable or not an object
    (``{"raw": text}`` instead with ``keep_raw``, for showing it as written).

    A stray separator before the object (a trace writer's fast path leaves ``, {...}``) is
    tolerated.
    """
    if not text:
        return {}
    try:
        value = orjson.loads(text.lstrip(", \n"))
    except orjson.JSONDecodeError:
        return {"raw": text} if keep_raw else {}
    if isinstance(value, dict):
        return value
    return {"raw": text} if keep_raw else {}


__all__ = ["decode_args"]
