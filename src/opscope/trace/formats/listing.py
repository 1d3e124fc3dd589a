"""What a job's input stands for, in files of one format: a path, a glob pattern of rank files
(``ranks/*.json.gz``, ``store/rank*.parquet``), a list of those, or the names a URL's listing
holds (:mod:`opscope.trace.remote`).

The formats say what they claim (:mod:`opscope.trace.formats`): a folder is read by the format
:func:`~opscope.trace.formats.detect` gives it; a glob keeps the matches some format whose
traces come one file per rank claims by name, and each file kept is that format's whose
sniff says yes (an event store's tables, else Kineto JSON, whose reader says what is wrong
with a file).  The files of one job are of one format: files of several are refused, naming
them, and so are the pieces of a format read whole (a Neuron profile: give its folder).
Files of several run folders are refused too (:func:`~opscope.trace.formats.kineto.one_run`):
separate runs are never stacked as ranks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from opscope.errors import TraceError
from opscope.trace.formats import FORMATS, Format, detect
from opscope.trace.formats.kineto import one_run
from opscope.trace.model import Trace
from opscope.trace.parts import rank_sorted

GLOB_CHARS = "*?["
_NAMED = 3  # files named in an error about several formats


def is_pattern(text: str | Path) -> bool:
    """``text`` is a glob pattern of files (``ranks/*.json.gz``), not a path that exists."""
    return any(c in str(text) for c in GLOB_CHARS) and not Path(text).exists()


@dataclass(frozen=True)
class Job:
    """A job's input as files of one format: ``folder`` when it was given as one."""

    format: Format
    files: list[Path]
    folder: Path | None = None


def _whole(where: str | Path, fmt: Format) -> str:
    return (
        f"{where}: a {fmt.name} profile, read whole from its folder: give the folder alone "
        "(not its files, not with other traces)"
    )


def by_rank_formats() -> tuple[Format, ...]:
    """The formats whose traces come as one file per rank, in registry order."""
    return tuple(f for f in FORMATS if f.by_rank is not None)


def claimant(name: str) -> Format | None:
    """The first format, by rank files first, that claims a file of this name."""
    for fmt in (*by_rank_formats(), *(f for f in FORMATS if f.by_rank is None)):
        if fmt.claims(name):
            return fmt
    return None


def file_format(path: Path) -> Format:
    """The by-rank format a file of a job is read as: the first whose sniff says yes (Kineto,
    the last, takes any file)."""
    formats = by_rank_formats()
    for fmt in formats[:-1]:
        if fmt.sniff(path):
            return fmt
    return formats[-1]


def one_format(files: Iterable[tuple[str, Format]], where: str) -> Format:
    """The one format of a job's files (``(name, format)`` each), else :class:`TraceError`
    naming a file of each."""
    seen: dict[str, tuple[Format, list[str]]] = {}
    for name, fmt in files:
        seen.setdefault(fmt.name, (fmt, []))[1].append(name)
    if not seen:
        raise TraceError(f"{where}: no trace files")
    if len(seen) > 1:
        kinds = "; ".join(
            f"{', '.join(names[:_NAMED])}{' ...' if len(names) > _NAMED else ''} {fmt.name}"
            for fmt, names in seen.values()
        )
        raise TraceError(f"{where}: files of {len(seen)} formats, not one job ({kinds})")
    [(fmt, names)] = seen.values()
    if fmt.by_rank is None:
        raise TraceError(_whole(names[0], fmt))
    return fmt


def _pattern(text: str) -> Job:
    import glob

    matches = [Path(p) for p in sorted(glob.glob(text)) if Path(p).is_file()]
    found = [p for p in matches if any(f.claims(p.name) for f in by_rank_formats())]
    if not found:
        whole = [(p, claimant(p.name)) for p in matches]
        for p, fmt in whole:
            if fmt is not None:
                raise TraceError(_whole(p.parent, fmt))
        raise TraceError(f"{text}: no trace files match this pattern")
    fmt = one_format(((p.name, file_format(p)) for p in found), text)
    one_run(found)
    return Job(fmt, rank_sorted(found))


def job_files(source: str | Path | list[str | Path]) -> Job:
    """The files of a job given as a folder, a file, a glob pattern (``ranks/*.json.gz``) or
    a list of those, in rank order, with their format (see the module docstring); and the
    folder when ``source`` is one.  A format read whole (Neuron) gives its path as the one
    file, given alone."""
    if isinstance(source, (str, Path)):
        if is_pattern(source):
            return _pattern(str(source))
        path = Path(source)
        fmt = detect(path)
        folder = path if path.is_dir() else None
        if fmt.by_rank is None:
            return Job(fmt, [path], folder)
        return Job(fmt, fmt.by_rank.files(path), folder)
    # a file of a list is a rank file as a glob's match is (a refused kind among Kineto files
    # is left out by Kineto's reader, named); a folder or a glob goes by its own format
    jobs = [
        Job(file_format(Path(item)), [Path(item)])
        if not is_pattern(item) and Path(item).is_file()
        else job_files(item)
        for item in source
    ]
    files: list[Path] = []
    for job in jobs:
        files += [f for f in job.files if f not in files]
    if not files:
        raise TraceError("no trace files given")
    if len(jobs) == 1:
        return Job(jobs[0].format, jobs[0].files)
    fmt = one_format(((f.name, job.format) for job in jobs for f in job.files), "the files given")
    one_run(files)
    return Job(fmt, rank_sorted(files))


def load_job(
    job: Job, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The job's files as one trace, through its format (a format read whole: its one path)."""
    if job.format.by_rank is None:
        return job.format.load(job.files[0], cache=cache, max_bytes=max_bytes, workers=workers)
    return job.format.by_rank.load_files(
        job.files, cache=cache, max_bytes=max_bytes, workers=workers, folder=job.folder
    )


__all__ = [
    "GLOB_CHARS",
    "Job",
    "by_rank_formats",
    "claimant",
    "file_format",
    "is_pattern",
    "job_files",
    "load_job",
    "one_format",
]
