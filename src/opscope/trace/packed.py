"""A string column kept compressed in memory, read by row: the ``args`` text of a trace that
one analysis reads whole once and then a few rows at a time.

The ``args`` text is the largest column of the event table (about 98 bytes an event, half the
table): every event's ids make each value distinct, so it does not dictionary-encode, but its
blocks compress about 15 times with zstd.  :class:`PackedText` holds the column in blocks of
:data:`BLOCK_ROWS` rows, each block's value bytes and offsets compressed on their own, and
gives back any rows as an Arrow string array (:meth:`PackedText.take`), one row's text
(:meth:`PackedText.value`) or the whole column (:meth:`PackedText.column`), equal to the
column it was made from, nulls included.  A read decompresses only the blocks it touches; the
last few are kept, so that reads of nearby rows (a finding's evidence, the collectives of a
step) decompress each block once.  Reads may come from several threads.

:meth:`opscope.trace.model.Trace.pack_args` puts a trace's ``args`` here (a one-pass command,
``opscope report``, whose analysis runs after the index has read the column whole); at 10M
events it takes the column from about 1 GB to about 70 MB.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from opscope.trace.threads import map_in_order

#: rows a block holds: a block decompresses to about 1.6 MB of ``args`` text
BLOCK_ROWS = 1 << 14
#: blocks kept decompressed for the next read
KEEP_BLOCKS = 4
#: threads that compress the blocks at most
MAX_THREADS = 4
CODEC = "zstd"


@dataclass(frozen=True)
class _Block:
    rows: int
    data: bytes  # the values' bytes, compressed
    data_size: int
    offsets: bytes  # rows + 1 int32 offsets from 0, compressed
    valid: bytes | None  # the validity bitmap (Arrow's bit order), None when none is null
    nulls: int


class PackedText:
    """A string column (``pa.string()``) in compressed blocks of rows (module docstring)."""

    def __init__(self, column: pa.ChunkedArray | pa.Array) -> None:
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        if not all(pa.types.is_string(c.type) for c in chunks):
            raise TypeError(f"PackedText holds string columns, not {column.type}")
        self._n = len(column)
        self._per = per = BLOCK_ROWS  # rows a block holds, fixed for this column
        groups: list[list[pa.Array]] = []  # each block's slices of the chunks (no copies)
        pending: list[pa.Array] = []
        held = 0
        for chunk in chunks:
            at = 0
            while at < len(chunk):
                take = min(per - held, len(chunk) - at)
                pending.append(chunk.slice(at, take))
                held += take
                at += take
                if held == per:
                    groups.append(pending)
                    pending, held = [], 0
        if held:
            groups.append(pending)
        # the codec releases the GIL: blocks compress side by side on threads, in order
        self._blocks = map_in_order(_pack, groups, MAX_THREADS)
        self._lock = threading.Lock()
        self._kept: OrderedDict[int, pa.StringArray] = OrderedDict()

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        """The bytes the packed column holds."""
        return sum(
            len(b.data) + len(b.offsets) + (0 if b.valid is None else len(b.valid))
            for b in self._blocks
        )

    def _block(self, k: int) -> pa.StringArray:
        with self._lock:
            got = self._kept.get(k)
            if got is not None:
                self._kept.move_to_end(k)
                return got
        arr = _unpack(self._blocks[k])
        with self._lock:
            self._kept[k] = arr
            while len(self._kept) > KEEP_BLOCKS:
                self._kept.popitem(last=False)
        return arr

    def value(self, row: int) -> str | None:
        """The text of one row (None for a null)."""
        if not 0 <= row < self._n:
            raise IndexError(f"row {row} of a column of {self._n}")
        out = self._block(row // self._per)[row % self._per].as_py()
        return None if out is None else str(out)

    def take(self, rows: np.ndarray | pa.Array | list[int]) -> pa.StringArray:
        """The rows ``rows`` (any order, repeats allowed), as ``column.take(rows)`` gives
        them."""
        want = np.asarray(
            rows.to_numpy(zero_copy_only=False) if isinstance(rows, pa.Array) else rows
        )
        want = want.astype(np.int64, copy=False).ravel()
        if not len(want):
            return pa.array([], pa.string())
        if int(want.min()) < 0 or int(want.max()) >= self._n:
            raise IndexError(f"rows outside a column of {self._n}")
        order = np.argsort(want, kind="stable")
        ordered = want[order]
        block = ordered // self._per
        cuts = np.flatnonzero(np.diff(block)) + 1
        pieces = [
            self._block(int(block[a])).take(pa.array(ordered[a:b] % self._per))
            for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(ordered)], strict=True)
        ]
        joined = pa.concat_arrays(pieces)
        back = np.empty(len(order), dtype=np.int64)
        back[order] = np.arange(len(order))
        out: pa.StringArray = joined.take(pa.array(back))
        return out

    def blocks(self) -> Iterator[pa.StringArray]:
        """The column a block at a time, in row order (none kept)."""
        for b in self._blocks:
            yield _unpack(b)

    def column(self) -> pa.ChunkedArray:
        """The whole column again (one chunk per block)."""
        if not self._blocks:
            return pa.chunked_array([], pa.string())
        return pa.chunked_array([_unpack(b) for b in self._blocks], pa.string())


def _pack(parts: list[pa.Array]) -> _Block:
    """One block from the slices ``parts`` (of one or more chunks)."""
    arr = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    n = len(arr)
    _, off_buf, data_buf = arr.buffers()
    offsets = (
        np.frombuffer(off_buf, dtype=np.int32)[arr.offset : arr.offset + n + 1]
        if n
        else (np.zeros(1, dtype=np.int32))
    )
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = pa.py_buffer(b"") if data_buf is None else data_buf.slice(lo, hi - lo)
    valid = None
    if arr.null_count:
        bits = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        valid = np.packbits(bits, bitorder="little").tobytes()
    rel = (offsets - offsets[0]).astype(np.int32)
    return _Block(
        rows=n,
        data=pa.compress(data, codec=CODEC, asbytes=True),
        data_size=hi - lo,
        offsets=pa.compress(rel.tobytes(), codec=CODEC, asbytes=True),
        valid=valid,
        nulls=int(arr.null_count),
    )


def _unpack(b: _Block) -> pa.StringArray:
    data = pa.decompress(b.data, b.data_size, codec=CODEC)
    offsets = pa.decompress(b.offsets, 4 * (b.rows + 1), codec=CODEC)
    mask = None if b.valid is None else pa.py_buffer(b.valid)
    out: pa.StringArray = pa.StringArray.from_buffers(
        b.rows, offsets, data, mask, null_count=b.nulls
    )
    return out


__all__ = ["BLOCK_ROWS", "PackedText"]
