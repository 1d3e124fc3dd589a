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
:attr:`EventStream.invalid` (:mod:`opscope.trace.jsonrecover`).  All loops are
bounded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from opscope.errors import TraceError
from opscope.trace.jsonblanks import Blanks, squeeze_blanks
from opscope.trace.jsondecode import (
    LONG_TS,
    SPLIT_AT,
    decode_piece,
    loads,
    quote_long_timestamps,
    try_loads,
)
from opscope.trace.jsonrecover import around_broken, broken_at, decode_tail, last_complete_events

CHUNK_BYTES = 2 << 20
_HEAD_LIMIT = 64 << 20  # metadata before "traceEvents" larger than this: decode whole

_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
# Why a PyTorch execution trace (``nodes`` and ``schema``, no ``traceEvents``) is refused; the
# file's path goes before it.  opscope.trace.formats.execution_trace refuses one by its first
# bytes; this reader refuses one met inside a folder of ranks.
EXECUTION_TRACE_REFUSAL = (
    "a PyTorch execution trace (graph of ops, no timings), not a Kineto trace; "
    "pass the Kineto trace recorded beside it"
)


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
                prefix_meta = try_loads(text + b"}")
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
        m = SPLIT_AT.match(buf, k)
        assert m is not None
        self._cut_front(buf, m.end() - 1)

    @staticmethod
    def _last_split(buf: bytearray, lo: int, hi: int) -> int:
        """Index of the last ``}`` in ``buf[lo:hi]`` that is followed by ``,`` and ``{``."""
        while True:
            j = buf.rfind(b"}", lo, hi)
            if j < 0:
                return -1
            if SPLIT_AT.match(buf, j):
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
        meta = try_loads(text.lstrip() + b"}")
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
