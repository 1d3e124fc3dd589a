"""The input formats: one module each, registered in :data:`FORMATS`, tried in order.

A format module exposes ``NAME``, ``sniff(path) -> bool`` (a cheap look at file and folder
names or a file's first bytes: whether the path is of that format) and ``load(path, *, cache,
max_bytes, workers) -> Trace``.  :func:`detect` returns the first format whose sniff says yes;
the last, Kineto JSON, also takes whatever no format claims, so that its reader says why a path
is not a trace (a missing path, a folder without trace files, a file that is not JSON).

The order settles the paths two formats could claim:

0. :mod:`.event_store` (the ``rank<N>.parquet`` event tables ``opscope report --cluster
   --store`` writes): before the Neuron formats, whose table files are Parquet too; told from
   them by the files' columns (the event schema), not by their names.
1. :mod:`.neuron_parquet` (Neuron Explorer tables), :mod:`.neuron_json` (legacy Neuron JSON),
   :mod:`.neuron_capture` (a raw Neuron capture): before Kineto, since a Neuron capture holds a
   Kineto ``trace.json``.  A folder holding several Neuron pieces is read as one profile by
   the Neuron loader, whichever of the three claims it.
2. :mod:`.execution_trace` (a PyTorch execution trace, refused) and :mod:`.capture_details`
   (TraceLens's ``execution_details.json`` beside graph capture traces, refused): before
   Kineto, which would read any JSON array as a list of events.
3. :mod:`.aiu_json` (an IBM AIU trace: a bare array of begin/end events with ``attr``, no
   ``args``): before Kineto, which would read it without its ``attr``, categories or cards.
4. :mod:`.kineto_json` (Kineto / Chrome trace JSON of every era, a run folder, a folder of
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
    aiu_json,
    capture_details,
    event_store,
    execution_trace,
    kineto_json,
    neuron_capture,
    neuron_json,
    neuron_parquet,
)
from opscope.trace.model import Trace
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


@dataclass(frozen=True)
class Format:
    """One registered input format."""

    name: str
    sniff: Callable[[Path], bool]
    load: Loader


FORMATS: tuple[Format, ...] = (
    Format(event_store.NAME, event_store.sniff, event_store.load),
    Format(neuron_parquet.NAME, neuron_parquet.sniff, neuron_parquet.load),
    Format(neuron_json.NAME, neuron_json.sniff, neuron_json.load),
    Format(neuron_capture.NAME, neuron_capture.sniff, neuron_capture.load),
    Format(execution_trace.NAME, execution_trace.sniff, execution_trace.load),
    Format(capture_details.NAME, capture_details.sniff, capture_details.load),
    Format(aiu_json.NAME, aiu_json.sniff, aiu_json.load),
    Format(kineto_json.NAME, kineto_json.sniff, kineto_json.load),
)


def detect(path: Path) -> Format:
    """The format ``path`` is read as: the first whose sniff says yes, else the last.  A
    folder of run folders is the last's, whose reader names them (the Neuron formats would
    find the runs' ``neuron/`` folders below it and read them as one profile)."""
    if kineto_json.run_folders_in(path):
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


__all__ = ["FORMATS", "Format", "Loader", "detect", "get"]
