"""Reading trace files: paths -> decoded JSON documents, with one-line errors.

Accepts ``.json``, ``.json.gz`` (any name; gzip is detected by its magic bytes) in Chrome's
object form (``{"traceEvents": [...]}``) or bare-array form.  A decompressed size cap protects
against decompression bombs.
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path
from typing import Any

import orjson

from opscope.errors import TraceError

# Larger than any real profile we have seen (the biggest public ones are a few GB); a cap only
# exists so a decompression bomb cannot take the machine's memory.
MAX_DECOMPRESSED_BYTES = 16 * 1024**3

_GZIP_MAGIC = b"\x1f\x8b"
# A "ts" whose digits exceed what a double holds exactly (more than 15 significant digits), e.g.
# Unix-epoch microseconds with a nanosecond part: 1712195495519695.812
_LONG_TS = re.compile(rb'"ts"\s*:\s*(-?\d{13,}\.\d+)')


def read_bytes(path: Path, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """The file's decompressed bytes."""
    try:
        with path.open("rb") as fh:
            head = fh.read(2)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a folder, not a trace file") from None
    except PermissionError:
        raise TraceError(f"{path}: permission denied") from None
    if head == _GZIP_MAGIC:
        return _gunzip(path, max_bytes)
    if path.suffix == ".gz":
        raise TraceError(f"{path}: named .gz but is not gzip data")
    size = path.stat().st_size
    if size > max_bytes:
        raise TraceError(f"{path}: {size} bytes is over the {max_bytes} byte limit")
    return path.read_bytes()


def _gunzip(path: Path, max_bytes: int) -> bytes:
    out = bytearray()
    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        with path.open("rb") as fh:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                out += decomp.decompress(chunk, max_bytes + 1 - len(out))
                if len(out) > max_bytes:
                    raise TraceError(
                        f"{path}: decompresses to more than {max_bytes} bytes "
                        "(a decompression bomb?); refusing"
                    )
                while decomp.unconsumed_tail:
                    out += decomp.decompress(decomp.unconsumed_tail, max_bytes + 1 - len(out))
                    if len(out) > max_bytes:
                        raise TraceError(
                            f"{path}: decompresses to more than {max_bytes} bytes "
                            "(a decompression bomb?); refusing"
                        )
                if decomp.eof and decomp.unused_data:
                    # concatenated gzip members
                    rest = decomp.unused_data
                    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    out += decomp.decompress(rest)
    except (zlib.error, gzip.BadGzipFile, EOFError) as exc:
        if not out:
            raise TraceError(f"{path}: not valid gzip data ({exc})") from None
        # a truncated gzip stream: keep what decompressed; the JSON layer recovers events
    return bytes(out)


def _quote_long_timestamps(data: bytes) -> bytes:
    """Turn over-long numeric ``ts`` values into strings so no digit is lost to a double."""
    return _LONG_TS.sub(
        lambda m: (
            b'"ts":"' + m.group(1) + b'"'
            if len(m.group(1).replace(b".", b"").lstrip(b"-")) > 15
            else m.group(0)
        ),
        data,
    )


def decode_json(data: bytes, origin: str) -> tuple[Any, str | None]:
    """Decode trace JSON.  Returns ``(document, warning)``; a truncated document is recovered."""
    if not data.strip():
        raise TraceError(f"{origin}: empty file")
    if _LONG_TS.search(data, 0, 1 << 16) or _LONG_TS.search(data):
        data = _quote_long_timestamps(data)
    try:
        return orjson.loads(data), None
    except orjson.JSONDecodeError as exc:
        first_error = str(exc)
    # orjson refuses integers beyond 64 bits; the standard library takes them
    import json

    try:
        return json.loads(data), None
    except (ValueError, RecursionError):
        pass
    recovered = _recover_truncated(data)
    if recovered is not None:
        doc, kept = recovered
        return doc, (
            f"{origin}: the trace is truncated (a profiler killed mid-write?); "
            f"recovered {kept} complete events before the cut"
        )
    lead = data.lstrip()[:1]
    if lead not in (b"{", b"["):
        raise TraceError(f"{origin}: not JSON (starts with {data.lstrip()[:16]!r})")
    raise TraceError(f"{origin}: invalid JSON ({first_error})")


def _recover_truncated(data: bytes) -> tuple[Any, int] | None:
    """Keep every complete event of a ``traceEvents`` array that was cut short.

    Walk back from the end over closing braces and try to close the array there; a cut inside an
    event fails to parse and the next brace back is tried.  Bounded, so garbage cannot hang us.
    """
    m = re.search(rb'"traceEvents"\s*:\s*\[', data)
    stripped = data.lstrip()
    if m is None and not stripped.startswith(b"["):
        return None
    floor = m.end() if m is not None else len(data) - len(stripped) + 1
    end = len(data)
    for _ in range(10_000):
        end = data.rfind(b"}", floor, end)
        if end < 0:
            return None
        tail = b"]}" if m is not None else b"]"
        try:
            doc = orjson.loads(data[: end + 1] + tail)
        except orjson.JSONDecodeError:
            continue
        events = doc.get("traceEvents") if isinstance(doc, dict) else doc
        return doc, len(events) if isinstance(events, list) else 0
    return None
