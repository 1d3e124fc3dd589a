"""The map of a job on a Dask cluster: the tasks a worker runs, each on one rank's file.

Rounds (:mod:`opscope.analysis.cluster`): (1) :func:`read_rank` reads the file and sends back
its metadata, row count and time span, or why it cannot be read; (2) :func:`analyze_rank`
analyses the rank exactly as the local path does and sends back its
:class:`~opscope.analysis.job.RankReport`, optionally writing its event table
(:func:`write_events`); (3) :func:`rank_path` its critical path with its waits and its graph
contracted for the job path; (4) :func:`expand_path` the job path's runs there expanded to
pieces; (5) :func:`recontract_rank` the contraction again with each of the job's fixes.

Each task takes the coordinator's :class:`Settings` as an argument: the format, the cache,
the reading limits and the user's communication kernels.  They are put in force for that
task only (context variables of its thread, :func:`Settings.scope`), never in the worker's
environment, so that two tasks in one worker process each read with their own.  A file by
URL is read from the worker's copy (:mod:`.plugin`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opscope.errors import TraceError
from opscope.trace.parts import FilePart
from opscope.trace.remote import Downloads

Member = tuple[int, int, float]
"""A rank's part in a matched instance: ``(instance, position in the rank's records, the
rank's wait there in µs)``."""


def _env_int(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() else None


@dataclass(frozen=True)
class Settings:
    """What a rank's tasks read with (see the module docstring); None: the worker's own."""

    format: str = "kineto"
    cache: bool = True
    max_trace_bytes: int | None = None
    max_inflate: float | None = None
    comm_kernels: str | None = None

    @classmethod
    def here(cls, format: str, cache: bool) -> Settings:
        """This process's settings (its environment: ``OPSCOPE_MAX_TRACE_BYTES``,
        ``OPSCOPE_MAX_INFLATE``, ``OPSCOPE_COMM_KERNELS``), for a job of ``format``."""
        from opscope.trace.commuser import user_patterns
        from opscope.trace.readers import configured_max_inflate

        return cls(
            format=format,
            cache=cache,
            max_trace_bytes=_env_int("OPSCOPE_MAX_TRACE_BYTES"),
            max_inflate=configured_max_inflate(),
            comm_kernels=user_patterns() or None,
        )

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """The settings in force in this context (this task's thread, and the threads it
        starts through :mod:`opscope.analysis.beside`), and only there."""
        from opscope.trace.commuser import comm_kernels_scope
        from opscope.trace.readers import inflate_bound

        with inflate_bound(self.max_inflate), comm_kernels_scope(self.comm_kernels):
            yield


@contextlib.contextmanager
def _downloads() -> Iterator[Downloads]:
    """This worker's copies of files by URL (:mod:`.plugin`); outside a worker, or on one
    without the plugin, copies that last this task."""
    plugin: Any = None
    try:
        from distributed import get_worker

        from opscope.analysis.cluster.plugin import NAME

        plugin = get_worker().plugins.get(NAME)
    except (ImportError, ValueError):
        plugin = None
    if plugin is not None:
        mine: Downloads = plugin.downloads
        yield mine
        return
    with Downloads() as own:
        yield own


def read_part(path: str, settings: Settings) -> FilePart:
    """One rank's file (a URL: the worker's copy) as a part, read by the job's format with
    the job's settings."""
    from opscope.trace import formats

    by_rank = formats.get(settings.format).by_rank
    if by_rank is None:
        raise TraceError(f"{path}: a {settings.format} profile is not read by rank")
    with settings.scope(), _downloads() as downloads:
        local = downloads.local_path(path, settings.max_trace_bytes)
        return by_rank.read_part(local, cache=settings.cache, max_bytes=settings.max_trace_bytes)


def held_value(value: Any) -> Any:
    """``value`` itself: a task whose result is data the rank tasks share (the job's meta),
    sent once with the task and made again if the worker holding it dies."""
    return value


def read_rank(path: str, settings: Settings) -> dict[str, Any]:
    """Round 1: ``{"meta", "rows", "span"}`` of one file (``span``: its first start and last
    end, ns, None without events), or ``{"error": reason}`` when it cannot be read."""
    from opscope.trace.index import EventIndex

    try:
        part = read_part(path, settings)
    except TraceError as exc:
        return {"error": str(exc)}
    idx = EventIndex(part.table)
    span = (int(idx.start.min()), int(idx.end.max())) if len(idx) else None
    return {"meta": part.meta, "rows": part.table.num_rows, "span": span}


def _rank_trace(task: dict[str, Any], job_meta: dict[str, Any]) -> Any:
    """The rank's trace exactly as the local path's :func:`~opscope.analysis.rank_split
    .rank_traces` gives it."""
    from opscope.analysis.rank_split import rank_meta
    from opscope.trace.model import Trace, TraceMeta
    from opscope.trace.parts import place

    part = read_part(task["path"], task["settings"])
    meta = TraceMeta.from_dict(job_meta)
    meta.cached = bool(job_meta.get("cached"))
    table = place(part.table, int(task["rank"]), int(task["offset"]))
    return Trace(table, rank_meta(meta, int(task["index"]), int(task["rank"])))


def _compact_path(section: Any) -> dict[str, Any]:
    """A rank's critical path without its pieces (they grow with the events; the job report
    shows a rank's path as its length and time per label)."""
    from opscope.analysis.critical.path import plain

    out: dict[str, Any] = plain({k: v for k, v in dict(section).items() if k != "segments"})
    return out


def analyze_rank(task: dict[str, Any], job_meta: dict[str, Any]) -> dict[str, Any]:
    """Round 2: the rank's :class:`~opscope.analysis.job.RankReport` as a dict; with
    ``task["store"]``, its event table written there as ``rank<N>.parquet``."""
    from opscope.analysis.pipeline import job_rank

    trace = _rank_trace(task, job_meta)
    opts = task["options"]
    with task["settings"].scope():
        part = job_rank(
            trace,
            steps=tuple(opts["steps"]) if opts["steps"] is not None else None,
            findings=opts["findings"],
            roofline=opts["roofline"],
            peaks=opts["peaks"],
            run_info=opts["run_info"],
        )
    if task.get("store"):
        write_events(trace.events, Path(task["store"]), int(task["rank"]))
    if "critical_path" in part.extra:
        part.extra["critical_path"] = _compact_path(part.extra["critical_path"])
    return part.to_dict()


def _rank_part(
    task: dict[str, Any],
    job_meta: dict[str, Any],
    records: list[dict[str, Any]],
    members: list[Member],
) -> tuple[Any, Any, Any, dict[int, int]]:
    """The rank's trace, its graph with its waits (as the local path's job critical path
    builds it), that graph as the job weighs it, and ``{instance: row of its first work}``."""
    from opscope.analysis.critical.job import first_works
    from opscope.analysis.critical.section import rank_graph

    trace = _rank_trace(task, job_meta)
    waits: dict[int, int] = {}
    works: dict[int, int] = {}
    rows = first_works(trace, [records[pos] for _k, pos, _w in members]).tolist()
    for (k, _pos, wait_us), row in zip(members, rows, strict=True):
        if row >= 0:
            waits[row] = round(float(wait_us) * 1000.0)
            works[int(k)] = row
    steps = task["options"]["steps"]
    graph = rank_graph(trace, tuple(steps) if steps is not None else None, records, waits)
    return trace, graph, graph, works


def rank_path(
    task: dict[str, Any],
    job_meta: dict[str, Any],
    records: list[dict[str, Any]],
    members: list[Member],
) -> dict[str, Any]:
    """Round 3: the rank's critical path section with its waits, as the local path's job
    critical path gives the rank's section (``section``), and the rank's graph contracted for
    the job path (``summary``, :class:`~opscope.analysis.critical.job_solve.RankSummary`)."""
    from opscope.analysis.critical.job import rank_summary
    from opscope.analysis.critical.section import section

    with task["settings"].scope():
        trace, graph, part, works = _rank_part(task, job_meta, records, members)
        summary, _con = rank_summary(trace, part, works)
        return {"section": _compact_path(section(trace, graph)), "summary": summary.to_dict()}


def expand_path(
    task: dict[str, Any],
    job_meta: dict[str, Any],
    records: list[dict[str, Any]],
    members: list[Member],
    runs: list[list[tuple[int, int]]],
) -> list[dict[str, Any]]:
    """Round 4: the job path's ``runs`` on this rank expanded to its pieces: per run, its
    ``segments`` (the report's dicts) and ``top``."""
    from opscope.analysis.critical.job import expand_runs, rank_contraction

    with task["settings"].scope():
        trace, _graph, part, works = _rank_part(task, job_meta, records, members)
        con = rank_contraction(trace, part, works)
        chunks = expand_runs(trace, part, con, [[(int(a), int(b)) for a, b in r] for r in runs])
    return [{"segments": list(c.segments), "top": c.top} for c in chunks]


def recontract_rank(
    task: dict[str, Any],
    job_meta: dict[str, Any],
    records: list[dict[str, Any]],
    members: list[Member],
    changes: list[dict[str, Any]],
) -> list[dict[str, Any] | None]:
    """Round 5, for the job's own findings' savings: the rank's summary with each of
    ``changes`` made to its weights (:func:`opscope.analysis.critical.job.recontracted`)."""
    from opscope.analysis.critical.job import rank_contraction, recontracted

    with task["settings"].scope():
        trace, _graph, part, works = _rank_part(task, job_meta, records, members)
        con = rank_contraction(trace, part, works)
        got = recontracted(trace, part, con, records=records, works=works, changes=changes)
    return [None if s is None else s.to_dict() for s in got]


def what_if_rank(
    task: dict[str, Any],
    job_meta: dict[str, Any],
    records: list[dict[str, Any]],
    members: list[Member],
    spec: str,
) -> dict[str, Any]:
    """The what-if round (``--what-if``): the rank's summaries for the job path before and
    with the spec's changes (``base``, ``new``:
    :func:`opscope.analysis.critical.job.what_if_summaries`), and the rank's own path
    projected alone (``rank``: as the local path's what-if gives each rank of a job); or
    ``{"error": why}`` for a spec the rank cannot answer (a name no event of it has), which
    the coordinator raises: the task did not fail, so it is not run again."""
    from opscope.analysis.critical.job import what_if_summaries
    from opscope.analysis.critical.section import WhatIfError, parse_what_if, rank_graph, what_if

    with task["settings"].scope():
        trace, _graph, part, works = _rank_part(task, job_meta, records, members)
        try:
            base, new = what_if_summaries(trace, part, works, parse_what_if(spec))
            steps = task["options"]["steps"]
            own = rank_graph(trace, tuple(steps) if steps is not None else None, records)
            answer = {"rank": int(task["rank"]), **what_if(trace, own, spec)}
        except WhatIfError as exc:
            return {"error": str(exc)}
    return {"base": base.to_dict(), "new": new.to_dict(), "rank": answer}


def write_events(events: Any, store: Path, rank: int) -> Path:
    """A rank's event table as ``<store>/rank<N>.parquet`` (written to a temporary name, then
    renamed: a retried task never leaves half a file)."""
    import pyarrow.parquet as pq

    store.mkdir(parents=True, exist_ok=True)
    out = store / f"rank{rank}.parquet"
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    pq.write_table(events, tmp, compression="zstd")
    os.replace(tmp, out)
    return out


__all__ = [
    "Member",
    "Settings",
    "analyze_rank",
    "expand_path",
    "held_value",
    "rank_path",
    "read_part",
    "read_rank",
    "recontract_rank",
    "what_if_rank",
    "write_events",
]
