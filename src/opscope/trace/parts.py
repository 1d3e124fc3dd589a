"""Ingested files (:class:`FilePart`) and their stacking, with ranks, into one :class:`Trace`.

A file's part is its event table (ids from 0, rank 0) and its metadata as a
:meth:`~opscope.trace.model.TraceMeta.to_json_dict` dict (what the cache stores).  Ranks come
from ``distributedInfo.rank``, else a ``rank<N>`` (``rank-3``, ``rank_3``, ``worker3``) in the
file name, else the files' order (``TraceMeta.rank_origin`` says which); stacking shifts the
ids of each part past the previous ones and sets its rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.events import event_table
from opscope.trace.jobs import MixedJobsError, mixed_jobs
from opscope.trace.kineto.columns import KinetoParse
from opscope.trace.link import link
from opscope.trace.model import Trace, TraceMeta
from opscope.trace.rows import as_int
from opscope.trace.schema import EVENT_SCHEMA

RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


@dataclass
class FilePart:
    """One file, ingested: its table (ids from 0, rank 0) and its metadata."""

    table: pa.Table
    meta: dict[str, Any]  # TraceMeta.to_json_dict() of this file alone


def to_part(parsed: KinetoParse, warnings: list[str], origin: str) -> FilePart:
    """One parsed Kineto document, linked, as a part (``origin``: its path, for the metadata)."""
    links = link(parsed.events, parsed.flows)
    table = event_table(parsed.events, links)
    m = parsed.meta
    meta = TraceMeta(paths=[origin], warnings=warnings, skipped=dict(parsed.skipped))
    if isinstance(m.get("deviceProperties"), list):
        meta.device_properties = [p for p in m["deviceProperties"] if isinstance(p, dict)]
    if isinstance(m.get("distributedInfo"), dict):
        meta.distributed_info = m["distributedInfo"]
    meta.base_time_ns = as_int(m.get("baseTimeNanoseconds"))
    meta.process_names = dict(parsed.process_names)
    meta.thread_names = {f"{p}/{t}": v for (p, t), v in parsed.thread_names.items()}
    meta.extra = {
        k: v
        for k, v in m.items()
        if k not in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds")
    }
    return FilePart(table, meta.to_json_dict())


def assign_ranks(files: list[Path], parts: list[FilePart]) -> list[tuple[int, str]]:
    """(rank, where it came from) of each file's part (see the module docstring); a rank two
    files claim goes to the second by order."""
    out: list[tuple[int, str]] = []
    for order, (f, part) in enumerate(zip(files, parts, strict=True)):
        info = part.meta.get("distributed_info")
        rank = info.get("rank") if isinstance(info, dict) else None
        if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < 2**31:
            out.append((rank, "distributedInfo"))
            continue
        m = RANK_IN_NAME.search(f.name)
        if m and int(m.group(1)) < 2**31:
            out.append((int(m.group(1)), "file name"))
        else:
            out.append((order, "order"))
    seen: set[int] = set()
    for i, (r, origin) in enumerate(out):
        if r in seen:  # two files claim one rank: fall back to order
            out[i] = (max(seen) + 1, f"order ({origin} repeated rank {r})")
        seen.add(out[i][0])
    return out


def rank_sorted(files: list[Path]) -> list[Path]:
    """rank2 before rank10: numeric order where names carry a rank, else by name."""

    def key(p: Path) -> tuple[int, int, str]:
        m = RANK_IN_NAME.search(p.name)
        return (0, int(m.group(1)), p.name) if m else (1, 0, p.name)

    return sorted(files, key=key)


def unreadable(path: Path, reason: str, taken: set[int]) -> dict[str, Any]:
    """A file of a job that cannot be read (``reason``: the one-line error): its rank from its
    name, None when the name does not say or a readable file holds that rank."""
    m = RANK_IN_NAME.search(path.name)
    rank = int(m.group(1)) if m and int(m.group(1)) < 2**31 else None
    return {"path": str(path), "rank": None if rank in taken else rank, "reason": reason}


def unreadable_warning(entry: dict[str, Any]) -> str:
    """The warning that names a file of a job left out (see :func:`unreadable`)."""
    who = f"rank {entry['rank']}" if entry.get("rank") is not None else "a rank"
    return f"{who} left out of the job, its file cannot be read: {entry['reason']}"


def none_readable(path: Path, reasons: list[str]) -> str:
    """The error of a job none of whose files can be read."""
    more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return f"{path}: none of its {len(reasons)} trace files can be read: {reasons[0]}{more}"


def _shift(col: pa.ChunkedArray, offset: int) -> pa.ChunkedArray | pa.Array:
    return pc.add(col, pa.scalar(offset, pa.int64())) if offset else col


def place(table: pa.Table, rank: int, offset: int) -> pa.Table:
    """A file's table as a block of a job's: ``rank`` set, ids shifted by ``offset`` (the rows
    of the files before it)."""
    t = table
    if rank:
        ranks_col = pa.chunked_array([pa.array(np.full(t.num_rows, rank, dtype=np.int32))])
        t = t.set_column(1, "rank", ranks_col)
    if offset:
        for name in ("id", "parent_id", "op_id", "launch_id"):
            i = t.schema.get_field_index(name)
            t = t.set_column(i, name, _shift(t.column(name), offset))
    if rank or offset:
        t = pa.Table.from_arrays(t.columns, schema=EVENT_SCHEMA)  # restore not-null flags
    return t


def combine_meta(
    files: list[Path], metas: list[dict[str, Any]], ranks: list[tuple[int, str]]
) -> TraceMeta:
    """The metadata of the files' parts (``FilePart.meta`` each) stacked in order; files of
    different jobs are refused (:func:`opscope.trace.jobs.mixed_jobs`)."""
    reason = mixed_jobs(files, metas)
    if reason is not None:
        raise MixedJobsError(reason)
    meta = TraceMeta(paths=[str(f) for f in files], cached=bool(metas))
    for part_meta, (rank, origin) in zip(metas, ranks, strict=True):
        pm = TraceMeta.from_dict(part_meta)
        meta.cached = meta.cached and bool(part_meta.get("cached"))
        meta.ranks.append(rank)
        meta.rank_origin[rank] = origin
        meta.warnings.extend(pm.warnings)
        for reason, count in pm.skipped.items():
            meta.skipped[reason] = meta.skipped.get(reason, 0) + count
        if not meta.device_properties:
            meta.device_properties = pm.device_properties
        if meta.distributed_info is None:
            meta.distributed_info = pm.distributed_info
        if meta.base_time_ns is None:
            meta.base_time_ns = pm.base_time_ns
        meta.process_names.update(pm.process_names)
        meta.thread_names.update(pm.thread_names)
        for k, v in pm.extra.items():
            meta.extra.setdefault(k, v)
    return meta


def combine(files: list[Path], parts: list[FilePart], ranks: list[tuple[int, str]]) -> Trace:
    """The parts stacked in order, ids shifted and ranks set, their metadata merged."""
    meta = combine_meta(files, [part.meta for part in parts], ranks)
    tables: list[pa.Table] = []
    offset = 0
    for part, (rank, _origin) in zip(parts, ranks, strict=True):
        tables.append(place(part.table, rank, offset))
        offset += part.table.num_rows
    if not tables:
        events = EVENT_SCHEMA.empty_table()
    elif len(tables) == 1:
        events = tables[0]
    else:
        events = pa.concat_tables(tables).unify_dictionaries().combine_chunks()
    return Trace(events, meta)
