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
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from opscope.errors import TraceError
from opscope.trace import cache as _cache
from opscope.trace.kineto import file as kineto_file
from opscope.trace.kineto.columns import KinetoParse
from opscope.trace.mempool import ingest_memory_pool
from opscope.trace.model import Trace
from opscope.trace.parts import RANK_IN_NAME, FilePart, assign_ranks, combine, to_part

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
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
        m = RANK_IN_NAME.search(p.name)
        return (0, int(m.group(1)), p.name) if m else (1, 0, p.name)

    return sorted(files, key=key)


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
        from opscope.trace.neuron.layout import is_neuron_path

        if is_neuron_path(p):
            from opscope.trace.neuron.loader import load_neuron

            return load_neuron(p, max_bytes=max_bytes)
    files = find_trace_files(Path(path))
    with ingest_memory_pool():
        parts = _load_files(files, cache, max_bytes, workers)
        ranks = assign_ranks(files, parts)
        return combine(files, parts, ranks)


def load_document(doc: Any, origin: str = "<memory>") -> Trace:
    """Build a Trace from an already decoded Kineto document (tests, tools)."""
    from opscope.trace.kineto.builder import parse_kineto

    try:
        parsed = parse_kineto(doc)
    except ValueError as exc:
        raise TraceError(f"{origin}: {exc}") from None
    part = to_part(parsed, [], origin)
    return combine([Path(origin)], [part], [(0, "order")])


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
    return to_part(parsed, warnings, str(path))


def parse_file(path: Path, *, max_bytes: int | None = None) -> tuple[KinetoParse, list[str]]:
    """Stream and convert one Kineto file, not linked: its columns and the reader's warnings
    (large files are converted in worker processes; see :func:`kineto_file.parse_file`)."""
    return kineto_file.parse_file(path, max_bytes=max_bytes)
