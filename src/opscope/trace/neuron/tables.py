"""Neuron Explorer Parquet tables of a profile folder, checked against the 7.4.0 schema."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from opscope.errors import TraceError
from opscope.trace.neuron.layout import TABLE_FILE, table_names
from opscope.trace.neuron.schema import SCHEMA, SCHEMA_VERSION, WARNING_PREFIX


def table_files(folder: Path, table: str) -> list[Path]:
    """``<table>.parquet`` and ``<table>_<n>.parquet`` in ``folder``, in numeric order."""
    found: list[tuple[int, Path]] = []
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            m = TABLE_FILE.match(p.name)
            if m and m.group(1) == table and p.is_file():
                found.append((int(m.group(2)) if m.group(2) else -1, p))
    return [p for _, p in sorted(found)]


def _to_float64(t: pa.Table) -> pa.Table:
    """``number (float)`` columns are stored as 32-bit floats: widen them (exact)."""
    for i, f in enumerate(t.schema):
        if pa.types.is_float32(f.type) or pa.types.is_float16(f.type):
            t = t.set_column(i, f.name, t.column(i).cast(pa.float64()))
    return t


def read_table(folder: Path, table: str, warnings: list[str]) -> pa.Table | None:
    """One Neuron table of a profile folder (parts stacked), or None when absent.

    Known tables are checked against schema 7.4.0: missing required columns raise
    :class:`TraceError`; unknown columns are appended to ``warnings`` (and kept).
    """
    files = table_files(folder, table)
    if not files:
        return None
    parts = []
    for f in files:
        try:
            parts.append(pq.read_table(f))
        except (OSError, pa.ArrowException) as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TraceError(f"{f}: not a readable Parquet file ({msg})") from None
    try:
        t = parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="default")
    except pa.ArrowException as exc:
        raise TraceError(f"{folder / table}: parts do not stack ({exc})") from None
    t = _to_float64(t)
    if table in SCHEMA:
        required, known = SCHEMA[table]
        missing = sorted(required - set(t.column_names))
        if missing:
            raise TraceError(
                f"{folder}/{table}: missing required column{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} (Neuron profile schema {SCHEMA_VERSION})"
            )
        unknown = [c for c in t.column_names if c not in known]
        if unknown:
            warnings.append(
                f"{WARNING_PREFIX}{folder.name}/{table}: columns not in schema {SCHEMA_VERSION} "
                f"ignored: {', '.join(unknown)}"
            )
    return t


def read_folder(folder: Path, warnings: list[str]) -> dict[str, pa.Table]:
    """Every table of a profile folder."""
    out: dict[str, pa.Table] = {}
    for name in sorted(table_names(folder)):
        t = read_table(folder, name, warnings)
        if t is not None:
            out[name] = t
    return out
