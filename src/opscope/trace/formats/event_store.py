"""An event store: the per-rank event tables ``opscope report --cluster ... --store DIR`` writes
(:func:`opscope.analysis.cluster.write_events`), one ``rank<N>.parquet`` per rank.

Detected by its files, not its name: a folder (or one file) whose ``rank<N>.parquet`` files have
the event table's columns (:data:`~opscope.trace.schema.EVENT_SCHEMA`, read from each file's
Parquet footer), so a Neuron Explorer folder, whose tables are Parquet too, is never taken for
one.  Loading reads the files into one event table, rank by rank (the ``rank`` column is the
file's ``<N>``); the ids are kept when the files' id ranges are apart (what the cluster writes:
every rank's ids are the job's), else each file's are moved past the previous file's, links
with them, so that ids stay unique in the job.

Listed by name (``rank<N>.parquet``: a folder, a glob, a list, a URL's listing) through the
format registry (:mod:`opscope.trace.formats.listing`), and read rank by rank on a cluster's
workers (:func:`read_part`: a rank's table with ids from 0, which the coordinator places as
the local job's table places them).

A store holds the events only: the traces' metadata (device properties, ``distributedInfo``,
process names) is not in it, so the device is told from the events alone.  It is read in
place, never cached.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

from opscope.errors import TraceError
from opscope.trace.model import Trace, TraceMeta
from opscope.trace.parts import FilePart, place
from opscope.trace.schema import EVENT_SCHEMA, EVENT_SCHEMA_VERSION

NAME = "event_store"

RANK_FILE = re.compile(r"^rank(\d+)\.parquet$")
_VERSION_KEY = b"opscope.event_schema_version"


def _by_rank(path: Path) -> list[tuple[int, Path]]:
    """The ``rank<N>.parquet`` files a path stands for, by rank."""
    if path.is_file():
        m = RANK_FILE.match(path.name)
        return [(int(m.group(1)), path)] if m else []
    out: list[tuple[int, Path]] = []
    with contextlib.suppress(OSError):
        for p in path.iterdir():
            m = RANK_FILE.match(p.name)
            if m and p.is_file():
                out.append((int(m.group(1)), p))
    return sorted(out)


def claims(name: str) -> bool:
    """A store's file name: ``rank<N>.parquet``."""
    return RANK_FILE.match(name) is not None


def rank_files(path: Path) -> list[Path]:
    """The ``rank<N>.parquet`` files a path stands for, by rank (``TraceError`` when none)."""
    files = [p for _r, p in _by_rank(path)]
    if not files:
        raise TraceError(f"{path}: no event tables (rank<N>.parquet) here")
    return files


def _schema(path: Path) -> pa.Schema | None:
    """A Parquet file's schema (its footer only), or None when it is not Parquet."""
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return None


def is_event_table(path: Path) -> bool:
    """Whether a Parquet file holds an event table (the event schema's columns, in order)."""
    schema = _schema(path)
    return schema is not None and schema.names == EVENT_SCHEMA.names


def sniff(path: Path) -> bool:
    """A ``rank<N>.parquet`` file, or a folder of them, holding event tables."""
    return any(is_event_table(p) for _r, p in _by_rank(path))


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The store's ranks as one event table (``cache``, ``max_bytes`` and ``workers`` do not
    apply: the files are read in place)."""
    return load_files([p for _r, p in _by_rank(path)], folder=path)


def _rank_of(path: Path) -> int:
    m = RANK_FILE.match(path.name)
    if m is None:
        raise TraceError(f"{path}: not an event table of a store (rank<N>.parquet)")
    return int(m.group(1))


def _read(path: Path) -> tuple[pa.Table, str | None]:
    """One rank's table in the event schema, and the warning its schema version calls for."""
    import pyarrow.parquet as pq

    if not is_event_table(path):
        raise TraceError(
            f"{path}: not an event table (rank<N>.parquet with the columns of opscope's "
            "event schema)"
        )
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(f"{path}: cannot read this event table: {exc}") from None
    version = (table.schema.metadata or {}).get(_VERSION_KEY, b"").decode() or "unknown"
    warning = None
    if version != str(EVENT_SCHEMA_VERSION):
        warning = (
            f"{path.name}: written with event schema version {version}, read as version "
            f"{EVENT_SCHEMA_VERSION} (the columns agree; rewrite the store for the "
            "current classification)"
        )
    return table.cast(EVENT_SCHEMA), warning


def load_files(
    files: list[Path],
    *,
    cache: bool = True,
    max_bytes: int | None = None,
    workers: int | None = None,
    folder: Path | None = None,
) -> Trace:
    """Event tables (``rank<N>.parquet``, a glob's or a list's) as one job, rank by rank (the
    rank is the file's ``<N>``)."""
    by_rank = sorted((_rank_of(p), p) for p in files)
    odd = [p.name for _r, p in by_rank if not is_event_table(p)]
    if odd:
        where = folder or (by_rank[0][1].parent if by_rank else Path("."))
        raise TraceError(
            f"{where}: an event store whose {', '.join(odd[:4])} "
            f"{'is' if len(odd) == 1 else 'are'} not an event table (rank<N>.parquet with the "
            "columns of opscope's event schema)"
        )
    tables: list[pa.Table] = []
    warnings: list[str] = []
    for rank, p in by_rank:
        table, warning = _read(p)
        if warning is not None:
            warnings.append(warning)
        tables.append(_as_rank(table, rank))
    tables = _unique_ids(tables)
    events = pa.concat_tables(tables).unify_dictionaries().combine_chunks()
    meta = TraceMeta(
        paths=[str(p) for _r, p in by_rank],
        format=NAME,
        ranks=[r for r, _p in by_rank],
        rank_origin={r: "file name" for r, _p in by_rank},
        warnings=warnings,
    )
    return Trace(events, meta)


def read_part(path: Path, *, cache: bool = True, max_bytes: int | None = None) -> FilePart:
    """One rank's table as a part (ids from 0, rank 0; what a cluster's worker reads): its
    rank comes from its name, as :func:`load_files` gives it."""
    import pyarrow.compute as pc

    table, warning = _read(path)
    lo = pc.min(table.column("id")).as_py() if table.num_rows else None
    table = place(_as_rank(table, 0), 0, -int(lo or 0))
    meta = TraceMeta(paths=[str(path)], format=NAME, warnings=[warning] if warning else [])
    return FilePart(table, meta.to_json_dict())


def _as_rank(table: pa.Table, rank: int) -> pa.Table:
    """The table with every row's ``rank`` the file's."""
    col = pa.chunked_array([pa.array(np.full(table.num_rows, rank, dtype=np.int32))])
    table = table.set_column(table.schema.get_field_index("rank"), "rank", col)
    return pa.Table.from_arrays(table.columns, schema=EVENT_SCHEMA)  # its not-null flags


def _unique_ids(tables: list[pa.Table]) -> list[pa.Table]:
    """The tables as they are when their id ranges are apart; else each moved past the one
    before it (ids and the links that name them: parent, op, launch)."""
    import pyarrow.compute as pc

    spans = []
    for t in tables:
        ids = t.column("id")
        lo = pc.min(ids).as_py() if t.num_rows else 0
        hi = pc.max(ids).as_py() if t.num_rows else -1
        spans.append((int(lo or 0), int(hi if hi is not None else -1)))
    ordered = sorted(s for s in spans if s[1] >= s[0])
    if all(a[1] < b[0] for a, b in itertools.pairwise(ordered)):
        return tables
    out: list[pa.Table] = []
    next_id = 0
    for table, (lo, hi) in zip(tables, spans, strict=True):
        out.append(place(table, 0, next_id - lo))  # the ids and the links that name them
        next_id += max(0, hi - lo + 1)
    return out
