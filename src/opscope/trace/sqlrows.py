"""Query results as JSON-safe rows: what JSON cannot carry (times, decimals, integers past 64
bits, non-finite floats, blobs, intervals) made a value it can, and column names made unique so
that each can key a row object.  The SQL sandbox (:mod:`opscope.trace.sqlsafe`) pages its
results through :func:`json_rows`."""

from __future__ import annotations

import contextlib
import datetime
import decimal
import math
import uuid
from typing import Any

import pyarrow as pa

MAX_BLOB_BYTES = 256
_INT_RANGE = (-(1 << 63), 1 << 64)


def _json_type(t: pa.DataType) -> pa.DataType:
    """``t`` with what has no JSON form made a string: temporal types (Arrow writes even
    dates Python cannot hold), dictionaries as their values."""
    if isinstance(t, pa.BaseExtensionType):
        return _json_type(t.storage_type)
    if pa.types.is_temporal(t) and not pa.types.is_interval(t):
        return pa.string()
    if pa.types.is_dictionary(t):
        return _json_type(t.value_type)
    if pa.types.is_list(t):
        return pa.list_(_json_type(t.value_type))
    if pa.types.is_large_list(t):
        return pa.large_list(_json_type(t.value_type))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_json_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _json_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_json_type(t.key_type), _json_type(t.item_type))
    return t


def _jsonable(v: Any) -> Any:
    """One value as JSON can carry it."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if _INT_RANGE[0] <= v < _INT_RANGE[1] else str(v)
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, decimal.Decimal):
        exponent = v.as_tuple().exponent
        if not isinstance(exponent, int):  # NaN, Infinity
            return str(v)
        return _jsonable(int(v)) if exponent >= 0 else float(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        return "0x" + b.hex() if len(b) <= MAX_BLOB_BYTES else f"<{len(b)} bytes>"
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, pa.MonthDayNano):  # an interval
        return {"months": v.months, "days": v.days, "nanoseconds": v.nanoseconds}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, datetime.timedelta):
        return str(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    return str(v)


def _column_values(col: pa.ChunkedArray) -> list[Any]:
    if isinstance(col.type, pa.BaseExtensionType):
        col = pa.chunked_array([c.storage for c in col.chunks], type=col.type.storage_type)
    target = _json_type(col.type)
    if target != col.type:
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            col = col.cast(target)
    try:
        return [_jsonable(v) for v in col.to_pylist()]
    except (ValueError, OverflowError, TypeError):  # a value Python cannot hold: one by one
        out: list[Any] = []
        for i in range(len(col)):
            try:
                out.append(_jsonable(col[i].as_py()))
            except (ValueError, OverflowError, TypeError):
                out.append(f"<{col.type}>")
        return out


def unique_columns(names: list[str]) -> list[str]:
    """Column names made unique (``SELECT 1 AS a, 2 AS a``: ``a``, ``a_2``), so each can key
    a row object."""
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        key, n = name, 1
        while key in seen:
            n += 1
            key = f"{name}_{n}"
        seen.add(key)
        out.append(key)
    return out


def json_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``table`` as objects that ``json.dumps(..., allow_nan=False)`` accepts:
    times and dates as ISO strings, decimals as numbers (whole ones as integers), integers past
    64 bits and non-finite floats as strings, blobs as ``0x...`` hex (a placeholder past
    256 bytes), intervals as ``{months, days, nanoseconds}``, lists and structs recursively.
    Keys are :func:`unique_columns` of the table's names."""
    names = unique_columns(list(table.column_names))
    columns = [_column_values(table.column(i)) for i in range(table.num_columns)]
    rows = zip(*columns, strict=True)
    return [dict(zip(names, values, strict=True)) for values in rows] if columns else []
