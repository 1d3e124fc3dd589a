"""The reduce of a job on a Dask cluster, on the coordinator: the job's rank files listed
through the format registry (:mod:`opscope.trace.formats.listing`; by URL:
:mod:`opscope.trace.remote`), the workers' rounds submitted (:mod:`.worker`) and their answers
joined: rank assignment, the collectives' matching, :func:`opscope.analysis.job_report.merge`, the
job path joined and solved from the contractions
(:func:`opscope.analysis.critical.job_solve.job_section`, the code the local path runs).  No
event reaches the coordinator, so its memory grows with ranks x (ops + collectives), not with
events.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opscope.analysis.cluster.connect import ClusterError, connect, dask
from opscope.analysis.cluster.worker import (
    Member,
    Settings,
    analyze_rank,
    expand_path,
    held_value,
    rank_path,
    read_rank,
    recontract_rank,
    what_if_rank,
)
from opscope.analysis.job import RankReport
from opscope.analysis.job_files import unrelated_files
from opscope.analysis.job_tables import JobTables, TableFold
from opscope.errors import OpscopeError, TraceError
from opscope.trace.formats import ByRank, Format
from opscope.trace.jobs import MixedJobsError

RETRIES = 2

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``: called as ranks finish (``stage``: ``read``,
``analyse``, ``critical path``, ``job path``, ``findings``)."""


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
    #: a what-if spec (``NAME=FACTOR[,...]``): its answer in ``report.extra["what_if"]``
    what_if: str | None = None


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
    distributed = dask()
    total = len(futures)
    if progress is not None:
        progress(stage, 0, total)
        for done, _fut in enumerate(distributed.as_completed(futures), 1):
            progress(stage, done, total)
    return list(client.gather(futures))


def _each(futures: list[Any], stage: str, progress: Progress | None) -> Iterator[tuple[int, Any]]:
    """``(index, result)`` of each future as it finishes (telling ``progress``), each future
    let go once its result is here, so neither side keeps every result at once."""
    distributed = dask()
    total = len(futures)
    index = {f.key: i for i, f in enumerate(futures)}
    pending = distributed.as_completed(futures, with_results=True)
    futures.clear()
    if progress is not None:
        progress(stage, 0, total)
    for done, (fut, result) in enumerate(pending, 1):
        i = index.pop(fut.key)
        fut.release()
        del fut
        if isinstance(result, BaseException):
            # as_completed gives a cancelled future's error as its result, not raised
            raise ClusterError(
                f"the cluster cancelled task {i + 1} of {total} ({stage}): "
                f"{type(result).__name__}: {result}"
            ) from result
        if progress is not None:
            progress(stage, done, total)
        yield i, result


def _rank_reports(
    futures: list[Any], ranks: list[int], progress: Progress | None
) -> tuple[list[RankReport], JobTables]:
    """Round 2's rank reports as they arrive: each folded into the job's tables in rank
    order (the order :func:`~opscope.analysis.job_report.merge` sums in; early arrivals wait
    in full) and kept :meth:`~opscope.analysis.job.RankReport.lean`.  The coordinator's
    memory so grows with the ranks' per-name ops, steps, findings and collectives, not with
    their per-shape rows, kernels and rooflines."""
    order = sorted(range(len(ranks)), key=lambda i: (ranks[i], i))
    acc = TableFold()
    waiting: dict[int, RankReport] = {}
    kept: list[RankReport | None] = [None] * len(ranks)
    at = 0
    for i, got in _each(futures, "analyse", progress):
        waiting[i] = RankReport.from_dict(got)
        del got
        while at < len(order) and order[at] in waiting:
            j = order[at]
            part = waiting.pop(j)
            acc.add(part)
            kept[j] = part.lean()
            at += 1
    parts = [p for p in kept if p is not None]
    return parts, acc.tables()


def _url_name(url: str) -> Path:
    """A rank file's name for the job's bookkeeping (its rank in its name): the URL's host and
    path, without the scheme."""
    rest = url.partition("://")[2]
    return Path(rest.lstrip("/") or url)


@dataclass(frozen=True)
class JobInput:
    """A job's rank files as the coordinator lists them: their format (and how it reads rank
    files), the names the job's bookkeeping uses (``files``: a URL's host and path) and where
    each is read (``location``: its path or URL), the folder given, the run's record."""

    format: Format
    by_rank: ByRank
    files: list[Path]
    location: dict[Path, str]
    given: str
    folder: Path | None = None
    run_info: dict[str, Any] | None = None
    by_url: bool = False


def _by_rank(fmt: Format, where: str | Path) -> ByRank:
    """How ``fmt`` reads rank files; a format read whole is refused on a cluster."""
    if fmt.by_rank is None:
        raise OpscopeError(
            f"{where}: a {fmt.name} profile, read whole; --cluster splits a job of rank files "
            "across workers (run without --cluster)"
        )
    return fmt.by_rank


def job_input(source: str | Path | Sequence[str | Path]) -> JobInput:
    """The rank files of ``source`` (paths, or URLs listed here and fetched by the workers),
    of one format whose traces come one file per rank; a format read whole (a Neuron
    profile, an AIU trace) is refused: it is not split across workers."""
    from opscope.analysis import pipeline
    from opscope.trace.formats.listing import job_files
    from opscope.trace.remote import is_url, remote_files, url_format

    items = [source] if isinstance(source, (str, Path)) else list(source)
    remote = [is_url(item) for item in items]
    if any(remote) and not all(remote):
        raise OpscopeError("give the rank files either all by URL or all by path, not both")
    given = str(items[0]) if items else ""
    if items and all(remote):  # URLs: listed here, fetched by the workers (trace.remote)
        urls = remote_files(given if len(items) == 1 else [str(i) for i in items])
        files = [_url_name(u) for u in urls]
        location = dict(zip(files, urls, strict=True))
        fmt = url_format(urls)
        return JobInput(fmt, _by_rank(fmt, given), files, location, given, by_url=True)
    job = job_files(source if isinstance(source, (str, Path)) else list(source))
    by_rank = _by_rank(job.format, job.files[0])
    run_info = pipeline.run_info_of(
        Path(source) if isinstance(source, (str, Path)) else job.files[0]
    )
    location = {f: str(f) for f in job.files}
    return JobInput(job.format, by_rank, job.files, location, given, job.folder, run_info)


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
    from opscope.trace.formats.kineto import special_files
    from opscope.trace.parts import (
        FilePart,
        assign_ranks,
        combine_meta,
        none_readable,
        unreadable,
        unreadable_warning,
    )
    from opscope.trace.remote import Downloads
    from opscope.trace.schema import EVENT_SCHEMA

    if options.what_if is not None:  # a bad spec fails before any work
        from opscope.analysis.whatif import check_spec

        check_spec(options.what_if)
    job = job_input(source)
    files, folder, location = job.files, job.folder, job.location
    settings = Settings.here(job.format.name, options.cache)
    opts = {
        "steps": list(options.steps) if options.steps is not None else None,
        "findings": options.findings,
        "roofline": options.roofline,
        "peaks": _peaks_for_workers(options.peaks),
        "run_info": job.run_info,
    }
    with connect(cluster) as (client, scheduler):
        workers = len(client.nthreads())
        if job.by_url:  # each worker's copies of the files, kept for every round there
            from opscope.analysis.cluster.plugin import DownloadsPlugin

            client.register_plugin(DownloadsPlugin())
        read = [
            client.submit(read_rank, location[f], settings, retries=RETRIES, pure=False)
            for f in files
        ]
        got = _gather(client, read, "read", progress)
        good = [(f, g) for f, g in zip(files, got, strict=True) if "error" not in g]
        bad = [(f, g["error"]) for f, g in zip(files, got, strict=True) if "error" in g]
        if not good:
            where = folder or (files[0].parent if files else Path("."))
            if job.by_url:
                where = Path(job.given)
            raise TraceError(none_readable(where, [reason for _f, reason in bad]))
        kept = [f for f, _g in good]
        placeholder = EVENT_SCHEMA.empty_table()
        ranks = assign_ranks(kept, [FilePart(placeholder, g["meta"]) for _f, g in good])
        meta = combine_meta(kept, [g["meta"] for _f, g in good], ranks)
        meta.format = job.format.name
        meta.paths = [location[f] for f in kept]  # a URL is named as given
        taken = {r for r, _o in ranks}
        lost = [{**unreadable(f, reason, taken), "path": location[f]} for f, reason in bad]
        meta.unreadable = lost
        meta.warnings += [unreadable_warning(e) for e in lost]
        if folder is not None:
            meta.warnings += special_files(folder) + special_files(folder / "traces")
        if len(kept) == 1:  # a job of one rank: the single-rank report, in this process
            with Downloads() as downloads:
                here = [downloads.local_path(location[f]) for f in kept]
                trace = job.by_rank.load_files(here, cache=options.cache)
            trace.meta.unreadable, trace.meta.warnings = lost, meta.warnings
            single = pipeline.analyze(
                trace,
                options.steps,
                findings=options.findings,
                roofline=options.roofline,
                peaks=options.peaks,
            )
            if options.what_if is not None:
                from opscope.analysis.whatif import what_if

                single.extra["what_if"] = what_if(single, options.what_if)
            return single
        spans = [g["span"] for _f, g in good if g["span"] is not None]
        reason = unrelated_files(meta, [(int(a), int(b)) for a, b in spans])
        if reason is not None:
            raise MixedJobsError(reason)
        job_meta = {**meta.to_json_dict(), "cached": meta.cached}
        # a task's result, not scattered data: when the worker holding it dies, the
        # scheduler makes it again from the task (scattered data would be lost, and every
        # rank task after it cancelled)
        shared_meta = client.submit(held_value, job_meta, pure=False)
        tasks: list[dict[str, Any]] = []
        offset = 0
        for i, ((f, g), (rank, _origin)) in enumerate(zip(good, ranks, strict=True)):
            tasks.append(
                {
                    "path": location[f],
                    "index": i,
                    "rank": rank,
                    "offset": offset,
                    "settings": settings,
                    "options": opts,
                    "store": str(options.store) if options.store is not None else None,
                }
            )
            offset += int(g["rows"])
        futures = [
            client.submit(rank_task, t, shared_meta, retries=RETRIES, pure=False) for t in tasks
        ]
        parts, tables = _rank_reports(futures, [int(t["rank"]) for t in tasks], progress)
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
            parts,
            window_steps=options.steps,
            run_info=job.run_info,
            unreadable=lost,
            matched=matching,
            tables=tables,
        )
        if job_path is not None and job_path.get("length_us") is not None:
            pipeline.add_savings(
                report,
                lambda found: job_finding_savings(summaries, held, instances, found, recontract),
            )
        if options.what_if is not None:
            from opscope.analysis.critical.job_solve import job_projection
            from opscope.analysis.critical.section import WhatIfError, parse_what_if

            spec = options.what_if
            projected = round_of(what_if_rank, {int(t["rank"]): spec for t in tasks}, "what-if")
            ranks_of = sorted(projected)
            for r in ranks_of:  # the first rank's, as the local path raises it
                if "error" in projected[r]:
                    raise WhatIfError(projected[r]["error"])
            job_answer = job_projection(
                [RankSummary.from_dict(projected[r]["base"]) for r in ranks_of],
                [RankSummary.from_dict(projected[r]["new"]) for r in ranks_of],
                held,
                (spec, parse_what_if(spec)),
            )
            what_if_answer = {
                "scope": "job",
                **job_answer,
                "ranks": [projected[r]["rank"] for r in ranks_of],
            }
    if job_path is not None:
        report.extra["critical_path"] = job_path
    if options.what_if is not None:
        report.extra["what_if"] = what_if_answer
    if report.job is not None:
        source_section = report.job["source"]
        source_section["warnings"] = list(meta.warnings)
        source_section["skipped"] = dict(meta.skipped)
        source_section["engine"] = {"name": "dask", "workers": workers, "scheduler": scheduler}
    return report


__all__ = ["RETRIES", "JobInput", "Options", "Progress", "analyze_on_cluster", "job_input"]
