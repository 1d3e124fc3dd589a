"""Chrome-trace JSON -> lists of event objects, a few MiB at a time.

Contract: :class:`EventStream` takes decompressed byte blocks and yields ``(events, piece)``
pairs, where ``events`` is the decoded list of the next run of ``traceEvents`` entries and
``piece`` the exact bytes they came from (so a caller may decode them again, e.g. with long
timestamps quoted).  After iteration :attr:`EventStream.meta` holds every top-level key other
than ``traceEvents`` (whether written before or after the array), :attr:`form` says which form
the document had, and :attr:`warning` says what was recovered from a cut-short file.

Why this shape: ``orjson.loads`` of a whole 1 GB trace builds several GB of Python objects.
Splitting the ``traceEvents`` array between two events (``}`` ``,`` ``{`` at top level) and
decoding each run on its own keeps memory flat.  A split point is only a guess (the same bytes
can occur inside ``args`` or a string); a guess is accepted only when the run decodes as a JSON
array, which cannot happen when the run ends inside an event (an ``{`` would stay open).

Bad input: a document that is not JSON raises :class:`TraceError`; a document cut short keeps
every complete event before the cut and says so in :attr:`warning`; an event in the middle
that is not JSON (torch writes record_function names with their quotes unescaped) is skipped
from where the decoder says it breaks to the next event boundary, and listed in
:attr:`EventStream.invalid` (:func:`broken_at`, :func:`around_broken`).  All loops are
bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import orjson

from opscope.errors import TraceError

CHUNK_BYTES = 2 << 20
_HEAD_LIMIT = 64 << 20  # metadata before "traceEvents" larger than this: decode whole

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SPLIT_AT = re.compile(rb"\}\s*,\s*\{")
_CLOSE_AT = re.compile(rb"\}\s*(?:,|$)")
# A "ts" whose digits exceed what a double holds exactly (more than 15 significant digits), e.g.
# Unix-epoch microseconds with a nanosecond part: 1712195495519695.812
LONG_TS = re.compile(rb'"ts"\s*:\s*(-?\d{13,}\.\d+)')
# Why a PyTorch execution trace (``nodes`` and ``schema``, no ``traceEvents``) is refused; the
# file's path goes before it.  opscope.trace.formats.execution_trace refuses one by its first
# bytes; this reader refuses one met inside a folder of ranks.
EXECUTION_TRACE_REFUSAL = (
    "a PyTorch execution trace (graph of ops, no timings), not a Kineto trace; "
    "pass the Kineto trace recorded beside it"
)


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


def _try(data: bytes) -> Any | None:
    try:
        return loads(data)
    except ValueError:
        return None


def decode_piece(piece: bytes, quote: bool) -> list[Any] | None:
    """Decode a run of events (``piece`` holds them comma-separated, without brackets)."""
    data = b"[" + piece + b"]"
    if quote:
        data = quote_long_timestamps(data)
    doc = _try(data)
    return doc if isinstance(doc, list) else None


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
    m = _SPLIT_AT.search(buf, at)
    if m is None:
        return None
    j = buf.rfind(b"}", lo, at)
    while j >= 0 and not _SPLIT_AT.match(buf, j):
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
        doc = _try(data)
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


# Whitespace runs longer than this are shortened as they are read (see squeeze_blanks).
BLANK_RUN = 1 << 16
_BLANKS = b" \t\r\n"
# a long run: the lookbehind makes the scan linear (no retry from inside a run)
_LONG_BLANK = re.compile(rb"(?<![ \t\r\n])[ \t\r\n]{%d,}" % BLANK_RUN)
# the cheap test first: every blank as a space, then a plain substring search (C speed, 20x
# faster than the regex over a block that holds no long run, which is nearly every block)
_BLANKS_AS_SPACES = bytes.maketrans(b"\t\r\n", b"   ")
_SPACE_RUN = b" " * BLANK_RUN
_NONBLANK = re.compile(rb"[^ \t\r\n]")


def _may_hold_long_run(body: bytes) -> bool:
    """Whether ``body`` may hold a blank run of :data:`BLANK_RUN` bytes: such a run covers at
    least 15 consecutive bytes of a stride of a sixteenth of it, so those bytes (256 per MiB)
    rule out nearly every block before the exact test."""
    samples = body[:: BLANK_RUN // 16].translate(_BLANKS_AS_SPACES)
    return b" " * 15 in samples and _SPACE_RUN in body.translate(_BLANKS_AS_SPACES)


class Blanks:
    """What :func:`squeeze_blanks` shortened: runs and bytes (a run of spaces alone could lie
    inside a string: :attr:`spaces` counts those)."""

    def __init__(self) -> None:
        self.runs = 0
        self.bytes = 0
        self.spaces = 0


class _Run:
    """The blank run being read, across blocks: its bytes while short, its length, whether
    it holds a newline, tab or CR."""

    def __init__(self) -> None:
        self.kept = bytearray()
        self.length = 0
        self.breaks = False

    def add(self, piece: bytes) -> None:
        self.length += len(piece)
        if not self.breaks and piece.strip(b" "):
            self.breaks = True
        if self.length < BLANK_RUN:
            self.kept += piece
        else:
            self.kept.clear()

    def flush(self, blanks: Blanks) -> bytes:
        out = squeezed(self.kept, self.length, self.breaks, blanks)
        self.kept.clear()
        self.length = 0
        self.breaks = False
        return out


def squeezed(kept: bytes | bytearray, length: int, breaks: bool, blanks: Blanks) -> bytes:
    """How a blank run of ``length`` bytes is kept (``kept``: its bytes when shorter than the
    bound; ``breaks``: it holds a newline, tab or CR)."""
    if length < BLANK_RUN:
        return bytes(kept)
    blanks.runs += 1
    if breaks:  # never inside a valid JSON string: nothing is lost
        blanks.bytes += length - 1
        return b"\n"
    keep = BLANK_RUN // 2
    blanks.bytes += length - keep
    blanks.spaces += 1
    return b" " * keep


def _inner(m: re.Match[bytes], blanks: Blanks) -> bytes:
    run = m.group(0)
    return squeezed(b"", len(run), bool(run.strip(b" ")), blanks)


def squeeze_blanks(blocks: Iterable[bytes], blanks: Blanks) -> Iterator[bytes]:
    """``blocks`` with every run of whitespace longer than :data:`BLANK_RUN` bytes shortened
    as it streams, so bytes between events cost no memory (a 2 MB gzip of 2 GB of blanks
    inside ``traceEvents`` stays a few MB): a run holding a newline, tab or CR becomes one
    newline (such a run is never inside a valid string, so nothing is lost); a run of spaces
    alone keeps half of :data:`BLANK_RUN` (it might be inside a string: counted in
    ``blanks.spaces``).  A run that spans blocks is followed across them, never held whole."""
    run = _Run()
    for raw in blocks:
        if not raw:
            continue
        first = _NONBLANK.search(raw)  # no copy of the block, unlike lstrip
        lead = first.start() if first is not None else len(raw)
        if lead == len(raw):
            run.add(raw)
            continue
        block = raw
        if lead or run.length:
            run.add(raw[:lead])
            yield run.flush(blanks)
            block = raw[lead:]
        body = block.rstrip(_BLANKS)
        if len(body) < len(block):
            run.add(block[len(body) :])
        if len(body) >= BLANK_RUN and _may_hold_long_run(body):
            body = _LONG_BLANK.sub(lambda m: _inner(m, blanks), body)
        yield body
    if run.length:
        yield run.flush(blanks)


class EventStream:
    """Split one document's ``traceEvents`` into decoded runs (see module docstring)."""

    def __init__(
        self, blocks: Iterable[bytes], origin: str, chunk_bytes: int = CHUNK_BYTES
    ) -> None:
        self.blanks = Blanks()
        self._blocks = iter(squeeze_blanks(blocks, self.blanks))
        self.origin = origin
        self.chunk_bytes = chunk_bytes
        self.meta: dict[str, Any] = {}
        self.form = "object"  # object | array | document (decoded whole) | other
        self.warning: str | None = None
        self.quote = False  # quote long timestamps before decoding (set by the caller)
        self.events_seen = 0
        self.bytes_read = 0
        # events skipped for not being JSON: (where it starts in the decompressed stream, the
        # bytes around the place it stops being JSON)
        self.invalid: list[tuple[int, bytes]] = []
        self._dropped = 0  # bytes cut from the front of the buffer so far
        self._tail_at = 0  # where the tail starts in the decompressed stream
        self._skip_end = -1  # where the last skipped event ended
        self._eof = False

    def _read(self, buf: bytearray) -> bool:
        if self._eof:
            return False
        for block in self._blocks:
            if block:
                buf += block
                self.bytes_read += len(block)
                return True
        self._eof = True
        return False

    def decode_piece(self, piece: bytes) -> list[Any] | None:
        """Decode a run of events (``piece`` holds them comma-separated, without brackets)."""
        return decode_piece(piece, self.quote)

    def _head(self, buf: bytearray) -> int | None:
        """Read up to the first event: its position in ``buf``, or None when the document must
        be decoded whole (metadata too large, an unusual layout)."""
        # the head: skip whitespace and a byte-order mark, find where the events begin
        while not buf.strip() and self._read(buf):
            pass
        if buf[:3] == b"\xef\xbb\xbf":
            del buf[:3]
        start = len(buf) - len(buf.lstrip())
        if start >= len(buf):
            raise TraceError(f"{self.origin}: empty file")
        lead = buf[start : start + 1]
        if lead == b"[":
            self.form = "array"
            return start + 1
        if lead == b"{":
            m = _EVENTS_KEY.search(buf, start)
            while m is None and len(buf) < _HEAD_LIMIT and self._read(buf):
                m = _EVENTS_KEY.search(buf, max(start, len(buf) - _HEAD_LIMIT))
            prefix_meta = None
            if m is not None:
                text = bytes(buf[start : m.start()]).rstrip()
                if text.endswith(b","):
                    text = text[:-1]
                prefix_meta = _try(text + b"}")
            if not isinstance(prefix_meta, dict):
                return None
            assert m is not None
            self.meta.update(prefix_meta)
            return m.end()
        raise TraceError(
            f"{self.origin}: not JSON (starts with {bytes(buf[start : start + 16])!r})"
        )

    def split(self) -> Iterator[tuple[str, Any]]:
        """The document in undecoded runs, for callers that decode elsewhere (worker processes).

        Yields ``("piece", bytes)`` for each guessed run (comma-separated events without
        brackets: :meth:`decode_piece` tells whether the guess holds), then ``("tail", bytes)``
        for the rest (see :func:`decode_tail`); or ``("events", list)`` once when the document
        had to be decoded whole.  Run boundaries are the ones :meth:`__iter__` guesses first;
        a caller whose piece does not decode must start again with :meth:`__iter__`.
        """
        buf = bytearray()
        pos = self._head(buf)
        if pos is None:
            for events, _ in self._whole(buf):
                yield "events", events
            return
        need = self.chunk_bytes
        while True:
            while len(buf) - pos < need and self._read(buf):
                pass
            if self._eof:
                break
            k = self._last_split(buf, pos, len(buf))
            if k < 0:
                need *= 2  # one event larger than the run: read more
                continue
            yield "piece", b"".join((memoryview(buf)[pos : k + 1],))
            self._cut_after(buf, k)
            pos = 0
            need = self.chunk_bytes
        self._tail_at = self._dropped + pos
        yield "tail", bytes(buf[pos:])

    def __iter__(self) -> Iterator[tuple[list[Any], bytes | None]]:
        buf = bytearray()
        head = self._head(buf)
        if head is None:
            yield from self._whole(buf)
            return
        pos = head
        need = self.chunk_bytes
        while True:
            while len(buf) - pos < need and self._read(buf):
                pass
            if self._eof:
                break
            k = self._last_split(buf, pos, len(buf))
            done = False
            for _ in range(8):  # a few guesses back, then read more
                if k < 0:
                    break
                # one copy, straight from the buffer (a slice would copy twice)
                piece = b"".join((memoryview(buf)[pos : k + 1],))
                events = self.decode_piece(piece)
                if events is not None:
                    self.events_seen += len(events)
                    yield events, piece
                    self._cut_after(buf, k)
                    pos = 0
                    done = True
                    break
                at = broken_at(b"[" + piece + b"]")
                around = around_broken(buf, pos, pos + at - 1) if at else None
                if around is not None:
                    # an event that is not JSON, with events after it: keep the ones before
                    # it, skip it, go on from the next one
                    last, start, resume, near = around
                    if last >= 0:
                        before = b"".join((memoryview(buf)[pos : last + 1],))
                        events = self.decode_piece(before)
                        if events is None:
                            k = self._last_split(buf, pos, k)
                            continue
                        self.events_seen += len(events)
                        yield events, before
                    self.note_invalid(self._dropped + start, self._dropped + resume, near)
                    self._cut_front(buf, resume)
                    pos = 0
                    done = True
                    break
                k = self._last_split(buf, pos, k)
            # no guess decoded: one event larger than the run, or broken JSON; grow geometrically
            # so a broken file costs a bounded number of attempts
            need = self.chunk_bytes if done else need * 2
        self._tail_at = self._dropped + pos
        yield from self._tail(bytes(buf[pos:]))

    def note_invalid(self, start: int, end: int, near: bytes) -> None:
        """Count a skipped stretch that is not JSON (offsets in the decompressed stream); one
        that starts where the last one ended is the same event going on (a false boundary
        inside it), not another."""
        if start != self._skip_end:
            self.invalid.append((start, near))
        self._skip_end = end

    def _cut_front(self, buf: bytearray, n: int) -> None:
        del buf[:n]
        self._dropped += n

    def _cut_after(self, buf: bytearray, k: int) -> None:
        """Drop the run ending with the ``}`` at ``k`` and the ``,`` after it: ``buf`` starts
        with the next event's ``{``."""
        m = _SPLIT_AT.match(buf, k)
        assert m is not None
        self._cut_front(buf, m.end() - 1)

    @staticmethod
    def _last_split(buf: bytearray, lo: int, hi: int) -> int:
        """Index of the last ``}`` in ``buf[lo:hi]`` that is followed by ``,`` and ``{``."""
        while True:
            j = buf.rfind(b"}", lo, hi)
            if j < 0:
                return -1
            if _SPLIT_AT.match(buf, j):
                return j
            hi = j

    def _tail(self, rest: bytes) -> Iterator[tuple[list[Any], bytes | None]]:
        """The last run: its events, the keys after the array, or a recovery from a cut."""
        events, meta, cut, quoted, skipped = decode_tail(rest, self.form, self.quote)
        self.quote = self.quote or quoted
        self.end(len(events) if events is not None else 0, meta, cut, skipped)
        if events is not None and (events or not cut):
            yield events, None

    def end(
        self,
        n_events: int,
        meta: dict[str, Any],
        cut: bool,
        skipped: list[tuple[int, int, bytes]] | None = None,
    ) -> None:
        """Account for the tail (see :func:`decode_tail`): count, keys, events skipped for not
        being JSON, the cut warning."""
        for start, end, near in skipped or ():
            self.note_invalid(self._tail_at + start, self._tail_at + end, near)
        self.meta.update(meta)
        self.events_seen += n_events
        if not cut:
            return
        if self.events_seen == 0:
            raise TraceError(f"{self.origin}: invalid JSON (no complete trace event in it)")
        lost_meta = " (keys written after the events, such as baseTimeNanoseconds, are lost)"
        self.warning = (
            f"{self.origin}: the trace is cut short (a profiler killed mid-write?); recovered "
            f"{self.events_seen} complete events from the first "
            f"{self.bytes_read + self.blanks.bytes} bytes"
            + (lost_meta if self.form == "object" else "")
        )

    def _whole(self, buf: bytearray) -> Iterator[tuple[list[Any], bytes | None]]:
        """Decode the document in one go (metadata too large, or an unusual layout)."""
        while self._read(buf):
            pass
        data = bytes(buf)
        buf.clear()
        if LONG_TS.search(data):
            data = quote_long_timestamps(data)
        try:
            doc = loads(data)
        except ValueError as exc:
            recovered = self._recover_whole(data)
            if recovered is None:
                raise TraceError(f"{self.origin}: invalid JSON ({exc})") from None
            doc = recovered
        del data
        self.form = "document"
        if isinstance(doc, list):
            self.form = "array"
            self.events_seen = len(doc)
            yield doc, None
            return
        if not isinstance(doc, dict):
            raise TraceError(f"{self.origin}: the JSON is neither a trace object nor an array")
        events = doc.pop("traceEvents", None)
        self.meta.update(doc)
        if events is None:
            if "nodes" in doc and "schema" in doc:
                raise TraceError(f"{self.origin}: {EXECUTION_TRACE_REFUSAL}")
            raise TraceError(f"{self.origin}: no 'traceEvents' in this JSON object")
        if not isinstance(events, list):
            raise TraceError(f"{self.origin}: 'traceEvents' is not a list")
        self.events_seen = len(events)
        yield events, None

    def _recover_whole(self, data: bytes) -> Any | None:
        m = _EVENTS_KEY.search(data)
        if m is None:
            return None
        text = data[: m.start()].rstrip()
        if text.endswith(b","):
            text = text[:-1]
        meta = _try(text.lstrip() + b"}")
        if not isinstance(meta, dict):
            return None
        got = last_complete_events(data[m.end() :], self.quote)
        if got is None:
            return None
        meta["traceEvents"] = got
        self.warning = (
            f"{self.origin}: the trace is cut short (a profiler killed mid-write?); "
            f"recovered {len(got)} complete events"
        )
        return meta
