"""The input formats: one module each, registered in :data:`FORMATS`, tried in order.

A format module exposes ``NAME`` (the format's one name: the registry's, the module's and
the loaded trace's ``meta.format``), ``sniff(path) -> bool`` (a cheap look at file and folder
names or a file's first bytes: whether the path is of that format), ``claims(name) -> bool``
(whether a file of that name, met in a folder's, a glob's or a URL's listing, may be one of
its files) and ``load(path, *, cache, max_bytes, workers) -> Trace``.  A format whose traces
come as one file per rank (Kineto JSON, an event store) is registered with a :class:`ByRank`:
the rank files a path stands for, several of its files loaded as one job (a glob, a list, a
folder) and one rank's file read as a :class:`~opscope.trace.parts.FilePart` (what a
cluster's worker reads); the others are read whole, one path at a time (:mod:`.listing`
says so for a glob or a list, :mod:`opscope.trace.remote` for a URL).
:func:`detect` returns the first format whose sniff says yes; the last, Kineto JSON, also
takes whatever no format claims, so that its reader says why a path is not a trace (a
missing path, a folder without trace files, a file that is not JSON).

The order settles the paths two formats could claim:

0. :mod:`.event_store` (the ``rank<N>.parquet`` event tables ``opscope report --cluster
   --store`` writes): before Neuron, whose table files are Parquet too; told from them by the
   files' columns (the event schema), not by their names.
1. :mod:`.neuron` (Neuron Explorer tables, legacy Neuron JSON, a raw Neuron capture): before
   Kineto, since a Neuron capture holds a Kineto ``trace.json``.  A folder holding several
   Neuron pieces is read as one profile.
2. :mod:`.execution_trace` (a PyTorch execution trace, refused) and :mod:`.capture_details`
   (TraceLens's ``execution_details.json`` beside graph capture traces, refused): before
   Kineto, which would read any JSON array as a list of events.
3. :mod:`.aiu` (an IBM AIU trace: a bare array of begin/end events with ``attr``, no
   ``args``): before Kineto, which would read it without its ``attr``, categories or cards.
4. :mod:`.kineto` (Kineto / Chrome trace JSON of every era, a run folder, a folder of
   ranks): the fallback.

Loading reads files and writes none other than the ingest cache's, and runs no program
(``neuron-explorer view`` on a raw capture is a step of its own:
:mod:`opscope.capture.neuron_explorer`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from opscope.trace.formats import (
    aiu,
    capture_details,
    event_store,
    execution_trace,
    kineto,
    neuron,
)
from opscope.trace.model import Trace
from opscope.trace.parts import FilePart
from opscope.trace.readers import shared_heads


class Loader(Protocol):
    """A format's ``load``."""

    def __call__(
        self,
        path: Path,
        *,
        cache: bool = True,
        max_bytes: int | None = None,
        workers: int | None = None,
    ) -> Trace: ...


class FilesLoader(Protocol):
    """A format's ``load_files``: several of its files as one job."""

    def __call__(
        self,
        files: list[Path],
        *,
        cache: bool = True,
        max_bytes: int | None = None,
        workers: int | None = None,
        folder: Path | None = None,
    ) -> Trace: ...


class PartReader(Protocol):
    """A format's ``read_part``: one rank's file as a part (ids from 0, rank 0)."""

    def __call__(
        self, path: Path, *, cache: bool = True, max_bytes: int | None = None
    ) -> FilePart: ...


def _no_file(name: str) -> bool:
    return False


@dataclass(frozen=True)
class ByRank:
    """How a format whose traces come as one file per rank reads them: ``files(path)``
    (the rank files a path stands for, in rank order), ``load_files`` (several as one job)
    and ``read_part`` (one rank's file: what a cluster's worker reads)."""

    files: Callable[[Path], list[Path]]
    load_files: FilesLoader
    read_part: PartReader


@dataclass(frozen=True)
class Format:
    """One registered input format (see the module docstring); ``by_rank`` is None for a
    format read whole, one path at a time."""

    name: str
    sniff: Callable[[Path], bool]
    load: Loader
    claims: Callable[[str], bool] = _no_file
    by_rank: ByRank | None = None


FORMATS: tuple[Format, ...] = (
    Format(
        event_store.NAME,
        event_store.sniff,
        event_store.load,
        event_store.claims,
        ByRank(event_store.rank_files, event_store.load_files, event_store.read_part),
    ),
    Format(neuron.NAME, neuron.sniff, neuron.load, neuron.claims),
    Format(execution_trace.NAME, execution_trace.sniff, execution_trace.load),
    Format(capture_details.NAME, capture_details.sniff, capture_details.load),
    Format(aiu.NAME, aiu.sniff, aiu.load),
    Format(
        kineto.NAME,
        kineto.sniff,
        kineto.load,
        kineto.is_trace_name,
        ByRank(kineto.find_trace_files, kineto.load_files, kineto.load_file),
    ),
)


def detect(path: Path) -> Format:
    """The format ``path`` is read as: the first whose sniff says yes, else the last.  A
    folder of run folders is the last's, whose reader names them (the Neuron formats would
    find the runs' ``neuron/`` folders below it and read them as one profile)."""
    if kineto.run_folders_in(path):
        return FORMATS[-1]
    with shared_heads():
        for fmt in FORMATS:
            if fmt.sniff(path):
                return fmt
    return FORMATS[-1]


def get(name: str) -> Format:
    """The registered format called ``name`` (``KeyError`` when none is)."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(name)


__all__ = ["FORMATS", "FilesLoader", "Format", "Loader", "PartReader", "detect", "get"]
