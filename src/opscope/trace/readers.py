"""Reading trace files: a path -> a stream of decompressed byte blocks, with one-line errors.

Contract:

* ``.json`` and ``.json.gz`` of any name (gzip is detected by its magic bytes, concatenated
  gzip members are read in turn).  The file is never held whole: blocks of a few MiB are
  yielded as they decompress, so memory stays flat however large the trace.
* A decompressed-size cap (``max_bytes``; default :data:`MAX_DECOMPRESSED_BYTES`, env
  ``OPSCOPE_MAX_TRACE_BYTES``) turns a decompression bomb into a :class:`TraceError`; so does
  a gzip that inflates past :data:`MAX_INFLATE_RATIO` times its compressed size (env
  ``OPSCOPE_MAX_INFLATE``; real traces inflate 5-30x) once past :data:`INFLATE_FLOOR_BYTES`.
* A gzip stream that ends early (a profiler killed mid-write) or turns to garbage after some
  good data is not an error here: the blocks decoded so far are yielded and
  :attr:`ByteStream.cut` records why; the JSON layer recovers the complete events.
* Every failure that is the file's fault raises :class:`TraceError` naming the file.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Generator, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import BinaryIO, cast

from opscope.errors import TraceError
from opscope.trace.progress import tell

# gunzip through ISA-L where it is installed (2-5x faster inflate than zlib on the shared
# traces, the same API); zlib otherwise.
_inflate: ModuleType
try:
    from isal import isal_zlib as _inflate

    _INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflate.error)
except ImportError:  # a platform without isal wheels
    _inflate = zlib
    _INFLATE_ERRORS = (zlib.error,)

# Larger than any real profile we have seen (the biggest public ones are a few GB); a cap only
# exists so a decompression bomb cannot take the machine's memory.
MAX_DECOMPRESSED_BYTES = 16 * 1024**3
BLOCK_BYTES = 1 << 20
# Real Kineto traces inflate 5-30x (the shared ones at most 26x); JSON that inflates 200x is
# padding, not events.  Small files may inflate more (short repetitive traces): the ratio is
# only checked past a floor.
MAX_INFLATE_RATIO = 200
INFLATE_FLOOR_BYTES = 256 << 20

_GZIP_MAGIC = b"\x1f\x8b"


def max_decompressed_bytes(override: int | None = None) -> int:
    """The cap in force: ``override``, else ``$OPSCOPE_MAX_TRACE_BYTES``, else the default."""
    if override is not None:
        return override
    env = os.environ.get("OPSCOPE_MAX_TRACE_BYTES", "").strip()
    if env.isdigit():
        return int(env)
    return MAX_DECOMPRESSED_BYTES


_SCOPED_INFLATE: ContextVar[float | None] = ContextVar("opscope_max_inflate", default=None)


@contextlib.contextmanager
def inflate_bound(ratio: float | None) -> Iterator[None]:
    """While open, in this context only (a cluster task's), :func:`max_inflate_ratio` is
    ``ratio`` (None: as it would be)."""
    token = _SCOPED_INFLATE.set(ratio)
    try:
        yield
    finally:
        _SCOPED_INFLATE.reset(token)


@dataclass
class _ProcessSettings:
    """The process's own reading settings (the CLI's flags for one command), set only by
    :func:`process_inflate_bound`."""

    max_inflate: float | None = None


_PROCESS = _ProcessSettings()


@contextlib.contextmanager
def process_inflate_bound(ratio: float | None) -> Iterator[None]:
    """While open, in every thread of this process (the CLI's ``--max-inflate`` for one
    command; 0: no bound), :func:`max_inflate_ratio` is ``ratio`` (None: as it would be),
    unless a context's :func:`inflate_bound` says otherwise.  A setting, not an environment
    variable: nothing of it outlives the block."""
    old = _PROCESS.max_inflate
    if ratio is not None:
        _PROCESS.max_inflate = ratio if ratio > 0 else float("inf")
    try:
        yield
    finally:
        _PROCESS.max_inflate = old


def configured_max_inflate() -> float | None:
    """The bound someone set (a context's, the process's, ``$OPSCOPE_MAX_INFLATE``), or None
    where the default is in force."""
    if _SCOPED_INFLATE.get() is not None or _PROCESS.max_inflate is not None:
        return max_inflate_ratio()
    return max_inflate_ratio() if os.environ.get("OPSCOPE_MAX_INFLATE", "").strip() else None


def max_inflate_ratio() -> float:
    """The inflation bound in force: the one :func:`inflate_bound` puts in force, else the
    process's (:func:`process_inflate_bound`), else ``$OPSCOPE_MAX_INFLATE`` (0: none), else
    the default."""
    scoped = _SCOPED_INFLATE.get()
    if scoped is not None:
        return scoped
    if _PROCESS.max_inflate is not None:
        return _PROCESS.max_inflate
    env = os.environ.get("OPSCOPE_MAX_INFLATE", "").strip()
    try:
        value = float(env) if env else float(MAX_INFLATE_RATIO)
    except ValueError:
        return float(MAX_INFLATE_RATIO)
    return value if value > 0 else float("inf")


def _open(path: Path) -> tuple[BinaryIO, bytes]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a folder, not a trace file") from None
    except PermissionError:
        raise TraceError(f"{path}: permission denied") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return fh, fh.read(2)


class ByteStream:
    """Iterate the decompressed bytes of one trace file in blocks.

    After iteration: ``total`` is the number of decompressed bytes yielded and ``cut`` is
    ``None`` or a short reason why the data ended early (truncated or corrupt gzip, or
    ``stop_after`` reached: then ``stopped`` is true).
    """

    def __init__(
        self,
        path: Path,
        max_bytes: int | None = None,
        block: int = BLOCK_BYTES,
        *,
        stop_after: int | None = None,
    ) -> None:
        self.path = path
        self.max_bytes = max_decompressed_bytes(max_bytes)
        self.block = block
        #: read the first this many decompressed bytes only (a preview): ``cut`` says so
        self.stop_after = stop_after
        self.stopped = False
        self.total = 0
        self.cut: str | None = None
        self.gzip = False

    def _too_big(self) -> TraceError:
        return TraceError(
            f"{self.path}: decompresses to more than {self.max_bytes} bytes "
            "(a decompression bomb?); refusing"
        )

    def __iter__(self) -> Iterator[bytes]:
        if self.stop_after is None:
            yield from self._blocks()
            return
        sent = 0
        blocks = cast("Generator[bytes, None, None]", self._blocks())
        with contextlib.closing(blocks):  # closing the generator closes the file at once
            for block in blocks:
                room = self.stop_after - sent
                if len(block) > room:  # more than the preview holds: the rest is not read
                    if room:
                        yield block[:room]
                    self.total = self.stop_after
                    self.stopped = True
                    self.cut = f"read to its first {self.stop_after} bytes only (a preview)"
                    return
                sent += len(block)
                yield block

    def _blocks(self) -> Iterator[bytes]:
        fh, head = _open(self.path)
        with fh:
            if head == _GZIP_MAGIC:
                self.gzip = True
                yield from self._gunzip(fh, head)
                return
            if self.path.name.endswith(".gz"):
                raise TraceError(f"{self.path}: named .gz but is not gzip data")
            size = self.path.stat().st_size
            if size > self.max_bytes:
                raise TraceError(
                    f"{self.path}: {size} bytes is over the {self.max_bytes} byte limit"
                )
            data = head
            read_size = max(1, min(self.block, size))  # no buffer larger than the file
            while True:
                chunk = fh.read(read_size)
                if data:
                    chunk = data + chunk
                    data = b""
                if not chunk:
                    return
                self.total += len(chunk)
                if self.total > self.max_bytes:
                    raise self._too_big()
                tell("read", self.total, size)
                yield chunk

    def _gunzip(self, fh: BinaryIO, head: bytes) -> Iterator[bytes]:
        decomp = _inflate.decompressobj(16 + zlib.MAX_WBITS)
        pending = head
        compressed = self.path.stat().st_size
        ratio = max_inflate_ratio()
        inflate_cap = max(INFLATE_FLOOR_BYTES, ratio * compressed)
        # read compressed input in smaller pieces so one block of a bomb cannot expand far
        # past the cap before we look at it (and no buffer larger than the file)
        read_size = max(1, min(1 << 20, compressed))
        while True:
            data = pending + fh.read(read_size)
            pending = b""
            tell("read", fh.tell(), compressed)
            if not data:
                break
            while data:
                try:
                    out = decomp.decompress(data, self.block)
                except _INFLATE_ERRORS as exc:
                    if self.total == 0:
                        raise TraceError(f"{self.path}: not valid gzip data ({exc})") from None
                    self.cut = f"the gzip data is corrupt after {self.total} bytes ({exc})"
                    return
                if out:
                    self.total += len(out)
                    if self.total > self.max_bytes:
                        raise self._too_big()
                    if self.total > inflate_cap:
                        raise TraceError(
                            f"{self.path}: inflates over {ratio:g}x its {compressed} compressed "
                            "bytes (a decompression bomb?); refusing (--max-inflate 0 or "
                            "OPSCOPE_MAX_INFLATE=0 lifts the bound)"
                        )
                    yield out
                if decomp.eof:
                    rest = decomp.unused_data
                    decomp = _inflate.decompressobj(16 + zlib.MAX_WBITS)
                    if not rest:
                        rest = fh.read(2)
                        if not rest:
                            return  # the last member ended with the file: clean
                    if rest[:2] == _GZIP_MAGIC or (len(rest) == 1 and rest == b"\x1f"):
                        data = rest  # a concatenated member
                        continue
                    if rest.strip(b"\x00"):
                        self.cut = "unexpected bytes after the gzip data"
                    return
                data = decomp.unconsumed_tail
        if self.total == 0 and not decomp.eof:
            raise TraceError(f"{self.path}: gzip data is empty or cut before any content")
        if not decomp.eof:
            self.cut = f"the gzip stream ends early, after {self.total} decompressed bytes"


_HEADS: ContextVar[dict[tuple[Path, int], tuple[bytes, bool]] | None] = ContextVar(
    "opscope_heads", default=None
)


@contextlib.contextmanager
def shared_heads() -> Iterator[None]:
    """While open, :func:`head` decompresses each file's head once (format detection: several
    sniffers look at the same first bytes in turn)."""
    token = _HEADS.set({})
    try:
        yield
    finally:
        _HEADS.reset(token)


def head(path: Path, size: int) -> tuple[bytes, bool]:
    """The first ``size`` decompressed bytes of a trace file and whether that is all of it
    (:class:`TraceError` or ``OSError`` as :class:`ByteStream` raises them)."""
    memo = _HEADS.get()
    got = memo.get((path, size)) if memo is not None else None
    if got is not None:
        return got
    stream = ByteStream(path, block=size, stop_after=size)
    data = b"".join(stream)
    got = data, not stream.stopped
    if memo is not None:
        memo[(path, size)] = got
    return got


def is_gzip(path: Path) -> bool:
    """Whether the file is gzip data (by its magic bytes, whatever its name)."""
    fh, first = _open(path)
    with fh:
        return first == _GZIP_MAGIC


def read_bytes(path: Path, max_bytes: int | None = None) -> bytes:
    """The file's decompressed bytes, whole (small files, tools; ingestion streams instead)."""
    return b"".join(ByteStream(path, max_bytes))
