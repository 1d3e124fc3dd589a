"""An event store: the per-rank event tables ``opscope report --cluster ... --store DIR`` writes
(:func:`opscope.analysis.cluster.write_events`), one ``rank<N>.parquet`` per rank.

Detected by its files, not its name: a folder (or one file) whose ``rank<N>.parquet`` files have
the event table's columns (:data:`~opscope.trace.schema.EVENT_SCHEMA`, read from each file's
Parquet footer), so a Neuron Explorer folder, whose tables are Parquet too, is never taken for
one.  Loading reads the files into one event table, rank by rank (the ``rank`` column is the
file's ``<N>``); the ids are kept when the files' id ranges are apart (what the cluster writes:
every rank's ids are the job's), else each file's are moved past the previous file's, links
with them, so that ids stay unique in the job.

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
from opscope.trace.parts import place
from opscope.trace.schema import EVENT_SCHEMA, EVENT_SCHEMA_VERSION

NAME = "event_store"

RANK_FILE = re.compile(r"^rank(\d+)\.parquet$")
_VERSION_KEY = b"opscope.event_schema_version"


def _rank_files(path: Path) -> list[tuple[int, Path]]:
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
    return any(is_event_table(p) for _r, p in _rank_files(path))


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The store's ranks as one event table (``cache``, ``max_bytes`` and ``workers`` do not
    apply: the files are read in place)."""
    import pyarrow.parquet as pq

    files = _rank_files(path)
    odd = [p.name for _r, p in files if not is_event_table(p)]
    if odd:
        raise TraceError(
            f"{path}: an event store whose {', '.join(odd[:4])} "
            f"{'is' if len(odd) == 1 else 'are'} not an event table (rank<N>.parquet with the "
            "columns of opscope's event schema)"
        )
    tables: list[pa.Table] = []
    warnings: list[str] = []
    for rank, p in files:
        try:
            table = pq.read_table(p)
        except (OSError, pa.ArrowException) as exc:
            raise TraceError(f"{p}: cannot read this event table: {exc}") from None
        version = (table.schema.metadata or {}).get(_VERSION_KEY, b"").decode() or "unknown"
        if version != str(EVENT_SCHEMA_VERSION):
            warnings.append(
                f"{p.name}: written with event schema version {version}, read as version "
                f"{EVENT_SCHEMA_VERSION} (the columns agree; rewrite the store for the "
                "current classification)"
            )
        tables.append(_as_rank(table.cast(EVENT_SCHEMA), rank))
    tables = _unique_ids(tables)
    events = pa.concat_tables(tables).unify_dictionaries().combine_chunks()
    meta = TraceMeta(
        paths=[str(p) for _r, p in files],
        format=NAME,
        ranks=[r for r, _p in files],
        rank_origin={r: "file name" for r, _p in files},
        warnings=warnings,
    )
    return Trace(events, meta)


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
