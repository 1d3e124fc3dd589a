"""Arrow -> NumPy conversions: the one set every analysis module uses.

* :func:`ints` / :func:`bools` - a numeric or boolean column as an int64 / bool array, nulls
  filled (``fill`` for integers, False for booleans); an int64 column without nulls in one
  chunk (:func:`one_chunk`) comes back as a read-only view of its buffer, not a copy;
* :func:`strings` - a string column (dictionary-encoded or not) as an object array of ``str``,
  nulls as ``""``;
* :class:`Codes` - a string column as integer codes into its distinct values, sorted: the
  vectorised way to compare, match and group strings without a Python string per row;
* :func:`distinct` - the distinct strings of a column; :func:`member` - integer membership.

The group-by of the op, kernel and roofline tables is :mod:`opscope.trace.groupby`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable


def ints(col: pa.ChunkedArray | pa.Array, fill: int = -1, dtype: Any = np.int64) -> np.ndarray:
    """An integer column as int64 (or ``dtype``, wide enough for its values), nulls as
    ``fill``: a read-only view of the column's buffer (no copy) when it is of that type in
    one chunk without nulls."""
    if col.null_count and pa.types.is_integer(col.type):
        return np.concatenate([_filled(c, fill, dtype) for c in _chunks(col)])
    arr = col.fill_null(fill) if col.null_count else col
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=dtype)


def row_dtype(n: int) -> type[np.signedinteger[Any]]:
    """The integer type of row numbers (and -1 for none) in a table of ``n`` rows: int32,
    half the memory of int64, below 2**31 rows."""
    return np.int32 if n < 2**31 - 1 else np.int64


def one_chunk(table: pa.Table, names: Iterable[str]) -> pa.Table:
    """``table`` with each of the columns ``names`` (those it has) in one chunk, so that
    :func:`ints` reads them without a copy; one column at a time, so the transient is one
    column's size.  The other columns keep their chunks."""
    for name in names:
        at = table.schema.get_field_index(name)
        if at < 0:
            continue
        col = table.column(at)
        if col.num_chunks > 1:
            table = table.set_column(at, table.field(at), pa.chunked_array([col.combine_chunks()]))
    return table


def _filled(chunk: pa.Array, fill: int, dtype: Any = np.int64) -> np.ndarray:
    """One chunk of an integer column as int64 (or ``dtype``), nulls as ``fill``: its values
    and validity read from its buffers (what ``fill_null`` then ``to_numpy`` give, without the
    kernel)."""
    if not chunk.null_count:
        return np.asarray(chunk.to_numpy(zero_copy_only=False), dtype=dtype)
    n, at = len(chunk), chunk.offset
    dtype = np.dtype(chunk.type.to_pandas_dtype())
    values = np.frombuffer(chunk.buffers()[1], dtype=dtype, count=n, offset=at * dtype.itemsize)
    return np.where(_bitmap(chunk), values.astype(dtype), fill).astype(dtype, copy=False)


def _bitmap(chunk: pa.Array) -> np.ndarray:
    """A chunk's validity bitmap as a bool array (the chunk has one: nulls, a plain type)."""
    n, at = len(chunk), chunk.offset
    bytes_ = np.frombuffer(chunk.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bytes_, count=at + n, bitorder="little")[at:].astype(bool)


def valid(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Whether each value of a column is not null (``is_valid``; read from the validity
    bitmaps of integer and string columns, through Arrow for other types)."""
    if not col.null_count:
        return np.ones(len(col), dtype=bool)
    if not (pa.types.is_integer(col.type) or pa.types.is_string(col.type)):
        return bools(col.is_valid())
    return np.concatenate(
        [_bitmap(c) if c.null_count else np.ones(len(c), dtype=bool) for c in _chunks(col)]
    )


def bools(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean column as a bool array, nulls as False."""
    arr = col.fill_null(False) if col.null_count else col
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def strings(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A string column (dictionary-encoded or not) as an object array, nulls as ``""``."""
    arr = col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col
    arr = arr.fill_null("") if arr.null_count else arr
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=object)


def values_at(col: pa.ChunkedArray | pa.Array, rows: np.ndarray) -> list[Any]:
    """The Python values of ``rows`` of a column (``col.take(rows).to_pylist()``); a column of
    at most :data:`FEW_VALUES` rows is read whole instead (no Arrow kernel to start: the
    first one a process runs costs a fixed ~0.2 ms)."""
    if len(col) <= FEW_VALUES:
        values = col.to_pylist()
        return [values[i] for i in rows.tolist()]
    return list(col.take(pa.array(rows)).to_pylist())


def take(arr: pa.Array, rows: np.ndarray) -> pa.Array:
    """``arr.take(rows)`` of a plain (not dictionary) array: a short one through
    :func:`values_at`."""
    if len(arr) <= FEW_VALUES and not pa.types.is_dictionary(arr.type):
        return pa.array(values_at(arr, rows), arr.type)
    return arr.take(pa.array(rows))


def distinct(col: pa.ChunkedArray | pa.Array, mask: np.ndarray | None = None) -> list[str]:
    """The distinct non-null strings of a string or dictionary column (of the ``mask`` rows
    when given), in no particular order; a dictionary column is read by its indices."""
    out: set[str] = set()
    at = 0
    for chunk in _chunks(col):
        n = len(chunk)
        piece = chunk
        if mask is not None:
            piece = chunk.filter(pa.array(mask[at : at + n]))
        at += n
        if pa.types.is_dictionary(piece.type):
            used = unique_ints(ints(piece.indices, -1))
            used = used[used >= 0]
            values = piece.dictionary.take(pa.array(used)).cast(pa.string())
        else:
            values = pc.unique(piece.cast(pa.string()))
        out.update(v for v in values.to_pylist() if v is not None)
    return list(out)


def unique_ints(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` (the sorted distinct values, same dtype) of an integer array: by a
    table over the value range when it is small next to the array, else by a sort.  NumPy
    2.4's ``np.unique`` goes through a hash table, which on arrays of many distinct values
    takes 30-80x a sort's time (225k row numbers: 89-227 ms against 3 ms); other dtypes go to
    ``np.unique``."""
    a = np.asarray(values).reshape(-1)
    if a.dtype.kind not in "iu":
        return np.asarray(np.unique(a))
    if len(a) == 0:
        return np.array(a)
    lo, hi = int(a.min()), int(a.max())
    if hi - lo + 1 <= 4 * len(a) + 1024 and hi < 2**63:
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[a.astype(np.int64, copy=False) - lo] = True
        return np.asarray(np.flatnonzero(present) + lo, dtype=a.dtype)
    s = np.sort(a)
    keep = np.ones(len(s), dtype=bool)
    keep[1:] = s[1:] != s[:-1]
    return s[keep]


def unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for non-negative integer keys: by a table
    over the key range when it is small next to the array (no sort), else NumPy's."""
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    if len(keys) == 0:
        return keys.copy(), np.zeros(0, dtype=np.int64)
    lo, hi = int(keys.min()), int(keys.max())
    span = hi - lo + 1
    if lo < 0 or span > 4 * len(keys) + 1024:
        uniq, inverse = np.unique(keys, return_inverse=True)
        return uniq, np.asarray(inverse, dtype=np.int64).reshape(-1)
    present = np.zeros(span, dtype=bool)
    present[keys - lo] = True
    remap = np.cumsum(present) - 1
    return np.flatnonzero(present) + lo, remap[keys - lo].astype(np.int64)


def member(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """``np.isin(values, pool)`` for integer arrays, by a sort of ``pool`` and a binary
    search per value (faster than NumPy's hashing on large arrays)."""
    values = np.asarray(values)
    if len(pool) == 0 or len(values) == 0:
        return np.zeros(len(values), dtype=bool)
    ordered = np.sort(pool)
    pos = np.minimum(np.searchsorted(ordered, values), len(ordered) - 1)
    return np.asarray(ordered[pos] == values, dtype=bool)


def _chunks(col: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    return list(col.chunks) if isinstance(col, pa.ChunkedArray) else [col]


#: A column (or dictionary) of at most this many values is handled in Python or NumPy: no
#: Arrow kernel to start (the first one a process runs costs a fixed ~0.2 ms).
FEW_VALUES = 256


def _few_codes(entries: list[str | None], idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Codes.of` of a small dictionary (``entries``, its values in order) and its rows'
    indices (-1 null): the same codes and values (Python orders strings by code point, as
    Arrow orders their UTF-8 bytes)."""
    distinct = sorted({v for v in entries if v is not None})
    at = {v: i for i, v in enumerate(distinct)}
    canon = np.asarray([-1 if v is None else at[v] for v in entries] + [-1], dtype=np.int32)
    return canon[idx], np.asarray(distinct, dtype=object).reshape(-1)


class Codes:
    """A string column as codes: ``codes[row]`` indexes ``values``, the column's distinct
    non-null strings in sorted order (so comparing codes compares the strings); -1 is null.

    Comparisons, regular expressions and prefix tests run once per distinct value and are
    spread to the rows by indexing.  A null compares as ``""`` (as :func:`strings` reads it)
    but never matches a pattern.
    """

    __slots__ = ("_arrow", "_strings", "codes", "values")

    def __init__(self, codes: np.ndarray, values: np.ndarray) -> None:
        self.codes = codes
        self.values = values
        self._arrow: pa.Array | None = None
        self._strings: np.ndarray | None = None

    @classmethod
    def of(cls, col: pa.ChunkedArray | pa.Array) -> Codes:
        """The codes of a string or dictionary column."""
        chunks = [c for c in _chunks(col) if len(c)]
        if not chunks:
            return cls(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=object))
        arr = pa.chunked_array(chunks)
        if not pa.types.is_dictionary(arr.type):
            arr = pc.dictionary_encode(arr)
        if arr.num_chunks > 1:
            arr = arr.unify_dictionaries()
        dictionary = arr.chunk(0).dictionary
        if not pa.types.is_string(dictionary.type):
            dictionary = dictionary.cast(pa.string())
        idx = np.concatenate([ints(c.indices) for c in arr.chunks])
        k = len(dictionary)
        if k <= FEW_VALUES:
            return cls(*_few_codes(dictionary.to_pylist(), idx))
        # distinct values, sorted; each dictionary entry -> its value's position
        order = np.asarray(pc.array_sort_indices(dictionary), dtype=np.int64)
        ordered = dictionary.take(pa.array(order))
        valid = bools(ordered.is_valid())
        new = np.ones(k, dtype=bool)
        if k > 1:
            new[1:] = ~bools(pc.equal(ordered[1:], ordered[:-1]))
        new &= valid
        rank = np.cumsum(new) - 1
        canon = np.full(k + 1, -1, dtype=np.int32)  # the last slot: null rows (index -1)
        canon[order] = np.where(valid, rank, -1)
        values = np.asarray(ordered.filter(pa.array(new)).to_numpy(zero_copy_only=False))
        return cls(canon[idx], values.astype(object))

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, row: int) -> str:
        c = int(self.codes[row])
        return str(self.values[c]) if c >= 0 else ""

    @property
    def arrow_values(self) -> pa.Array:
        """``values`` as an Arrow string array."""
        if self._arrow is None:
            self._arrow = pa.array(self.values.tolist(), pa.string())
        return self._arrow

    def strings(self) -> np.ndarray:
        """One ``str`` per row (nulls ``""``), as an object array; computed once."""
        if self._strings is None:
            self._strings = np.asarray(self.texts())
        return self._strings

    def texts(self) -> RowTexts:
        """The rows' strings read on demand (nulls ``""``), as :meth:`strings` gives them but
        with no per-row array kept: for readers of a few rows at a time."""
        return RowTexts(self)

    def values_at(self, rows: np.ndarray) -> list[str | None]:
        """The string of each of ``rows`` (None for a null), as the column's ``to_pylist``
        gives them: each distinct string one shared object."""
        values = self.values.tolist()
        return [values[c] if c >= 0 else None for c in self.codes[rows].tolist()]

    def rows(self, value_mask: np.ndarray, null: bool = False) -> np.ndarray:
        """A mask over ``values`` spread to the rows (nulls get ``null``)."""
        ext = np.empty(len(self.values) + 1, dtype=bool)
        ext[:-1] = value_mask
        ext[-1] = null
        return np.asarray(ext[self.codes], dtype=bool)

    def passing(self, test: Callable[[str], bool]) -> np.ndarray:
        """Rows whose string passes ``test``, evaluated once per distinct value (nulls: no)."""
        hit = np.fromiter((test(str(v)) for v in self.values), dtype=bool, count=len(self.values))
        return self.rows(hit)

    def code(self, value: str) -> int:
        """The code of ``value``, -1 when no row holds it."""
        i = int(np.searchsorted(self.values, value)) if len(self.values) else 0
        return i if i < len(self.values) and self.values[i] == value else -1

    def eq(self, value: str) -> np.ndarray:
        """Rows equal to ``value``."""
        return self.isin((value,))

    def isin(self, values: Iterable[str]) -> np.ndarray:
        """Rows whose string is one of ``values``."""
        wanted = set(values)
        hit = np.fromiter((v in wanted for v in self.values), dtype=bool, count=len(self.values))
        return self.rows(hit, null="" in wanted)

    def value_matches(self, pattern: str, ignore_case: bool = False) -> np.ndarray:
        """A mask over ``values``: those matching the regular expression (RE2 syntax)."""
        if not len(self.values):
            return np.zeros(0, dtype=bool)
        return bools(pc.match_substring_regex(self.arrow_values, pattern, ignore_case=ignore_case))

    def matches(self, pattern: str, ignore_case: bool = False) -> np.ndarray:
        """Rows matching the regular expression (matched once per distinct value)."""
        return self.rows(self.value_matches(pattern, ignore_case))

    def starts_with(self, prefix: str) -> np.ndarray:
        """Rows starting with ``prefix``."""
        if not len(self.values):
            return np.zeros(len(self.codes), dtype=bool)
        if len(self.values) <= FEW_VALUES:
            return self.passing(lambda v: v.startswith(prefix))
        return self.rows(bools(pc.starts_with(self.arrow_values, prefix)))

    def text_codes(self) -> np.ndarray:
        """Codes where a null takes the code of ``""`` when some row holds ``""``: equal codes
        then mean equal strings as :func:`strings` reads them."""
        empty = self.code("")
        if empty < 0 or not (self.codes < 0).any():
            return self.codes
        return np.where(self.codes < 0, empty, self.codes).astype(np.int32)


class RowTexts:
    """A :class:`Codes` column's strings by row, made as they are read: ``texts[row]`` is a
    ``str`` (``""`` for a null), ``texts[rows]`` an object array of them, as indexing
    :meth:`Codes.strings` gives, without its 8 bytes a row held for the index's life."""

    __slots__ = ("_codes", "_ext")

    def __init__(self, codes: Codes) -> None:
        self._codes = codes.codes
        ext = np.empty(len(codes.values) + 1, dtype=object)
        ext[:-1] = codes.values
        ext[-1] = ""
        self._ext = ext

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, key: Any) -> Any:
        got = self._ext[self._codes[key]]
        return str(got) if isinstance(got, str) else got

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out: np.ndarray = self._ext[self._codes]
        return out if dtype is None else out.astype(dtype)
