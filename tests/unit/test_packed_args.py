"""The ``args`` text kept packed (``opscope.trace.packed``, ``Trace.pack_args``): every read
gives what the column gave, nulls and empty texts included, across chunk and block bounds;
the event table then has no ``args`` column, so a reader that bypasses the index fails
loudly rather than reading nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from opscope.trace import load
from opscope.trace import packed as packed_mod
from opscope.trace.packed import PackedText


def _column(n: int, chunk_sizes: list[int]) -> pa.ChunkedArray:
    def text(i: int) -> str | None:
        if i % 7 == 3:
            return None
        return "" if i % 11 == 0 else f'{{"External id":{i},"x":"{"é" * (i % 4)}"}}'

    values = [text(i) for i in range(n)]
    chunks, at = [], 0
    for size in chunk_sizes:
        chunks.append(pa.array(values[at : at + size], pa.string()))
        at += size
    chunks.append(pa.array(values[at:], pa.string()))
    return pa.chunked_array(chunks, pa.string())


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(packed_mod, "BLOCK_ROWS", 64)
    monkeypatch.setattr(packed_mod, "KEEP_BLOCKS", 2)
    return 64


def test_every_read_is_the_column_s(small_blocks: int) -> None:
    col = _column(1000, [100, 1, 0, 250])  # chunks that start and end inside blocks
    whole = col.combine_chunks()
    p = PackedText(col)
    assert len(p) == 1000
    assert p.column().combine_chunks().equals(whole)
    sizes = [len(c) for c in p.blocks()]  # blocks of 64 rows in row order, whatever the chunks
    assert sizes == [small_blocks] * 15 + [1000 - 15 * small_blocks]
    assert pa.chunked_array(list(p.blocks())).combine_chunks().equals(whole)
    rng = np.random.default_rng(7)
    for rows in (
        rng.integers(0, 1000, 3000),  # repeats, any order, many blocks
        np.array([999, 0, 64, 63, 64]),
        np.arange(1000)[::-1],
    ):
        assert p.take(rows).equals(whole.take(pa.array(rows)))
        assert p.take(pa.array(rows)).equals(whole.take(pa.array(rows)))
    for r in (0, 3, 11, 63, 64, 100, 101, 351, 999):
        assert p.value(r) == whole[r].as_py(), r
    assert p.take(np.zeros(0, dtype=np.int64)).equals(pa.array([], pa.string()))
    assert p.nbytes < whole.nbytes


def test_bad_reads_are_refused(small_blocks: int) -> None:
    p = PackedText(_column(100, []))
    with pytest.raises(IndexError):
        p.value(100)
    with pytest.raises(IndexError):
        p.value(-1)
    with pytest.raises(IndexError):
        p.take(np.array([5, 100]))
    with pytest.raises(TypeError):
        PackedText(pa.chunked_array([pa.array([1, 2])]))


def test_an_empty_column() -> None:
    p = PackedText(pa.chunked_array([], pa.string()))
    assert len(p) == 0 and p.column().to_pylist() == [] and list(p.blocks()) == []


def test_reads_from_threads_agree(small_blocks: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    col = _column(5000, [1234])
    whole = col.combine_chunks()
    p = PackedText(col)
    rows = np.random.default_rng(1).integers(0, 5000, (8, 400))
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda r: [p.value(int(x)) for x in r], rows))
    for r, g in zip(rows, got, strict=True):
        assert g == whole.take(pa.array(r)).to_pylist()


def test_a_packed_trace_reads_args_only_through_its_index(
    shared: Callable[[str], Path],
) -> None:
    path = shared("cuda/a100_nccl_rank0_of2.json.gz")
    plain, packed = load(path, cache=False), load(path, cache=False)
    want = plain.events.column("args").combine_chunks()
    shapes = plain.index.shapes
    packed.pack_args()
    assert packed.args_packed and not plain.args_packed
    assert "args" not in packed.events.column_names
    assert packed.index.events is packed.events  # the index let the full table go
    with pytest.raises(KeyError):
        packed.events.column("args")
    idx = packed.index
    rows = np.flatnonzero(idx.is_framework)[::7]
    assert idx.args_take(rows).equals(want.take(pa.array(rows)))
    assert [idx.args_text(int(r)) for r in rows[:50]] == want.take(pa.array(rows[:50])).to_pylist()
    assert idx.shapes.dims == shapes.dims and np.array_equal(idx.shapes.code, shapes.code)
    assert pa.chunked_array(list(idx.args_chunks())).combine_chunks().equals(want)
    assert packed.events_with_args().equals(plain.events)
    assert packed.column("args") == want.to_pylist()
    # SQL sees the whole table, args included
    q = "SELECT count(*) AS n, sum(length(args)) AS b FROM events WHERE args IS NOT NULL"
    assert packed.sql(q).to_pylist() == plain.sql(q).to_pylist()
    packed.pack_args()  # twice: nothing more happens
    assert packed.args_packed
