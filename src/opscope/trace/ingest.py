"""Paths -> :class:`~opscope.trace.model.Trace`, through the format registry.

:func:`load` asks :func:`opscope.trace.formats.detect` which format a path is (a look at its
names and first bytes) and hands it to that format's reader; :func:`load_document` builds a
Trace from a Kineto document already decoded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opscope.errors import TraceError
from opscope.trace import formats
from opscope.trace.formats import listing
from opscope.trace.kineto.builder import parse_kineto
from opscope.trace.model import Trace
from opscope.trace.parts import combine, to_part
from opscope.trace.remote import is_url


def load(
    path: str | Path,
    *,
    cache: bool = True,
    max_bytes: int | None = None,
    workers: int | None = None,
) -> Trace:
    """Load a trace file, run folder, folder of per-rank traces, glob pattern of rank files
    (``ranks/*.json.gz``, ``store/rank*.parquet``, when no such path exists) or Neuron
    profile into a :class:`Trace` (the formats: :mod:`opscope.trace.formats`; a glob's files:
    :mod:`opscope.trace.formats.listing`).

    ``cache=False`` neither reads nor writes the ingest cache.  ``max_bytes`` caps the
    decompressed size of each file (default: 16 GiB or ``$OPSCOPE_MAX_TRACE_BYTES``).
    ``workers`` caps the processes used for a folder of ranks (default: the CPU count).
    Loading never runs another program and writes no file other than its cache's.
    """
    p = Path(path)
    if is_url(path) and not p.exists():
        raise TraceError(
            f"{path}: rank files by URL are read on a cluster's workers: opscope report URL "
            "--cluster local (in Python, cluster='local'); or copy them here"
        )
    if listing.is_pattern(path):
        job = listing.job_files(str(path))
        return listing.load_job(job, cache=cache, max_bytes=max_bytes, workers=workers)
    return formats.detect(p).load(p, cache=cache, max_bytes=max_bytes, workers=workers)


def load_document(doc: Any, origin: str = "<memory>") -> Trace:
    """Build a Trace from an already decoded Kineto document (tests, tools)."""
    try:
        parsed = parse_kineto(doc)
    except ValueError as exc:
        raise TraceError(f"{origin}: {exc}") from None
    part = to_part(parsed, [], origin)
    return combine([Path(origin)], [part], [(0, "order")])
