"""Kineto / Chrome trace JSON of every era: a trace file, a run folder or a folder of per-rank
trace files (the fallback format: whatever no other format claims is read as this one, whose
reader says why a path is not a trace).

A path may be a trace file (``.json``, ``.json.gz``, ``.pt.trace.json[.gz]``, or any name: gzip is
detected by its magic bytes), a run folder (``run.json`` beside ``trace.json.gz`` or
``traces/rank<N>.json.gz``) or a folder of per-rank trace files (:func:`find_trace_files`).
A folder of run folders is not one trace: its reader names the run folders and reads none
(separate runs are never stacked as ranks; :func:`one_run` refuses files of several run
folders too).
Each file is streamed (:mod:`~opscope.trace.readers`, :mod:`~opscope.trace.jsonstream`),
converted (:mod:`~opscope.trace.kineto`) and linked (:mod:`~opscope.trace.link`) on its own,
then the files are stacked with their ranks (:mod:`~opscope.trace.parts`).  Several files are
ingested in parallel processes.  Each file's table is cached (:mod:`~opscope.trace.cache`)
unless ``cache=False``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from opscope.errors import TraceError
from opscope.trace import cache as _cache
from opscope.trace.formats.capture_details import FILE_NAME as CAPTURE_DETAILS
from opscope.trace.heap import between_parts
from opscope.trace.kineto import file as kineto_file
from opscope.trace.mempool import ingest_memory_pool, release_ingest_pool
from opscope.trace.model import Trace
from opscope.trace.parts import (
    FilePart,
    assign_ranks,
    combine,
    none_readable,
    rank_sorted,
    to_part,
    unreadable,
    unreadable_warning,
)
from opscope.trace.progress import tell

NAME = "kineto"

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
# run records, reports and TraceLens's capture details (opscope.trace.formats.capture_details)
_NOT_TRACES = ("run.json", "report.json", CAPTURE_DETAILS)
# parallel ingestion pays a process start (about a second of imports) per worker: only worth
# it when there is enough to parse
_PARALLEL_MIN_BYTES = 16 << 20


def is_trace_name(name: str) -> bool:
    """A file name a trace may have (``.json``, ``.json.gz``; not ``run.json``, ``report.json``
    or ``execution_details.json``)."""
    return name.endswith((".json", ".json.gz")) and name not in _NOT_TRACES


def is_trace_file(path: Path) -> bool:
    return path.is_file() and is_trace_name(path.name)


def find_trace_files(path: Path) -> list[Path]:
    """The trace files a path stands for."""
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder")
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TraceError(f"{path}: not a regular file or folder ({_kind(path)}): not a trace")
    ranks = path / "traces"
    if ranks.is_dir():
        files = sorted(p for p in ranks.iterdir() if is_trace_file(p))
        if files:
            return rank_sorted(files)
    for candidate in ("trace.json.gz", "trace.json"):
        if (path / candidate).is_file():
            return [path / candidate]
    files = sorted(p for p in path.iterdir() if is_trace_file(p))
    if not files:
        runs = run_folders_in(path)
        if runs:
            raise TraceError(_folder_of_runs(path, runs))
        raise TraceError(f"{path}: no trace files (*.json, *.json.gz) in this folder")
    return rank_sorted(files)


RUN_JSON = "run.json"  # what makes a folder a run folder (opscope.capture.runfolder)
_NAMED_RUNS = 6  # run folders named in an error; the rest are counted


def run_folders_in(path: Path) -> list[Path]:
    """The run folders (folders holding ``run.json``) directly inside ``path``, by name; none
    when ``path`` is itself a run folder or not a folder."""
    if not path.is_dir() or (path / RUN_JSON).is_file():
        return []
    try:
        return sorted(p for p in path.iterdir() if p.is_dir() and (p / RUN_JSON).is_file())
    except OSError:
        return []


def run_folder_of(file: Path) -> Path | None:
    """The run folder a trace file belongs to (``run.json`` beside it, or above its
    ``traces/`` or ``traces/cycle<K>/`` folder), or None."""
    for folder in (file.parent, file.parent.parent, file.parent.parent.parent):
        if (folder / RUN_JSON).is_file():
            return folder
        if folder.name != "traces" and not folder.name.startswith("cycle"):
            break
    return None


def _named(runs: list[Path]) -> str:
    names = ", ".join(p.name for p in runs[:_NAMED_RUNS])
    return names + (f" ... ({len(runs)} in all)" if len(runs) > _NAMED_RUNS else "")


def _folder_of_runs(path: Path, runs: list[Path]) -> str:
    """Why a folder of run folders is not read: the run folders it holds, and what to do."""
    what = "a run folder" if len(runs) == 1 else f"{len(runs)} run folders"
    return (
        f"{path}: holds {what}, not one trace: {_named(runs)}; report one "
        f"(opscope report {runs[0]}), or compare two with opscope diff A B"
    )


def one_run(files: list[Path]) -> None:
    """Refuse trace files of several run folders: separate runs are not ranks of one job."""
    runs: list[Path] = []
    for f in files:
        run = run_folder_of(f)
        if run is not None and run not in runs:
            runs.append(run)
    if len(runs) > 1:
        raise TraceError(
            f"files of {len(runs)} run folders, not ranks of one job: {_named(runs)}; report "
            f"one (opscope report {runs[0]}), or compare two with opscope diff A B"
        )


def _kind(path: Path) -> str:
    """What a path that is neither a regular file nor a folder is."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return exc.strerror or "unreadable"
    for test, name in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


def special_files(folder: Path) -> list[str]:
    """Entries of a folder named like traces that are not regular files (pipes, devices,
    links to them): skipped, and said so."""
    out: list[str] = []
    if not folder.is_dir():
        return out
    for p in sorted(folder.iterdir()):
        if is_trace_name(p.name) and not p.is_file() and not p.is_dir():
            out.append(f"{p}: skipped, not a regular file ({_kind(p)})")
    return out


def sniff(path: Path) -> bool:
    """Any file or folder: the fallback (its reader says what is wrong with a path that holds
    no trace)."""
    return path.is_file() or path.is_dir()


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The trace files ``path`` stands for (:func:`find_trace_files`), each through the cache,
    stacked with their ranks.  Of several files, one that cannot be read is left out and
    named (``TraceMeta.unreadable`` and a warning); when none can be read, the error says so."""
    files = find_trace_files(path)
    trace = load_files(files, cache=cache, max_bytes=max_bytes, workers=workers, folder=path)
    if path.is_dir():
        skipped = special_files(path) + special_files(path / "traces")
        trace.meta.warnings.extend(skipped)
    return trace


def load_files(
    files: list[Path],
    *,
    cache: bool = True,
    max_bytes: int | None = None,
    workers: int | None = None,
    folder: Path | None = None,
) -> Trace:
    """Trace files stacked with their ranks, in the order given (see :func:`load`); ``folder``
    names the job in the error when none can be read."""
    with ingest_memory_pool():
        loaded = _load_files(files, cache, max_bytes, workers)
        if len(files) == 1 and isinstance(loaded[0], TraceError):
            raise loaded[0]
        good = [(f, p) for f, p in zip(files, loaded, strict=True) if isinstance(p, FilePart)]
        bad = [(f, p) for f, p in zip(files, loaded, strict=True) if isinstance(p, TraceError)]
        if not good:
            where = folder or (files[0].parent if files else Path("."))
            raise TraceError(none_readable(where, [str(e) for _f, e in bad]))
        kept = [f for f, _p in good]
        parts = [p for _f, p in good]
        ranks = assign_ranks(kept, parts)
        trace = combine(kept, parts, ranks)
    taken = {r for r, _origin in ranks}
    for f, exc in bad:
        entry = unreadable(f, str(exc), taken)
        trace.meta.unreadable.append(entry)
        trace.meta.warnings.append(unreadable_warning(entry))
    return trace


def _load_files(
    files: list[Path], cache: bool, max_bytes: int | None, workers: int | None
) -> list[FilePart | TraceError]:
    """Each file's part, or the error that says why it cannot be read."""
    n_cpu = os.cpu_count() or 1
    limit = min(len(files), workers or n_cpu, n_cpu)
    total = 0
    for f in files:
        with contextlib.suppress(OSError):
            total += f.stat().st_size
    if limit < 2 or total < _PARALLEL_MIN_BYTES:
        return [_try_load(f, cache, max_bytes) for f in files]
    # the pool's modules only here (about 10 ms of a one-file report's start-up)
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    # spawn, not fork: the parent may hold Arrow/DuckDB threads, which fork does not copy
    with ProcessPoolExecutor(max_workers=limit, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_try_load, f, cache, max_bytes) for f in files]
        return [fut.result() for fut in futures]


def _try_load(path: Path, cache: bool, max_bytes: int | None) -> FilePart | TraceError:
    try:
        return load_file(path, cache=cache, max_bytes=max_bytes)
    except TraceError as exc:
        return exc


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


def ingest_file(
    path: Path, *, max_bytes: int | None = None, head_bytes: int | None = None
) -> FilePart:
    """Stream, convert and link one trace file (no cache); ``head_bytes``: its first that
    many decompressed bytes only (see :func:`load_head`)."""
    parsed, warnings = kineto_file.parse_file(path, max_bytes=max_bytes, head_bytes=head_bytes)
    tell("link", 0, 0)
    # the parse's freed runs and temporaries go back before the links make their arrays
    # (jemalloc keeps freed pages, glibc its holes, until asked): at 10M events the link
    # is the read's highest point
    release_ingest_pool()
    between_parts()
    return to_part(parsed, warnings, str(path))


def load_head(path: Path, head_bytes: int) -> Trace:
    """The events of one Kineto file's first ``head_bytes`` decompressed bytes, as a trace of
    their own: a preview of a large file (the explorer paints it while the whole file loads).
    Not cached; its event ids are its own, not the whole file's; what the file writes after
    its events (device properties, distributed info) is not in it; ``meta.warnings`` says
    that it is a preview."""
    with ingest_memory_pool():
        part = ingest_file(path, head_bytes=head_bytes)
        ranks = assign_ranks([path], [part])
        return combine([path], [part], ranks)
