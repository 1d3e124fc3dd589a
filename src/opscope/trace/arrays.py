"""Arrow -> NumPy: the one set of conversions every analysis uses.

Dictionary columns (``name``, ``kind``, ``source``, ``pid``, ...) are compared on their codes:
a test is evaluated once per distinct value, then spread to the rows by indexing, so no column
is ever cast to Python strings row by row.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Column: TypeAlias = "pa.ChunkedArray | pa.Array"

# Device events that are work (the device time of an op): kernels, copies, sets, collectives,
# Neuron executions.  Device annotations (spans over other work) and waits are not.
DEVICE_WORK_KINDS = ("kernel", "memcpy", "memset", "comm", "exec")


def ints(col: Column, fill: int = -1) -> np.ndarray:
    """An integer column as int64, nulls as ``fill``."""
    arr = col.fill_null(fill) if col.null_count else col
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def bools(col: Column) -> np.ndarray:
    """A boolean column as bool, nulls as False."""
    arr = col.fill_null(False) if col.null_count else col
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def strings(col: Column, fill: str = "") -> np.ndarray:
    """A string (or dictionary) column as an object array of ``str``, nulls as ``fill``.
    Costs a Python string per row: prefer :func:`codes` for tests on dictionary columns."""
    if pa.types.is_dictionary(col.type):
        c, values = codes(col)
        table = np.array([*values, fill], dtype=object)
        return np.asarray(table[c], dtype=object)
    arr = col.fill_null(fill) if col.null_count else col
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)


def _chunks(col: Column) -> list[pa.Array]:
    return list(col.chunks) if isinstance(col, pa.ChunkedArray) else [col]


def codes(col: Column) -> tuple[np.ndarray, list[str]]:
    """A dictionary (or string) column as ``(codes, values)``: ``values[codes[i]]`` is row
    ``i``'s value; a null row has code ``len(values)``.  Chunks with different dictionaries
    are mapped onto one list of distinct values."""
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    chunks = _chunks(col)
    if not chunks:
        return np.zeros(0, dtype=np.int64), []
    values: list[str] = []
    position: dict[str, int] = {}
    parts: list[np.ndarray] = []
    maps: list[np.ndarray] = []
    for chunk in chunks:
        local = chunk.dictionary.to_pylist()
        remap = np.empty(len(local) + 1, dtype=np.int64)
        for i, v in enumerate(local):
            j = position.get(v)
            if j is None:
                j = position[v] = len(values)
                values.append(v)
            remap[i] = j
        maps.append(remap)
        idx = chunk.indices
        parts.append(ints(idx, len(local)))
    null_code = len(values)
    out = []
    for remap, part in zip(maps, parts, strict=True):
        remap[-1] = null_code
        out.append(remap[part])
    return (np.concatenate(out) if out else np.zeros(0, dtype=np.int64)), values


def value_mask(values: list[str], wanted: Iterable[str]) -> np.ndarray:
    """For a list of distinct values (see :func:`codes`): which are in ``wanted``; one extra
    False entry at the end stands for null rows."""
    want = set(wanted)
    return np.array([v in want for v in values] + [False], dtype=bool)


def isin(col: Column, wanted: Iterable[str]) -> np.ndarray:
    """Rows whose value is one of ``wanted`` (nulls: False)."""
    c, values = codes(col)
    return np.asarray(value_mask(values, wanted)[c], dtype=bool)


def equals(col: Column, value: str) -> np.ndarray:
    """Rows equal to ``value`` (nulls: False)."""
    return isin(col, (value,))


def matches(col: Column, pattern: str, ignore_case: bool = False) -> np.ndarray:
    """Rows matching the regular expression (RE2 syntax), tested once per distinct value."""
    c, values = codes(col)
    hit = bools(
        pc.match_substring_regex(pa.array(values, pa.string()), pattern, ignore_case=ignore_case)
    )
    return np.asarray(np.append(hit, False)[c], dtype=bool)


def starts_with(col: Column, prefix: str) -> np.ndarray:
    """Rows whose value starts with ``prefix``, tested once per distinct value."""
    c, values = codes(col)
    table = np.array([v.startswith(prefix) for v in values] + [False], dtype=bool)
    return np.asarray(table[c], dtype=bool)
