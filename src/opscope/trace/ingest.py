"""Paths -> :class:`~opscope.trace.model.Trace`.

A path may be a trace file (``.json``, ``.json.gz``, ``.pt.trace.json[.gz]``), a run folder
(``run.json`` beside ``trace.json.gz`` or ``traces/rank<N>.json.gz``) or a folder of per-rank
trace files.  Each file is streamed (:mod:`~opscope.trace.readers`,
:mod:`~opscope.trace.jsonstream`), converted (:mod:`~opscope.trace.kineto`) and linked
(:mod:`~opscope.trace.link`) on its own, then the files are stacked with their ranks: from
``distributedInfo.rank``, else a ``rank<N>`` in the file name, else the files' order
(``TraceMeta.rank_origin`` says which).  Several files are ingested in parallel processes.

Each file's table is cached (:mod:`~opscope.trace.cache`) unless ``cache=False``.

Neuron profiles go to :mod:`~opscope.trace.neuron` (:func:`~opscope.trace.neuron.is_neuron_path`
says which paths are: a folder of Neuron Explorer Parquet tables, an ``explorer/`` folder, a
capture folder of NEFF/NTFF/protobuf files, legacy ``system_profile.json``, or a run folder
with a ``neuron/`` folder holding any of them).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from opscope.errors import TraceError
from opscope.trace import cache as _cache
from opscope.trace.kineto import file as kineto_file
from opscope.trace.kineto.columns import KinetoParse
from opscope.trace.link import Links, link, null_if_negative
from opscope.trace.model import Trace, TraceMeta
from opscope.trace.rows import as_int
from opscope.trace.schema import EVENT_SCHEMA

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_NOT_TRACES = ("run.json", "report.json")
# parallel ingestion pays a process start (about a second of imports) per worker: only worth
# it when there is enough to parse
_PARALLEL_MIN_BYTES = 16 << 20


def is_trace_file(path: Path) -> bool:
    name = path.name
    return path.is_file() and name.endswith((".json", ".json.gz")) and name not in _NOT_TRACES


def find_trace_files(path: Path) -> list[Path]:
    """The trace files a path stands for."""
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder")
    if path.is_file():
        return [path]
    ranks = path / "traces"
    if ranks.is_dir():
        files = sorted(p for p in ranks.iterdir() if is_trace_file(p))
        if files:
            return _rank_sorted(files)
    for candidate in ("trace.json.gz", "trace.json"):
        if (path / candidate).is_file():
            return [path / candidate]
    files = sorted(p for p in path.iterdir() if is_trace_file(p))
    if not files:
        raise TraceError(f"{path}: no trace files (*.json, *.json.gz) in this folder")
    return _rank_sorted(files)


def _rank_sorted(files: list[Path]) -> list[Path]:
    """rank2 before rank10: numeric order where names carry a rank, else by name."""

    def key(p: Path) -> tuple[int, int, str]:
        m = _RANK_IN_NAME.search(p.name)
        return (0, int(m.group(1)), p.name) if m else (1, 0, p.name)

    return sorted(files, key=key)


@dataclass
class FilePart:
    """One file, ingested: its table (ids from 0, rank 0) and its metadata."""

    table: pa.Table
    meta: dict[str, Any]  # TraceMeta.to_json_dict() of this file alone


def load(
    path: str | Path,
    *,
    cache: bool = True,
    max_bytes: int | None = None,
    workers: int | None = None,
) -> Trace:
    """Load a trace file, run folder, or folder of per-rank traces into a :class:`Trace`.

    ``cache=False`` neither reads nor writes the ingest cache.  ``max_bytes`` caps the
    decompressed size of each file (default: 16 GiB or ``$OPSCOPE_MAX_TRACE_BYTES``).
    ``workers`` caps the processes used for a folder of ranks (default: the CPU count).
    """
    p = Path(path)
    # a file is a Neuron profile only as a Parquet table or the legacy system JSON: other
    # files skip the import of the Neuron reader
    if p.is_dir() or p.name.endswith(".parquet") or p.name == "system_profile.json":
        from opscope.trace import neuron

        if neuron.is_neuron_path(p):
            return neuron.load_neuron(p, max_bytes=max_bytes)
    files = find_trace_files(Path(path))
    with ingest_memory_pool():
        parts = _load_files(files, cache, max_bytes, workers)
        ranks = _assign_ranks(files, parts)
        return _combine(files, parts, ranks)


class _PoolSwitch:
    lock = threading.Lock()
    users = 0
    before: pa.MemoryPool | None = None


@contextlib.contextmanager
def ingest_memory_pool() -> Iterator[None]:
    """Arrow's default memory pool switched to jemalloc (else the system allocator) while
    traces are ingested, then restored.

    Arrow's default, mimalloc, kept about 400 MB more resident at the peak of a 1 GB ingest
    (the per-run batches and temporaries, allocated and freed from several threads); jemalloc
    returns them: peak RSS 1.6 GB rather than 2.1 GB.  A buffer remembers its pool, so tables
    built here are freed correctly after the switch back.  Nested and concurrent loads share
    one switch.
    """
    sw = _PoolSwitch
    with sw.lock:
        if sw.users == 0:
            sw.before = pa.default_memory_pool()
            try:
                pa.set_memory_pool(pa.jemalloc_memory_pool())
            except NotImplementedError:  # a pyarrow built without jemalloc
                pa.set_memory_pool(pa.system_memory_pool())
        sw.users += 1
    try:
        yield
    finally:
        with sw.lock:
            sw.users -= 1
            if sw.users == 0 and sw.before is not None:
                pa.set_memory_pool(sw.before)
                sw.before = None


def load_document(doc: Any, origin: str = "<memory>") -> Trace:
    """Build a Trace from an already decoded Kineto document (tests, tools)."""
    from opscope.trace.kineto.builder import parse_kineto

    try:
        parsed = parse_kineto(doc)
    except ValueError as exc:
        raise TraceError(f"{origin}: {exc}") from None
    part = _to_part(parsed, [], origin)
    return _combine([Path(origin)], [part], [(0, "order")])


def _load_files(
    files: list[Path], cache: bool, max_bytes: int | None, workers: int | None
) -> list[FilePart]:
    n_cpu = os.cpu_count() or 1
    limit = min(len(files), workers or n_cpu, n_cpu)
    total = 0
    for f in files:
        with contextlib.suppress(OSError):
            total += f.stat().st_size
    if limit < 2 or total < _PARALLEL_MIN_BYTES:
        return [load_file(f, cache=cache, max_bytes=max_bytes) for f in files]
    # spawn, not fork: the parent may hold Arrow/DuckDB threads, which fork does not copy
    with ProcessPoolExecutor(max_workers=limit, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(load_file, f, cache=cache, max_bytes=max_bytes) for f in files]
        return [fut.result() for fut in futures]


def load_file(path: Path, *, cache: bool = True, max_bytes: int | None = None) -> FilePart:
    """One trace file -> its :class:`FilePart`, through the cache when ``cache``."""
    key = None
    if cache:
        try:
            key = _cache.content_key(path)
        except OSError:
            key = None  # unreadable: ingest_file reports it properly
        if key is not None:
            hit = _cache.get(key)
            if hit is not None:
                table, meta = hit
                meta = dict(meta)
                meta["paths"] = [str(path)]
                meta["cached"] = True
                return FilePart(table, meta)
    part = ingest_file(path, max_bytes=max_bytes)
    if key is not None:
        _cache.put(key, part.table, part.meta)
    return part


def ingest_file(path: Path, *, max_bytes: int | None = None) -> FilePart:
    """Stream, convert and link one trace file (no cache)."""
    parsed, warnings = parse_file(path, max_bytes=max_bytes)
    return _to_part(parsed, warnings, str(path))


def parse_file(path: Path, *, max_bytes: int | None = None) -> tuple[KinetoParse, list[str]]:
    """Stream and convert one Kineto file, not linked: its columns and the reader's warnings
    (large files are converted in worker processes; see :func:`kineto_file.parse_file`)."""
    return kineto_file.parse_file(path, max_bytes=max_bytes)


def _to_part(parsed: KinetoParse, warnings: list[str], origin: str) -> FilePart:
    links = link(parsed.events, parsed.flows)
    table = _event_table(parsed.events, links)
    m = parsed.meta
    meta = TraceMeta(paths=[origin], warnings=warnings, skipped=dict(parsed.skipped))
    if isinstance(m.get("deviceProperties"), list):
        meta.device_properties = [p for p in m["deviceProperties"] if isinstance(p, dict)]
    if isinstance(m.get("distributedInfo"), dict):
        meta.distributed_info = m["distributedInfo"]
    meta.base_time_ns = as_int(m.get("baseTimeNanoseconds"))
    meta.process_names = dict(parsed.process_names)
    meta.thread_names = {f"{p}/{t}": v for (p, t), v in parsed.thread_names.items()}
    meta.extra = {
        k: v
        for k, v in m.items()
        if k not in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds")
    }
    return FilePart(table, meta.to_json_dict())


def _event_table(raw: pa.Table, links: Links) -> pa.Table:
    n = raw.num_rows

    def one(arr: pa.Array) -> pa.ChunkedArray:
        return pa.chunked_array([arr])

    def enc(name: str) -> pa.ChunkedArray:
        col = raw.column(name)
        if pa.types.is_dictionary(col.type):  # encoded by kineto.classify.classify_table
            return col
        return one(col.combine_chunks().dictionary_encode())

    arrays = [
        one(pa.array(np.arange(n, dtype=np.int64))),
        one(pa.array(np.zeros(n, dtype=np.int32))),
        raw.column("source"),
        raw.column("kind"),
        enc("cat"),
        enc("name"),
        enc("pid"),
        enc("tid"),
        raw.column("lane"),
        raw.column("start_ns"),
        raw.column("dur_ns"),
        raw.column("correlation"),
        raw.column("external_id"),
        one(null_if_negative(links.parent)),
        one(null_if_negative(links.op)),
        one(pa.array(links.step.astype(np.int32), pa.int32(), mask=links.step < 0)),
        raw.column("args"),  # the largest column stays in its runs: no second copy
        one(null_if_negative(links.launch)),
    ]
    return pa.Table.from_arrays(arrays, schema=EVENT_SCHEMA)


def _assign_ranks(files: list[Path], parts: list[FilePart]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for order, (f, part) in enumerate(zip(files, parts, strict=True)):
        info = part.meta.get("distributed_info")
        rank = info.get("rank") if isinstance(info, dict) else None
        if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 2**31:
            out.append((rank, "distributedInfo"))
            continue
        m = _RANK_IN_NAME.search(f.name)
        if m and int(m.group(1)) < 2**31:
            out.append((int(m.group(1)), "file name"))
        else:
            out.append((order, "order"))
    seen: set[int] = set()
    for i, (r, origin) in enumerate(out):
        if r in seen:  # two files claim one rank: fall back to order
            out[i] = (max(seen) + 1, f"order ({origin} repeated rank {r})")
        seen.add(out[i][0])
    return out


def _shift(col: pa.ChunkedArray, offset: int) -> pa.ChunkedArray | pa.Array:
    import pyarrow.compute as pc

    return pc.add(col, pa.scalar(offset, pa.int64())) if offset else col


def _combine(files: list[Path], parts: list[FilePart], ranks: list[tuple[int, str]]) -> Trace:
    meta = TraceMeta(paths=[str(f) for f in files], cached=bool(parts))
    tables: list[pa.Table] = []
    offset = 0
    for part, (rank, origin) in zip(parts, ranks, strict=True):
        t = part.table
        if rank:
            ranks_col = pa.chunked_array([pa.array(np.full(t.num_rows, rank, dtype=np.int32))])
            t = t.set_column(1, "rank", ranks_col)
        if offset:
            for name in ("id", "parent_id", "op_id", "launch_id"):
                i = t.schema.get_field_index(name)
                t = t.set_column(i, name, _shift(t.column(name), offset))
        if rank or offset:
            t = pa.Table.from_arrays(t.columns, schema=EVENT_SCHEMA)  # restore not-null flags
        tables.append(t)
        offset += t.num_rows
        pm = TraceMeta.from_dict(part.meta)
        meta.cached = meta.cached and bool(part.meta.get("cached"))
        meta.ranks.append(rank)
        meta.rank_origin[rank] = origin
        meta.warnings.extend(pm.warnings)
        for reason, count in pm.skipped.items():
            meta.skipped[reason] = meta.skipped.get(reason, 0) + count
        if not meta.device_properties:
            meta.device_properties = pm.device_properties
        if meta.distributed_info is None:
            meta.distributed_info = pm.distributed_info
        if meta.base_time_ns is None:
            meta.base_time_ns = pm.base_time_ns
        meta.process_names.update(pm.process_names)
        meta.thread_names.update(pm.thread_names)
        for k, v in pm.extra.items():
            meta.extra.setdefault(k, v)
    if not tables:
        events = EVENT_SCHEMA.empty_table()
    elif len(tables) == 1:
        events = tables[0]
    else:
        events = pa.concat_tables(tables).unify_dictionaries().combine_chunks()
    return Trace(events, meta)
