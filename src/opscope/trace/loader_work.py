"""The work of a DataLoader's worker processes, read from their own traces.

A ``DataLoader`` with ``num_workers > 0`` loads its batches in other processes: the trace of
the process that runs the steps shows only the wait (``enumerate(DataLoader)#...__next__``).
Each worker profiled on its own (``opscope.capture.loader_workers.profile_loader_workers``,
or any ``torch.profiler`` run inside ``worker_init_fn``) writes a Kineto trace of its process;
:func:`load_loader_work` reads those beside the main trace and keeps each worker's top-level
work (the roots of its op tree: ``record_function`` ranges, ops, with Python frames looked
through), on the clock the main trace uses (Kineto's timestamps on one host are one clock).

Files that cannot be a loader worker's of this run are refused, one line each: a trace with
training steps (a rank's, not a worker's), another host's, one whose events are all outside
the main trace's time, the main trace itself.
"""

from __future__ import annotations

import glob as globbing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from opscope.errors import OpscopeError, TraceError
from opscope.trace.model import Trace

#: how far outside the main trace's time a worker's events may lie and still be its run's
#: (a worker starts before the main profiler and ends after it)
SLACK_NS = 60 * 10**9


#: the folder beside a trace (or inside a run folder) whose files are its loader workers'
LOADER_FOLDER = "loader_traces"


def loader_files(
    source: Trace | str | Path | Sequence[str | Path],
    given: str | Path | Sequence[str | Path] | bool | None,
) -> list[str | Path]:
    """What :func:`opscope.analysis.api.analyze`'s ``loader_traces`` names: as given (files,
    folders, globs: read by :func:`load_loader_work`), none for False, else the
    ``loader_traces/`` folder beside the trace or inside its run folder."""
    if given is False:
        return []
    if given is None or given is True:
        if isinstance(source, Trace):
            paths = [Path(p) for p in source.meta.paths]
        elif isinstance(source, (str, Path)):
            paths = [Path(source)]
        else:
            return []
        if len(paths) != 1:
            return []
        here = paths[0] if paths[0].is_dir() else paths[0].parent
        folder = here / LOADER_FOLDER
        if not folder.is_dir():
            if given is True:
                raise OpscopeError(f"loader_traces: no {LOADER_FOLDER}/ folder in {here}")
            return []
        given = folder
    # folders and globs are expanded where the files are read (load_loader_work)
    return [given] if isinstance(given, (str, Path)) else list(given)


@dataclass(frozen=True)
class LoaderWorker:
    """One worker process's trace: its path, process ids and how much top-level work it holds."""

    path: str
    pids: list[str]
    events: int
    busy_ns: int


@dataclass(frozen=True)
class LoaderWork:
    """The top-level work of every worker, as intervals on the main trace's clock (ns):
    ``worker`` indexes :attr:`workers`, ``name`` the event's name."""

    workers: list[LoaderWorker] = field(default_factory=list)
    worker: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    name: list[str] = field(default_factory=list)
    start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.start)


def loader_paths(given: Sequence[str | Path]) -> list[Path]:
    """The files named by ``given`` (paths, folders of trace files or glob patterns), sorted,
    each once; a pattern that matches nothing, a folder with no trace file or a path that is
    not there is an error."""
    from opscope.trace.formats.listing import is_pattern

    out: list[Path] = []
    for item in given:
        text = str(item)
        if is_pattern(text):
            matched = sorted(Path(p) for p in globbing.glob(text) if Path(p).is_file())
            if not matched:
                raise TraceError(f"--loader-traces {text}: no file matches")
            out.extend(matched)
        elif Path(text).is_dir():
            files = sorted(f for f in Path(text).iterdir() if f.is_file() and ".json" in f.name)
            if not files:
                raise TraceError(f"loader_traces: {text} holds no trace file (*.json, *.json.gz)")
            out.extend(files)
        elif Path(text).is_file():
            out.append(Path(text))
        else:
            raise TraceError(f"--loader-traces {text}: no such file")
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def _host(trace: Trace) -> str | None:
    host = trace.meta.extra.get("host_name")
    return host if isinstance(host, str) and host else None


def _span(trace: Trace) -> tuple[int, int] | None:
    idx = trace.index
    if not idx.n:
        return None
    return int(idx.start.min()), int(idx.end.max())


def worker_roots(trace: Trace) -> np.ndarray:
    """The rows of a worker trace's top-level work: op-tree roots with time."""
    idx = trace.index
    return np.flatnonzero(
        idx.in_tree & (idx.tree_parent < 0) & (idx.dur > 0) & ~idx.kind.eq("step")
    )


def load_loader_work(given: Sequence[str | Path], main: Trace, *, cache: bool = True) -> LoaderWork:
    """The workers' top-level work from their trace files (paths or globs; see the module
    docstring for what is refused)."""
    from opscope.trace.ingest import load

    paths = loader_paths(given)
    main_paths = {Path(p).resolve() for p in main.meta.paths}
    host = _host(main)
    span = _span(main)
    workers: list[LoaderWorker] = []
    who: list[np.ndarray] = []
    names: list[str] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    for path in paths:
        if path.resolve() in main_paths:
            raise TraceError(f"--loader-traces {path}: this is the main trace itself")
        trace = load(path, cache=cache)
        idx = trace.index
        if idx.n and bool(idx.kind.eq("step").any()):
            raise TraceError(
                f"--loader-traces {path}: it holds training steps (ProfilerStep), so it is a "
                "rank's trace, not a DataLoader worker's"
            )
        if host is not None and _host(trace) not in (None, host):
            raise TraceError(
                f"--loader-traces {path}: recorded on host {_host(trace)!r}, the main trace on "
                f"{host!r}: a worker runs on the host of its loader"
            )
        own = _span(trace)
        if (
            span is not None
            and own is not None
            and (own[1] < span[0] - SLACK_NS or own[0] > span[1] + SLACK_NS)
        ):
            raise TraceError(
                f"--loader-traces {path}: its events are all outside the main trace's time "
                "(another run's worker?)"
            )
        rows = worker_roots(trace)
        k = len(workers)
        pids = sorted({idx.pid[int(r)] for r in rows.tolist()} or set(trace.meta.process_names))
        busy = int((idx.end[rows] - idx.start[rows]).sum())
        workers.append(LoaderWorker(str(path), [str(p) for p in pids], len(rows), busy))
        who.append(np.full(len(rows), k, np.int64))
        names.extend(n or "" for n in idx.name.values_at(rows))
        starts.append(idx.start[rows].astype(np.int64))
        ends.append(idx.end[rows].astype(np.int64))
    if not workers:
        return LoaderWork()
    return LoaderWork(
        workers=workers,
        worker=np.concatenate(who),
        name=names,
        start=np.concatenate(starts),
        end=np.concatenate(ends),
    )


__all__ = [
    "LOADER_FOLDER",
    "LoaderWork",
    "LoaderWorker",
    "load_loader_work",
    "loader_files",
    "loader_paths",
    "worker_roots",
]
