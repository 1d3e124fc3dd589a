"""A job's per-rank analysis on a Dask cluster (``opscope report --cluster``,
``opscope.analyze(paths, cluster=...)``; the ``opscope[cluster]`` extra).

What runs where (``docs/scale.md``):

* map, on the workers, four rounds (a fifth below), each task one rank's file: (1)
  :func:`read_rank` ingests the file (through the worker's ingest cache) and sends back its
  metadata, row count and time span, or why it cannot be read; (2) :func:`analyze_rank`
  analyses the rank exactly as the local path does (its rows placed as the local job table
  places them: the same rank, the same event ids, the job's metadata) and sends back its
  :class:`~opscope.analysis.job.RankReport` (``to_dict()``), optionally writing its event
  table as Parquet (``store``); (3) :func:`rank_path` computes the rank's critical path with
  its waits from the job's matching, and its graph contracted for the job path
  (:mod:`opscope.analysis.critical.contract`); (4) :func:`expand_path`, for the ranks the
  job path crosses, expands the path's runs there into the rank's pieces;
* reduce, on the coordinator, from rank reports and contractions only: rank assignment, the
  collectives' matching, :func:`opscope.analysis.job_report.merge`, the job path joined and
  solved from the contractions (:func:`opscope.analysis.critical.job_solve.job_section`, the
  code the local path runs).  No event reaches the coordinator, so its memory grows with
  ranks x (ops + collectives), not with events.

The report is the local path's, with ``source.engine`` added; the job's own findings'
``step_savings_us`` take a fifth round (:func:`recontract_rank`: the ranks a fix touches,
contracted again with it).  A task whose worker dies is run again elsewhere (``retries``); a
file that cannot be read is named in the report (``source.unreadable``, a warning,
``distributed.missing_ranks``), as on the local path.

Dask is imported only here, and only when a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opscope.analysis import beside
from opscope.analysis.job_files import unrelated_files
from opscope.errors import OpscopeError, TraceError
from opscope.trace.jobs import MixedJobsError

SCHEDULER_ENV = "OPSCOPE_DASK_SCHEDULER"
CONNECT_TIMEOUT_S = 10.0
RETRIES = 2
# environment the trace reader reads its limits from: the coordinator's go with each task
# what the workers' readers must see as this process does (the user's comm kernels too)
_LIMIT_ENV = ("OPSCOPE_MAX_TRACE_BYTES", "OPSCOPE_MAX_INFLATE", "OPSCOPE_COMM_KERNELS")

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: called as ranks finish (``stage``: ``read``,
``analyse``, ``critical path``, ``job path``, ``findings``)."""


class ClusterError(OpscopeError):
    """A cluster that cannot be used: a bad address, no scheduler there, no Dask installed."""


@dataclass(frozen=True)
class Scheduler:
    """A parsed ``--cluster`` value: a scheduler's address, or a local cluster of ``workers``."""

    address: str | None
    workers: int | None = None

    @property
    def name(self) -> str:
        if self.address is not None:
            return self.address
        return "local" if self.workers is None else f"local:{self.workers}"


def parse_scheduler(value: str | None) -> Scheduler:
    """``local``, ``local:N``, ``tcp://host:port`` (``tls://`` too) or, for None or an empty
    value, ``$OPSCOPE_DASK_SCHEDULER``; anything else is a :class:`ClusterError`."""
    text = (value or os.environ.get(SCHEDULER_ENV, "")).strip()
    if not text:
        raise ClusterError(
            f"--cluster: no scheduler given and ${SCHEDULER_ENV} is not set "
            "(local, local:N or tcp://host:port)"
        )
    if text == "local":
        return Scheduler(None)
    if text.startswith("local:"):
        n = text.partition(":")[2]
        if not n.isdigit() or int(n) < 1:
            raise ClusterError(f"--cluster {text!r}: local:N needs a worker count N >= 1")
        return Scheduler(None, int(n))
    scheme, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if sep and scheme in ("tcp", "tls") and colon and host and port.isdigit():
        return Scheduler(text)
    raise ClusterError(
        f"--cluster {text!r}: expected local, local:N or a scheduler address tcp://host:port"
    )


def _dask() -> Any:
    try:
        import distributed
    except ImportError:
        raise ClusterError(
            "--cluster needs Dask: pip install 'opscope[cluster]' (dask[distributed])"
        ) from None
    return distributed


@contextlib.contextmanager
def connect(cluster: Any, timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator[tuple[Any, str]]:
    """``(client, scheduler name)`` for a ``--cluster`` value or an open
    ``distributed.Client`` (kept open); a local cluster is started and closed here."""
    if hasattr(cluster, "submit") and hasattr(cluster, "scheduler_info"):
        yield cluster, str(getattr(cluster.scheduler, "address", "client"))
        return
    spec = parse_scheduler(cluster if isinstance(cluster, str) else None)
    distributed = _dask()
    if spec.address is None:
        import logging

        cpus = os.cpu_count() or 1
        n_workers = spec.workers or max(1, cpus)
        local = distributed.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            # a worker on each core already: a rank's critical path stays on the worker's
            # thread rather than start a second one beside it (analysis.beside)
            env={beside.ENV: "1"} if n_workers >= cpus else {},
            processes=True,
            dashboard_address=None,
            # the scheduler's HTTP routes on a free local port, not Dask's default 8787 (which
            # a notebook's cluster often holds: Dask then warns and moves)
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=logging.ERROR,
        )
        try:
            with distributed.Client(local) as client:
                yield client, spec.name
        finally:
            local.close()
        return
    try:
        client = distributed.Client(spec.address, timeout=timeout_s)
    except (OSError, TimeoutError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ClusterError(
            f"--cluster {spec.address}: no Dask scheduler answers within {timeout_s:g} s ({first})"
        ) from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout_s)
        except (OSError, TimeoutError):
            raise ClusterError(
                f"--cluster {spec.address}: the scheduler has no workers after {timeout_s:g} s"
            ) from None
        yield client, spec.name
    finally:
        client.close()


# -- the map: one rank's file, on a worker ----------------------------------------------------


@contextlib.contextmanager
def _limits(env: dict[str, str]) -> Iterator[None]:
    """The coordinator's reading limits, in force for one task."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def read_rank(path: str, cache: bool, env: dict[str, str]) -> dict[str, Any]:
    """Round 1: ``{"meta", "rows", "span"}`` of one file (``span``: its first start and last
    end, ns, None without events), or ``{"error": reason}`` when it cannot be read."""
    from opscope.trace.formats.kineto_json import load_file
    from opscope.trace.index import EventIndex
    from opscope.trace.remote import local_path

    try:
        with _limits(env):
            part = load_file(local_path(path), cache=cache)
    except TraceError as exc:
        return {"error": str(exc)}
    idx = EventIndex(part.table)
    span = (int(idx.start.min()), int(idx.end.max())) if len(idx) else None
    return {"meta": part.meta, "rows": part.table.num_rows, "span": span}


def _rank_trace(task: dict[str, Any], job_meta: dict[str, Any]) -> Any:
    """The rank's trace exactly as the local path's :func:`~opscope.analysis.rank_split
    .rank_traces` gives it."""
    from opscope.analysis.rank_split import rank_meta
    from opscope.trace.formats.kineto_json import load_file
    from opscope.trace.model import Trace, TraceMeta
    from opscope.trace.parts import place
    from opscope.trace.remote import local_path

    with _limits(task["env"]):
        part = load_file(local_path(task["path"]), cache=task["cache"])
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


Member = tuple[int, int, float]
"""A rank's part in a matched instance: ``(instance, position in the rank's records, the
rank's wait there in µs)``."""


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

    trace, _graph, part, works = _rank_part(task, job_meta, records, members)
    con = rank_contraction(trace, part, works)
    got = recontracted(trace, part, con, records=records, works=works, changes=changes)
    return [None if s is None else s.to_dict() for s in got]


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


# -- the reduce, on the coordinator ------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """What every rank's analysis takes (as :func:`opscope.analysis.pipeline.analyze`)."""

    steps: tuple[int, int] | None = None
    findings: bool = True
    roofline: bool = True
    peaks: str | Path | dict[str, Any] | None = None
    cache: bool = True
    store: str | Path | None = None


def _peaks_for_workers(peaks: str | Path | dict[str, Any] | None) -> dict[str, Any] | None:
    """Peaks overrides as data: a file (or ``$OPSCOPE_PEAKS``) on the coordinator may not be
    on the workers."""
    if isinstance(peaks, dict):
        return peaks
    source = peaks if peaks is not None else os.environ.get("OPSCOPE_PEAKS") or None
    if source is None:
        return None
    import orjson

    try:
        data = orjson.loads(Path(source).read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise OpscopeError(f"peaks {source}: cannot be read ({exc})") from None
    if not isinstance(data, dict):
        raise OpscopeError(f"peaks {source}: not a JSON object")
    return data


def _gather(client: Any, futures: list[Any], stage: str, progress: Progress | None) -> list[Any]:
    """The futures' results in their order, telling ``progress`` as each finishes."""
    distributed = _dask()
    total = len(futures)
    if progress is not None:
        progress(stage, 0, total)
        for done, _fut in enumerate(distributed.as_completed(futures), 1):
            progress(stage, done, total)
    return list(client.gather(futures))


def _url_name(url: str) -> Path:
    """A rank file's name for the job's bookkeeping (its rank in its name): the URL's host and
    path, without the scheme."""
    rest = url.partition("://")[2]
    return Path(rest.lstrip("/") or url)


def analyze_on_cluster(
    source: str | Path | Sequence[str | Path],
    cluster: Any,
    options: Options = Options(),
    *,
    progress: Progress | None = None,
    rank_task: Callable[..., dict[str, Any]] = analyze_rank,
) -> Any:
    """The job report of ``source`` (a folder, file, glob or list of rank files) with its
    per-rank analysis on ``cluster`` (see the module docstring): the same report as the local
    path but for the job's critical path (a note) and ``source.engine``.  ``rank_task``
    replaces round 2's task (tests: a task that kills its worker)."""
    from opscope.analysis import job_report, pipeline
    from opscope.analysis.job import RankReport
    from opscope.trace import formats
    from opscope.trace.formats.kineto_json import job_files, special_files
    from opscope.trace.parts import (
        FilePart,
        assign_ranks,
        combine_meta,
        none_readable,
        unreadable,
        unreadable_warning,
    )
    from opscope.trace.remote import is_url, local_path, remote_files
    from opscope.trace.schema import EVENT_SCHEMA

    items = [source] if isinstance(source, (str, Path)) else list(source)
    remote = [is_url(item) for item in items]
    if any(remote) and not all(remote):
        raise OpscopeError("give the rank files either all by URL or all by path, not both")
    for item in items:
        p = Path(item)
        if not is_url(item) and p.exists() and formats.detect(p).name != "kineto":
            raise OpscopeError(
                f"{p}: a {formats.detect(p).name} profile; --cluster reads Kineto rank files "
                "(run without --cluster)"
            )
    run_info: dict[str, Any] | None = None
    if all(remote):  # URLs: listed here, fetched by the workers (trace.remote)
        urls = remote_files(str(items[0]) if len(items) == 1 else [str(i) for i in items])
        files, folder = [_url_name(u) for u in urls], None
        location = dict(zip(files, urls, strict=True))
    else:
        files, folder = job_files(source if isinstance(source, (str, Path)) else list(source))
        location = {f: str(f) for f in files}
        run_info = pipeline.run_info_of(
            Path(source) if isinstance(source, (str, Path)) else files[0]
        )
    env = {k: os.environ[k] for k in _LIMIT_ENV if k in os.environ}
    opts = {
        "steps": list(options.steps) if options.steps is not None else None,
        "findings": options.findings,
        "roofline": options.roofline,
        "peaks": _peaks_for_workers(options.peaks),
        "run_info": run_info,
    }
    with connect(cluster) as (client, scheduler):
        workers = len(client.nthreads())
        read = [
            client.submit(read_rank, location[f], options.cache, env, retries=RETRIES, pure=False)
            for f in files
        ]
        got = _gather(client, read, "read", progress)
        good = [(f, g) for f, g in zip(files, got, strict=True) if "error" not in g]
        bad = [(f, g["error"]) for f, g in zip(files, got, strict=True) if "error" in g]
        if not good:
            where = folder or (files[0].parent if files else Path("."))
            if all(remote):
                where = Path(str(items[0]))
            raise TraceError(none_readable(where, [reason for _f, reason in bad]))
        kept = [f for f, _g in good]
        placeholder = EVENT_SCHEMA.empty_table()
        ranks = assign_ranks(kept, [FilePart(placeholder, g["meta"]) for _f, g in good])
        meta = combine_meta(kept, [g["meta"] for _f, g in good], ranks)
        meta.paths = [location[f] for f in kept]  # a URL is named as given
        taken = {r for r, _o in ranks}
        lost = [{**unreadable(f, reason, taken), "path": location[f]} for f, reason in bad]
        meta.unreadable = lost
        meta.warnings += [unreadable_warning(e) for e in lost]
        if folder is not None:
            meta.warnings += special_files(folder) + special_files(folder / "traces")
        if len(kept) == 1:  # a job of one rank: the single-rank report, in this process
            from opscope.trace.formats.kineto_json import load_files

            trace = load_files([local_path(location[f]) for f in kept], cache=options.cache)
            trace.meta.unreadable, trace.meta.warnings = lost, meta.warnings
            return pipeline.analyze(
                trace,
                options.steps,
                findings=options.findings,
                roofline=options.roofline,
                peaks=options.peaks,
            )
        spans = [g["span"] for _f, g in good if g["span"] is not None]
        reason = unrelated_files(meta, [(int(a), int(b)) for a, b in spans])
        if reason is not None:
            raise MixedJobsError(reason)
        job_meta = {**meta.to_json_dict(), "cached": meta.cached}
        [shared_meta] = client.scatter([job_meta], broadcast=True, hash=False)
        tasks: list[dict[str, Any]] = []
        offset = 0
        for i, ((f, g), (rank, _origin)) in enumerate(zip(good, ranks, strict=True)):
            tasks.append(
                {
                    "path": location[f],
                    "index": i,
                    "rank": rank,
                    "offset": offset,
                    "cache": options.cache,
                    "env": env,
                    "options": opts,
                    "store": str(options.store) if options.store is not None else None,
                }
            )
            offset += int(g["rows"])
        futures = [
            client.submit(rank_task, t, shared_meta, retries=RETRIES, pure=False) for t in tasks
        ]
        parts = [RankReport.from_dict(d) for d in _gather(client, futures, "analyse", progress)]
        matching = job_report.matching(parts)
        records, instances = matching.records, matching.instances
        from opscope.analysis.collective_match import member_waits
        from opscope.analysis.critical.job import cycle_section
        from opscope.analysis.critical.job_savings import Change, job_finding_savings
        from opscope.analysis.critical.job_solve import Chunk, RankSummary, Run, job_section
        from opscope.analysis.critical.longest import CycleError

        members: dict[int, list[Member]] = {p.rank: [] for p in parts}
        held: list[list[int]] = []
        for k, mem in enumerate(member_waits(records, instances)):
            held.append([int(r) for r, _pos, _wait in mem])
            for r, pos, wait in mem:
                members[int(r)].append((k, int(pos), wait))
        by_rank = {int(t["rank"]): t for t in tasks}

        def args(rank: int) -> tuple[Any, ...]:
            return (by_rank[rank], shared_meta, records.get(rank, []), members[rank])

        paths = [
            client.submit(rank_path, *args(int(t["rank"])), retries=RETRIES, pure=False)
            for t in tasks
        ]
        summaries = []
        for part, got in zip(parts, _gather(client, paths, "critical path", progress), strict=True):
            part.extra["critical_path"] = got["section"]
            summaries.append(RankSummary.from_dict(got["summary"]))

        def round_of(task: Callable[..., Any], asked: dict[int, Any], stage: str) -> dict[int, Any]:
            """``{rank: task(its rank's arguments, asked[rank])}``, a task per rank asked."""
            order = sorted(asked)
            futures = [
                client.submit(task, *args(r), asked[r], retries=RETRIES, pure=False) for r in order
            ]
            return dict(zip(order, _gather(client, futures, stage, progress), strict=True))

        def expand(asked: dict[int, list[Run]]) -> dict[int, list[Chunk]]:
            return {
                r: [Chunk(c["segments"], c["top"]) for c in chunks]
                for r, chunks in round_of(expand_path, asked, "job path").items()
            }

        def recontract(asked: dict[int, list[Change]]) -> dict[int, list[RankSummary | None]]:
            return {
                r: [None if d is None else RankSummary.from_dict(d) for d in summaries_of]
                for r, summaries_of in round_of(recontract_rank, asked, "findings").items()
            }

        job_path = None
        try:
            job_path = job_section(summaries, instances, held, expand)
        except CycleError as exc:
            job_path = cycle_section(exc)
        report = job_report.merge(
            parts, window_steps=options.steps, run_info=run_info, unreadable=lost, matched=matching
        )
        if job_path is not None and job_path.get("length_us") is not None:
            pipeline.add_savings(
                report,
                lambda found: job_finding_savings(summaries, held, instances, found, recontract),
            )
    if job_path is not None:
        report.extra["critical_path"] = job_path
    if report.job is not None:
        source_section = report.job["source"]
        source_section["warnings"] = list(meta.warnings)
        source_section["skipped"] = dict(meta.skipped)
        source_section["engine"] = {"name": "dask", "workers": workers, "scheduler": scheduler}
    return report


__all__ = [
    "CONNECT_TIMEOUT_S",
    "RETRIES",
    "SCHEDULER_ENV",
    "ClusterError",
    "Options",
    "Scheduler",
    "analyze_on_cluster",
    "analyze_rank",
    "connect",
    "parse_scheduler",
    "rank_path",
    "read_rank",
    "recontract_rank",
    "write_events",
]
