"""The ingest cache: one trace file's normalised event table, keyed by content.

Layout: ``<cache dir>/traces/<key>.arrow`` (the table as an uncompressed Arrow IPC file) plus
``<key>.json`` (the file's :class:`~opscope.trace.model.TraceMeta` fields, the row count, the
table file's size and the key).  The cache dir is ``$OPSCOPE_CACHE_DIR``, else
``$XDG_CACHE_HOME/opscope``, else ``~/.cache/opscope``.

Why Arrow IPC, memory-mapped, rather than Parquet: re-opening is what the cache is for, and a
mapped IPC file is the table itself (no decoding, no copy; pages are read as they are
touched): 1-2 ms for a 100k-event trace and a few ms for a 1 GB one, where Parquet took 20 ms
and 0.6-1.8 s.  The price is disk: about 0.65x the JSON (Parquet with LZ4: 0.13x), so the
cache is kept under ``$OPSCOPE_CACHE_MAX_BYTES`` (default :data:`DEFAULT_MAX_BYTES`) by
removing the least recently used entries after each write.

The key is a SHA-256 hash of the file's bytes (as stored, compressed or not; large files
hashed in ranges on all cores, see :func:`content_key`) together with
:data:`~opscope.trace.schema.EVENT_SCHEMA_VERSION`, the opscope version and the reader's own
code, so an edited file, a new schema or a new release never reads an old entry.  An entry
is trusted only when both files decode, the key, row count and table size recorded in the
JSON match, and the schema is the current one; anything else is deleted and rebuilt.  Writes
go to a temporary name and are renamed into place, so a crash never leaves a half-written
entry under the real name (and a table mapped by a running process is never written over).
A cache that cannot be written (read-only home, full disk) is silently skipped: it is an
optimisation.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from opscope._version import __version__
from opscope.trace.commuser import user_patterns
from opscope.trace.schema import EVENT_SCHEMA, EVENT_SCHEMA_VERSION


def cache_dir() -> Path:
    """Where entries live (see the module docstring)."""
    env = os.environ.get("OPSCOPE_CACHE_DIR")
    if env:
        return Path(env) / "traces"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) / "opscope" if xdg else Path.home() / ".cache" / "opscope"
    return root / "traces"


@functools.cache
def _reader_digest() -> str:
    """A digest of the code that turns a file into the table, so that a changed reader (a fix
    between releases, a development checkout) never serves tables built by the old one."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    files = [*here.rglob("*.py"), *here.rglob("*.c")]  # the subpackages' modules too
    for name in sorted(p.relative_to(here).as_posix() for p in files):
        h.update(name.encode())
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


_PARALLEL_HASH_BYTES = 64 << 20


def _hash_range(path: Path, lo: int, hi: int) -> bytes:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        fh.seek(lo)
        left = hi - lo
        while left > 0:
            block = fh.read(min(left, 1 << 22))
            if not block:
                raise OSError(f"{path}: changed while being read")
            h.update(block)  # releases the GIL: the ranges hash in parallel
            left -= len(block)
    return h.digest()


def content_key(path: Path) -> str:
    """The cache key of a trace file: its content, the schema version, the opscope version and
    the trace reader's own code.

    Every byte counts.  Files above 64 MiB are hashed as a few equal ranges in threads (SHA-256
    of each range, then of the size and the ranges' digests), so a 1 GB file hashes on all
    cores; below that, one SHA-256 of the bytes.
    """
    h = hashlib.sha256()  # SHA extensions make it the fastest of hashlib on x86
    h.update(f"opscope {__version__} schema {EVENT_SCHEMA_VERSION} {_reader_digest()}\n".encode())
    user = user_patterns()
    if user:  # the user's communication kernels class events at ingestion
        h.update(f"comm kernels {user}\n".encode())
    size = path.stat().st_size
    n = min(os.cpu_count() or 1, 8)
    if size < _PARALLEL_HASH_BYTES or n < 2:
        with path.open("rb") as fh:
            while True:
                block = fh.read(1 << 22)
                if not block:
                    break
                h.update(block)
        return h.hexdigest()
    from opscope.trace.threads import map_in_order

    cuts = [size * i // n for i in range(n + 1)]
    digests = map_in_order(lambda i: _hash_range(path, cuts[i], cuts[i + 1]), range(n), n)
    h.update(f"ranges {size} {n}\n".encode())
    for d in digests:
        h.update(d)
    return h.hexdigest()


DEFAULT_MAX_BYTES = 20 << 30


def max_bytes() -> int:
    """The size the cache is kept under: ``$OPSCOPE_CACHE_MAX_BYTES``, else 20 GiB."""
    env = os.environ.get("OPSCOPE_CACHE_MAX_BYTES", "").strip()
    return int(env) if env.isdigit() else DEFAULT_MAX_BYTES


def _paths(key: str) -> tuple[Path, Path]:
    d = cache_dir()
    return d / f"{key}.arrow", d / f"{key}.json"


def _drop(key: str) -> None:
    for p in _paths(key):
        with contextlib.suppress(OSError):
            p.unlink()


def get(key: str) -> tuple[pa.Table, dict[str, Any]] | None:
    """The cached (table, meta dict) for ``key``, or None (a bad entry is removed)."""
    table_path, meta_path = _paths(key)
    if not meta_path.is_file() or not table_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("key") != key:
            raise ValueError("key mismatch")
        if meta.get("bytes") != table_path.stat().st_size:
            raise ValueError("size mismatch")
        # the buffers point into the mapping, which lives as long as they do
        with pa.memory_map(str(table_path)) as src:
            table = pa.ipc.open_file(src).read_all()
        if not table.schema.equals(EVENT_SCHEMA, check_metadata=False):
            raise ValueError("schema mismatch")
        if table.num_rows != meta.get("rows"):
            raise ValueError("row count mismatch")
        table.validate()
        table = table.replace_schema_metadata(EVENT_SCHEMA.metadata)
    except Exception:  # any damage at all: rebuild, never trust
        _drop(key)
        return None
    with contextlib.suppress(OSError):
        os.utime(meta_path)  # recently used: evicted last
    return table, meta["meta"]


def put(key: str, table: pa.Table, meta: dict[str, Any]) -> None:
    """Store an entry, then evict the least recently used ones beyond :func:`max_bytes`;
    failures are ignored (the cache is an optimisation)."""
    table_path, meta_path = _paths(key)
    tmp_t = table_path.with_name(f".{table_path.name}.{os.getpid()}.tmp")
    tmp_m = meta_path.with_name(f".{meta_path.name}.{os.getpid()}.tmp")
    try:
        table_path.parent.mkdir(parents=True, exist_ok=True)
        options = pa.ipc.IpcWriteOptions(unify_dictionaries=True)
        with (
            pa.OSFile(str(tmp_t), "wb") as sink,
            pa.ipc.new_file(sink, table.schema, options=options) as writer,
        ):
            writer.write_table(table)
        record = {"key": key, "rows": table.num_rows, "bytes": tmp_t.stat().st_size, "meta": meta}
        tmp_m.write_text(json.dumps(record, default=str), encoding="utf-8")
        # table first, meta last: a reader needs both, and a meta implies its table is whole
        os.replace(tmp_t, table_path)
        os.replace(tmp_m, meta_path)
    except (OSError, pa.ArrowException, TypeError, ValueError):
        for p in (tmp_t, tmp_m):
            with contextlib.suppress(OSError):
                p.unlink()
        return
    evict(max_bytes(), keep=key)


def evict(limit: int, keep: str | None = None) -> int:
    """Remove the least recently used entries (by their JSON's time, which :func:`get`
    refreshes) until the tables take at most ``limit`` bytes; ``keep`` stays whatever its
    size.  Returns the number of entries removed."""
    entries = []
    with contextlib.suppress(OSError):
        for old in cache_dir().glob("*.parquet"):  # entries of releases before 0.2: unreadable
            _drop(old.stem)
            with contextlib.suppress(OSError):
                old.unlink()
        for table_path in cache_dir().glob("*.arrow"):
            key = table_path.stem
            try:
                size = table_path.stat().st_size
                used = table_path.with_suffix(".json").stat().st_mtime
            except OSError:
                continue
            entries.append((used, size, key))
    total = sum(size for _, size, _ in entries)
    removed = 0
    for _, size, key in sorted(entries):
        if total <= limit:
            break
        if key == keep:
            continue
        _drop(key)
        total -= size
        removed += 1
    return removed
