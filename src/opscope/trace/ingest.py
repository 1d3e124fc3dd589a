"""Paths -> :class:`~opscope.trace.model.Trace`.

A path may be a trace file, a run folder (``run.json`` beside ``trace.json.gz`` or
``traces/rank<N>.json.gz``) or a folder of per-rank trace files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from opscope.errors import TraceError
from opscope.trace.kineto import KinetoParse, parse_kineto
from opscope.trace.link import assign_steps, attribute_ops, nest
from opscope.trace.model import Trace, TraceMeta
from opscope.trace.readers import decode_json, read_bytes
from opscope.trace.schema import EVENT_SCHEMA

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


def is_trace_file(path: Path) -> bool:
    name = path.name
    return path.is_file() and (name.endswith(".json") or name.endswith(".json.gz"))


def find_trace_files(path: Path) -> list[Path]:
    """The trace files a path stands for."""
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder")
    if path.is_file():
        return [path]
    ranks = path / "traces"
    if ranks.is_dir():
        files = sorted(p for p in ranks.iterdir() if is_trace_file(p))
        if files:
            return files
    for candidate in ("trace.json.gz", "trace.json"):
        if (path / candidate).is_file():
            return [path / candidate]
    files = sorted(
        p for p in path.iterdir() if is_trace_file(p) and p.name not in ("run.json", "report.json")
    )
    if not files:
        raise TraceError(f"{path}: no trace files (*.json, *.json.gz) in this folder")
    return files


def load(path: str | Path) -> Trace:
    """Load a trace file, run folder, or folder of per-rank traces into a :class:`Trace`."""
    files = find_trace_files(Path(path))
    parts = [_parse_file(f) for f in files]
    ranks = _assign_ranks(files, parts)
    return _build(files, parts, ranks)


def load_document(doc: Any, origin: str = "<memory>") -> Trace:
    """Build a Trace from an already decoded Kineto document (tests, tools)."""
    try:
        parsed = parse_kineto(doc)
    except ValueError as exc:
        raise TraceError(f"{origin}: {exc}") from None
    return _build([Path(origin)], [(parsed, None)], [(0, "order")])


def _parse_file(path: Path) -> tuple[KinetoParse, str | None]:
    data = read_bytes(path)
    doc, warning = decode_json(data, str(path))
    del data
    try:
        parsed = parse_kineto(doc)
    except ValueError as exc:
        raise TraceError(f"{path}: {exc}") from None
    return parsed, warning


def _assign_ranks(
    files: list[Path], parts: list[tuple[KinetoParse, str | None]]
) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for order, (f, (parsed, _)) in enumerate(zip(files, parts, strict=True)):
        info = parsed.meta.get("distributedInfo")
        rank = info.get("rank") if isinstance(info, dict) else None
        if isinstance(rank, int) and rank >= 0:
            out.append((rank, "distributedInfo"))
            continue
        m = _RANK_IN_NAME.search(f.name)
        if m:
            out.append((int(m.group(1)), "file name"))
        else:
            out.append((order, "order"))
    seen: set[int] = set()
    for i, (r, origin) in enumerate(out):
        if r in seen:  # two files claim one rank: fall back to order
            out[i] = (max(seen) + 1, f"order ({origin} repeated rank {r})")
        seen.add(out[i][0])
    return out


def _build(
    files: list[Path],
    parts: list[tuple[KinetoParse, str | None]],
    ranks: list[tuple[int, str]],
) -> Trace:
    meta = TraceMeta(paths=[str(f) for f in files])
    tables: list[pa.Table] = []
    offset = 0
    for (parsed, warning), (rank, origin) in zip(parts, ranks, strict=True):
        cols = parsed.columns
        parent = nest(cols)
        op = attribute_ops(cols, parent, parsed.flows)
        step = assign_steps(cols, op)
        n = len(cols)

        def shift(values: list[int | None], off: int = offset) -> list[int | None]:
            return [None if v is None else v + off for v in values]

        table = pa.table(
            {
                "id": pa.array(range(offset, offset + n), pa.int64()),
                "rank": pa.array([rank] * n, pa.int32()),
                "source": pa.array(cols.source, pa.string()).dictionary_encode(),
                "kind": pa.array(cols.kind, pa.string()).dictionary_encode(),
                "cat": pa.array(cols.cat, pa.string()).dictionary_encode(),
                "name": pa.array(cols.name, pa.string()).dictionary_encode(),
                "pid": pa.array(cols.pid, pa.string()).dictionary_encode(),
                "tid": pa.array(cols.tid, pa.string()).dictionary_encode(),
                "lane": pa.array(cols.lane, pa.string()).dictionary_encode(),
                "start_ns": pa.array(cols.start_ns, pa.int64()),
                "dur_ns": pa.array(cols.dur_ns, pa.int64()),
                "correlation": pa.array(cols.correlation, pa.int64()),
                "external_id": pa.array(cols.external_id, pa.int64()),
                "parent_id": pa.array(shift(parent), pa.int64()),
                "op_id": pa.array(shift(op), pa.int64()),
                "step": pa.array(step, pa.int32()),
                "args": pa.array(cols.args, pa.string()),
            }
        )
        tables.append(table.cast(EVENT_SCHEMA))
        offset += n
        meta.ranks.append(rank)
        meta.rank_origin[rank] = origin
        if warning:
            meta.warnings.append(warning)
        for reason, count in parsed.skipped.items():
            meta.skipped[reason] = meta.skipped.get(reason, 0) + count
        m = parsed.meta
        if not meta.device_properties and isinstance(m.get("deviceProperties"), list):
            meta.device_properties = [p for p in m["deviceProperties"] if isinstance(p, dict)]
        if meta.distributed_info is None and isinstance(m.get("distributedInfo"), dict):
            meta.distributed_info = m["distributedInfo"]
        base = m.get("baseTimeNanoseconds")
        if meta.base_time_ns is None and isinstance(base, int):
            meta.base_time_ns = base
        meta.process_names.update(parsed.process_names)
        meta.thread_names.update({f"{p}/{t}": v for (p, t), v in parsed.thread_names.items()})
        for k, v in m.items():
            if k not in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds"):
                meta.extra.setdefault(k, v)
    events = pa.concat_tables(tables) if tables else EVENT_SCHEMA.empty_table()
    return Trace(events, meta)
