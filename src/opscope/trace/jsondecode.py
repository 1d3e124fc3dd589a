"""Decoding Chrome-trace JSON without losing digits: :func:`loads` (orjson, the standard
library where orjson would turn an integer past 64 bits into a float or refuses NaN),
:func:`quote_long_timestamps` (a ``ts`` with more digits than a double holds becomes a string)
and :func:`decode_piece` (a run of ``traceEvents`` entries cut from the array).  The stream
(:mod:`opscope.trace.jsonstream`) cuts the runs at :data:`SPLIT_AT`."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# Between two events of the array: a guess, accepted only when the run before it decodes.
SPLIT_AT = re.compile(rb"\}\s*,\s*\{")
# A "ts" whose digits exceed what a double holds exactly (more than 15 significant digits), e.g.
# Unix-epoch microseconds with a nanosecond part: 1712195495519695.812
LONG_TS = re.compile(rb'"ts"\s*:\s*(-?\d{13,}\.\d+)')


def quote_long_timestamps(data: bytes) -> bytes:
    """Turn long numeric ``ts`` values into strings so no digit is lost to a double.

    Quoting a value a double would have held is harmless (text converts exactly too).  Built
    from one ``split`` and slice assignments, all in C: ``re.sub`` with a group template calls
    back into Python once per match (before Python 3.12).
    """
    parts = LONG_TS.split(data)
    n = len(parts) // 2
    if not n:
        return data
    out = [b'"ts":"'] * (4 * n + 1)
    out[0::4] = parts[0::2]  # the text between matches
    out[2::4] = parts[1::2]  # the numbers
    out[3::4] = [b'"'] * n
    return b"".join(out)


_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_BIG_INT = re.compile(rb"(?<![\d.eE+-])-?\d{20,}(?![\d.eE])")


def _has_big_int(data: bytes) -> bool:
    """Whether the text holds an integer beyond 64 bits (orjson would make it a float).

    A translate-and-find pass first (C speed); the regex only runs on a candidate.
    """
    if data.translate(_DIGITS).find(b"0" * 20) < 0:
        return False
    return _BIG_INT.search(data) is not None


def loads(data: bytes) -> Any:
    """Decode JSON; raises ``ValueError`` when it is not JSON.

    orjson first; the standard library where orjson would lose digits (integers beyond 64
    bits, which orjson turns into floats) or refuses what is still JSON in the wild
    (NaN/Infinity).
    """
    if not _has_big_int(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def try_loads(data: bytes) -> Any | None:
    """:func:`loads`, None where it is not JSON."""
    try:
        return loads(data)
    except ValueError:
        return None


def decode_piece(piece: bytes, quote: bool) -> list[Any] | None:
    """Decode a run of events (``piece`` holds them comma-separated, without brackets)."""
    data = b"[" + piece + b"]"
    if quote:
        data = quote_long_timestamps(data)
    doc = try_loads(data)
    return doc if isinstance(doc, list) else None
