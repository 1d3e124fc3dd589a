"""A group-by over table columns in NumPy, groups in the order their keys first appear.

The op, kernel and roofline tables group events by name (and shape): a few columns, a few
aggregates.  Arrow's ``Table.group_by`` would load its query engine (Acero and the dataset
module: about 16 MB of resident memory and 20-25 ms on the first call of every process) and
orders the groups of several key columns by its hash table's layout, which is neither the
order of the trace nor promised to stay the same between Arrow versions.  Here the groups come
in the order of each key's first row (as torch's ``key_averages()`` lists them), and integer
sums are exact (added in int64, never through a double).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from opscope.trace.arrays import Codes, ints, unique_inverse, valid, values_at

#: the aggregates :func:`grouped` computes (Arrow's names, and its output names
#: ``<column>_<aggregate>``): ``count`` counts the non-null values; ``sum``, ``min`` and
#: ``max`` of integer or boolean columns give None for a group of nulls only; ``distinct``
#: lists a group's distinct values (null included) in the order they first appear.
AGGREGATES = ("count", "sum", "min", "max", "distinct")


def grouped(
    table: pa.Table, keys: Sequence[str], aggregates: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """One dict per distinct combination of the ``keys`` columns (string, dictionary or
    integer; null is a value of its own), in the order of each combination's first row: the
    key values, then ``<column>_<aggregate>`` for each of ``aggregates`` (see
    :data:`AGGREGATES`).  The rows Arrow's ``table.group_by(keys).aggregate(aggregates)``
    gives, with dictionary keys as their text, in first-appearance order."""
    out = group_columns(table, keys, aggregates)
    names = list(out)
    return [dict(zip(names, values, strict=True)) for values in zip(*out.values(), strict=True)]


def group_columns(
    table: pa.Table, keys: Sequence[str], aggregates: Sequence[tuple[str, str]]
) -> dict[str, list[Any]]:
    """:func:`grouped` as columns: each key and ``<column>_<aggregate>`` -> its values, one
    per group in the same order (no dict per group: a caller making its own rows reads
    these)."""
    for column, fn in aggregates:
        if fn not in AGGREGATES:
            raise ValueError(f"aggregate {fn!r} of {column!r}: one of {', '.join(AGGREGATES)}")
    n = table.num_rows
    if n == 0:
        return {k: [] for k in [*keys, *(f"{c}_{fn}" for c, fn in aggregates)]}
    gid, first, texts = _group_ids([table.column(k) for k in keys], n)
    order = np.argsort(gid, kind="stable")
    counts = np.bincount(gid, minlength=len(first))
    starts = np.zeros(len(first), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    out: dict[str, list[Any]] = {}
    for key, text in zip(keys, texts, strict=True):
        out[key] = values_at(table.column(key), first) if text is None else text.values_at(first)
    for column, fn in aggregates:
        out[f"{column}_{fn}"] = _aggregate(table.column(column), fn, order, starts, gid)
    return out


def _codes(col: pa.ChunkedArray) -> tuple[np.ndarray, Codes | None]:
    """A key column as non-negative integer codes, one per distinct value (null: 0), and a
    text column's :class:`Codes` (None for other columns, a dictionary of numbers included:
    its values are read from the column)."""
    if pa.types.is_null(col.type):  # no value at all
        return np.zeros(len(col), dtype=np.int64), None
    if pa.types.is_integer(col.type) or pa.types.is_boolean(col.type):
        values = ints(col, 0)
        lo = int(values.min()) if len(values) else 0
        _, inverse = unique_inverse(values - lo)
        return np.where(valid(col), inverse + 1, 0), None
    if (
        pa.types.is_string(col.type)
        or pa.types.is_large_string(col.type)
        or pa.types.is_dictionary(col.type)
    ):
        codes = Codes.of(col)
        text = not pa.types.is_dictionary(col.type) or pa.types.is_string(col.type.value_type)
        return codes.codes.astype(np.int64) + 1, codes if text else None
    raise TypeError(f"cannot group by a column of type {col.type}")


def _group_ids(
    columns: list[pa.ChunkedArray], n: int
) -> tuple[np.ndarray, np.ndarray, list[Codes | None]]:
    """Each row's group (0, 1, ... in the order groups first appear), each group's first
    row, and each column's :class:`Codes` where it is text (see :func:`_codes`)."""
    key = np.zeros(n, dtype=np.int64)
    texts: list[Codes | None] = []
    for col in columns:
        codes, text = _codes(col)
        texts.append(text)
        width = int(codes.max()) + 1
        _, key = unique_inverse(key * width + codes)  # compact before the next column
    # the keys are compact (0 .. k-1, each present): each one's first row, without a sort
    k = int(key.max()) + 1 if n else 0
    first = np.full(k, n, dtype=np.int64)
    np.minimum.at(first, key, np.arange(n, dtype=np.int64))
    rank = np.empty(k, dtype=np.int64)
    by_first = np.argsort(first, kind="stable")
    rank[by_first] = np.arange(k)
    return rank[key], first[by_first], texts


def _aggregate(
    col: pa.ChunkedArray, fn: str, order: np.ndarray, starts: np.ndarray, gid: np.ndarray
) -> list[Any]:
    """One aggregate of ``col`` per group (rows ``order`` sorted by group, each group's rows
    from ``starts``)."""
    n_groups = len(starts)
    ok = valid(col)
    if fn == "count":
        counts: list[Any] = np.bincount(gid[ok], minlength=n_groups).tolist()
        return counts
    if fn == "distinct":
        return _distinct(col, gid, n_groups)
    if pa.types.is_null(col.type):
        return [None] * n_groups
    if not (pa.types.is_integer(col.type) or pa.types.is_boolean(col.type)):
        raise TypeError(f"{fn} of a column of type {col.type}: integers or booleans only")
    nulls = bool(col.null_count)
    values = ints(col, 0)
    if fn == "sum":
        got = np.add.reduceat((np.where(ok, values, 0) if nulls else values)[order], starts)
    else:
        big = np.iinfo(np.int64).max
        fill = big if fn == "min" else -big - 1
        ufunc = np.minimum if fn == "min" else np.maximum
        got = ufunc.reduceat((np.where(ok, values, fill) if nulls else values)[order], starts)
    out: list[Any] = got.tolist()  # Python ints (an int64 array)
    if not nulls:  # every group has a row, so a value
        return out
    has = np.bincount(gid[ok], minlength=n_groups) > 0
    return [v if h else None for v, h in zip(out, has.tolist(), strict=True)]


def _distinct(col: pa.ChunkedArray, gid: np.ndarray, n_groups: int) -> list[list[Any]]:
    """Each group's distinct values of ``col`` in the order they first appear: the first row
    of each (group, value) pair, found on the column's codes (a column of a type that has
    none is read value by value)."""
    try:
        codes, text = _codes(col)
    except TypeError:
        seen: list[dict[Any, None]] = [{} for _ in range(n_groups)]
        for g, v in zip(gid.tolist(), col.to_pylist(), strict=True):
            seen[g].setdefault(v, None)
        return [list(s) for s in seen]
    _, first = np.unique(gid * (int(codes.max()) + 1) + codes, return_index=True)
    first = np.sort(first)
    out: list[list[Any]] = [[] for _ in range(n_groups)]
    values = values_at(col, first) if text is None else text.values_at(first)
    for g, v in zip(gid[first].tolist(), values, strict=True):
        out[g].append(v)
    return out
