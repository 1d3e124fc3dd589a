"""Recovering the events of a broken Chrome-trace document: where it stops being JSON
(:func:`broken_at`), the event around a syntax error (:func:`around_broken`), the events after
the last run of a stream (:func:`decode_tail`: complete, cut short, or with broken events
skipped) and the complete events of an array cut short (:func:`last_complete_events`).  Every
loop is bounded, so garbage cannot hang a read."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from opscope.trace.jsondecode import (
    LONG_TS,
    SPLIT_AT,
    decode_piece,
    quote_long_timestamps,
    try_loads,
)

_CLOSE_AT = re.compile(rb"\}\s*(?:,|$)")

_BYTE_AT = re.compile(r"\(byte (\d+)\)")
_SNIPPET = 60


def broken_at(data: bytes) -> int | None:
    """Where ``data`` stops being JSON, when that is before its end: the byte offset of a
    syntax error (an unescaped quote in a name, bytes that are not UTF-8...).  None when it
    decodes, or fails only because it ends early (a cut, or a run cut inside an event)."""
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        m = _BYTE_AT.search(str(exc))
        if m is not None:
            return int(m.group(1)) if int(m.group(1)) < len(data) - 1 else None
        return _bad_utf8_at(data)  # msgspec >= 0.23 names no byte for bad UTF-8
    except UnicodeDecodeError:  # msgspec < 0.23: a position within one string
        return _bad_utf8_at(data)
    except (RecursionError, ValueError):
        pass
    return None


def _bad_utf8_at(data: bytes) -> int | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start if exc.start < len(data) - 1 else None
    return None


def around_broken(buf: bytes | bytearray, lo: int, at: int) -> tuple[int, int, int, bytes] | None:
    """The event holding the syntax error at ``at``, in a run of events starting at ``lo``:
    ``(last, start, resume, near)`` with ``last`` the ``}`` closing the event before it (-1:
    none), ``start`` where the broken event starts, ``resume`` the ``{`` of the event after it
    and ``near`` the bytes around the error; None when no event follows within ``buf``."""
    near_at = at
    at = max(lo, at - 1)  # the decoder may name the byte after the one it stopped at
    m = SPLIT_AT.search(buf, at)
    if m is None:
        return None
    j = buf.rfind(b"}", lo, at)
    while j >= 0 and not SPLIT_AT.match(buf, j):
        j = buf.rfind(b"}", lo, j)
    start = j + 2 if j >= 0 else lo
    near = bytes(buf[max(start, near_at - _SNIPPET) : near_at + 20])
    return j, start, m.end() - 1, near


def decode_tail(
    rest: bytes, form: str, quote: bool
) -> tuple[list[Any] | None, dict[str, Any], bool, bool, list[tuple[int, int, bytes]]]:
    """The bytes after the last run: ``(events, keys after the array, cut, quoted, skipped)``.

    ``events`` is None when the document holds no event list there; ``cut`` says the document
    was cut short (or broken near the end) and ``events`` are the complete ones before the cut.
    An event that is not JSON (see :func:`broken_at`) with events after it is skipped:
    ``skipped`` holds, per skip, where it starts and ends in ``rest`` and the bytes around
    where it breaks (see :meth:`EventStream.note_invalid`).
    """
    head = b'{"traceEvents":[' if form == "object" else b"["
    kept: list[Any] = []
    skipped: list[tuple[int, int, bytes]] = []
    base = 0
    for _ in range(10_000):  # each pass skips one broken event: bounded
        data = head + rest
        if LONG_TS.search(data):
            quote = True
            data = quote_long_timestamps(data)
        doc = try_loads(data)
        if form == "object" and isinstance(doc, dict):
            events = doc.pop("traceEvents", [])
            if not isinstance(events, list):
                return (kept or None), doc, False, quote, skipped
            return kept + events, doc, False, quote, skipped
        if form == "array" and isinstance(doc, list):
            return kept + doc, {}, False, quote, skipped
        at = broken_at(head + rest)
        around = around_broken(rest, 0, at - len(head)) if at and at >= len(head) else None
        if around is None:
            break
        last, start, resume, near = around
        if last >= 0:
            before = decode_piece(rest[: last + 1], quote)
            if before is None:
                start = 0  # skip those too: losing a few events beats losing the rest
            else:
                kept += before
        skipped.append((base + start, base + resume, near))
        base += resume
        rest = rest[resume:]
    # cut short (or broken near the end): keep the complete events before the cut
    tail = last_complete_events(rest, quote)
    return kept + (tail if tail is not None else []), {}, True, quote, skipped


def last_complete_events(rest: bytes, quote: bool) -> list[Any] | None:
    """The complete events of an array cut short: walk back over closing braces (bounded, so
    garbage cannot hang us) until the bytes before one decode as a run of events."""
    hi = len(rest)
    for _ in range(2000):
        j = rest.rfind(b"}", 0, hi)
        if j < 0:
            break
        hi = j
        if not _CLOSE_AT.match(rest, j):
            continue
        got = decode_piece(rest[: j + 1], quote)
        if got is not None:
            return got
    return None
