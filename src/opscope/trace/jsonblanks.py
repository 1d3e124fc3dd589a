"""Whitespace between events, shortened as it streams (:func:`squeeze_blanks`), so that a
document padded with gigabytes of blanks costs no memory; :class:`Blanks` counts what was
shortened."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

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
