"""Row links and graph ids of 32 bits: the index's links (``parent``, ``op``, ``launch``,
``tree_parent``), its ``step`` and ``thread``, and the critical path's node ids, rows and
searches hold int32 where the sizes allow, half the memory of int64 (docs/scale.md).  The
answers are those of int64: the C search and walk take both widths, and a graph built with
64-bit ids (as a graph of 2**31 nodes or more is) gives the same section."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from opscope.analysis.critical import boundaries, longest
from opscope.analysis.critical import graph as graph_mod
from opscope.analysis.critical.longest import AVAILABLE, ids_dtype, longest_paths, paths_to
from opscope.analysis.critical.section import rank_graph, section
from opscope.trace import load
from opscope.trace.arrays import ints, row_dtype


def _dag(rng: np.random.Generator) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    n = int(rng.integers(2, 400))
    m = int(rng.integers(1, 1200))
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    ok = a != b
    src, dst = np.minimum(a, b)[ok], np.maximum(a, b)[ok]
    return n, src, dst, rng.integers(0, 3, len(src)) * 1000  # few values: ties


def test_the_width_of_ids_follows_the_sizes() -> None:
    assert ids_dtype(10, 10) is np.int32
    assert ids_dtype(2**31 - 2, 5) is np.int32
    assert ids_dtype(2**31 - 1, 5) is np.int64
    assert ids_dtype(5, 2**31) is np.int64
    assert row_dtype(0) is np.int32 and row_dtype(2**31 - 2) is np.int32
    assert row_dtype(2**31) is np.int64


@pytest.mark.parametrize("native", [True, False])
def test_32_bit_ids_search_as_64_bit_ones(native: bool) -> None:
    """The same dist and pred (and walked paths) from int32 and int64 ids, with keep and
    factor; pred is int32 when the ids are."""
    rng = np.random.default_rng(3)
    for _ in range(25):
        n, src, dst, w = _dag(rng)
        keep = rng.random(len(src)) < 0.7
        f = rng.choice(np.array([1, 1023, 1024], dtype=np.int16), len(src))
        for k, fac in ((None, None), (keep, None), (keep, f), (None, f)):
            d64, p64 = longest_paths(src, dst, w, n, keep=k, factor=fac, native=native)
            s32, t32 = src.astype(np.int32), dst.astype(np.int32)
            d32, p32 = longest_paths(s32, t32, w, n, keep=k, factor=fac, native=native)
            assert p64.dtype == np.int64 and p32.dtype == np.int32
            assert np.array_equal(d64, d32) and np.array_equal(p64, p32)
            ends = np.flatnonzero(d64 == d64.max())[:3]
            walked64 = paths_to(ends, p64, src)
            walked32 = paths_to(ends, p32, s32)
            assert [e.tolist() for e in walked64] == [e.tolist() for e in walked32]
            assert all(e.dtype == np.int32 for e in walked32)
            one = paths_to(ends[:1], p32, s32, into=d32.copy())[0]
            assert one.dtype == np.int32 and one.tolist() == walked64[0].tolist()


def test_mixed_widths_are_searched_as_64_bits() -> None:
    """src int32 beside dst int64 (a caller's own arrays): both taken as int64."""
    src, dst, w = np.array([0, 1], np.int32), np.array([1, 2]), np.array([3, 4])
    dist, pred = longest_paths(src, dst, w, 3)
    assert pred.dtype == np.int64 and dist.tolist() == [0, 3, 7]


@pytest.mark.skipif(not AVAILABLE, reason="the C extension is not built")
def test_the_c_search_refuses_buffers_of_mixed_widths() -> None:
    from opscope.analysis.critical import _longest

    src, dst = np.array([0, 1], np.int32), np.array([1, 2], np.int32)
    w, dist = np.array([3, 4], np.int64), np.empty(3, np.int64)
    with pytest.raises(ValueError, match="widths"):
        _longest.longest(src, dst, w, dist, np.empty(3, np.int64))  # pred of 64 bits
    with pytest.raises(ValueError, match="out of range"):
        _longest.longest(src, np.array([1, 7], np.int32), w, dist, np.empty(3, np.int32))


def test_ints_reads_a_column_in_the_type_asked() -> None:
    col = pa.chunked_array([pa.array([1, None, 3], pa.int32()), pa.array([4], pa.int32())])
    got = ints(col, dtype=np.int32)
    assert got.dtype == np.int32 and got.tolist() == [1, -1, 3, 4]
    assert ints(col).dtype == np.int64


def test_the_index_holds_narrow_links(shared: Callable[[str], Path]) -> None:
    trace = load(shared("cuda/a100_nccl_rank0_of2.json.gz"), cache=False)
    idx = trace.index
    for name in ("parent", "op", "launch", "tree_parent"):
        assert getattr(idx, name).dtype == np.int32, name
    assert idx.step.dtype == np.int32 and idx.thread.dtype == np.int32
    # the same rows as the 64-bit lookup of the ids
    wide = idx.rows_of(trace.events.column("op_id"))
    assert wide.dtype == np.int64 and np.array_equal(wide, idx.op)
    g = rank_graph(trace, None, [])
    assert g.src.dtype == g.dst.dtype == np.int32
    assert g.row.dtype == g.edge_row.dtype == np.int32


def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every graph built as one of 2**31 nodes or more is: 64-bit ids throughout."""

    def wide(n_nodes: int, n_edges: int) -> Any:
        return np.int64

    for mod in (graph_mod, boundaries, longest):
        monkeypatch.setattr(mod, "ids_dtype", wide)


@pytest.mark.parametrize(
    "relative", ["cuda/a100_nccl_rank0_of2.json.gz", "cuda/a100_cudagraph_rank0_of16.json.gz"]
)
def test_a_graph_of_64_bit_ids_gives_the_same_section(
    relative: str, shared: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    narrow_trace = load(shared(relative), cache=False)
    g32 = rank_graph(narrow_trace, None, [])
    narrow = section(narrow_trace, g32)
    _wide(monkeypatch)
    wide_trace = load(shared(relative), cache=False)
    g64 = rank_graph(wide_trace, None, [])
    assert g32.src.dtype == np.int32 and g64.src.dtype == np.int64
    assert np.array_equal(g32.src, g64.src) and np.array_equal(g32.dst, g64.dst)
    wide = section(wide_trace, g64)
    assert list(narrow["segments"]) == list(wide["segments"])
    assert {k: v for k, v in narrow.items() if k != "segments"} == {
        k: v for k, v in wide.items() if k != "segments"
    }


def test_the_links_are_read_as_narrow_rows(shared: Callable[[str], Path]) -> None:
    """The read's links (parent, op, launch: rows; step: numbers) are int32 below 2**31
    rows, and the event table's id columns made of them are the int64 ids as before."""
    from opscope.trace.kineto import file as kineto_file
    from opscope.trace.link import link

    parsed, _w = kineto_file.parse_file(shared("cuda/a100_nccl_rank0_of2.json.gz"))
    links = link(parsed.events, parsed.flows)
    for name in ("parent", "op", "launch", "step"):
        assert getattr(links, name).dtype == np.int32, name
    trace = load(shared("cuda/a100_nccl_rank0_of2.json.gz"), cache=False)
    for column, rows in (("parent_id", links.parent), ("op_id", links.op)):
        col = trace.events.column(column)
        assert col.type == pa.int64()
        assert ints(col).tolist() == rows.astype(np.int64).tolist()


def test_sparse_evidence_reads_as_dense(shared: Callable[[str], Path]) -> None:
    """A path's pieces keep the evidence of their untraced pieces only (``gap_at``), and
    their durations in 32 bits where they fit; every slice and every pick of positions reads
    as the dense columns would."""
    from opscope.analysis.critical.path import Pieces, pieces
    from opscope.analysis.critical.section import window_path

    trace = load(shared("cuda/a100_cudagraph_rank0_of16.json.gz"), cache=False)
    g = rank_graph(trace, None, [])
    p = pieces(g, window_path(trace, g))
    assert p.gap_at is not None and 0 < len(p.gap_at) < len(p)
    assert p.dur_ns.dtype == np.int32
    before, after = p._sides()
    dense = Pieces(p.rank, p.label, p.row, p.start_ns, p.dur_ns.astype(np.int64), before, after)
    idx = trace.index
    for lo, hi in ((0, len(p)), (3, 40), (int(p.gap_at[0]), int(p.gap_at[0]) + 1), (5, 5)):
        a, b = p.slice(lo, hi), dense.slice(lo, hi)
        assert a.dicts(idx) == b.dicts(idx)
        assert [x.tolist() for x in a.evidence(idx)[:3]] == [
            x.tolist() for x in b.evidence(idx)[:3]
        ]
    at = np.asarray([int(p.gap_at[-1]), 0, int(p.gap_at[0])])
    assert p.take(at).dicts(idx) == dense.take(at).dicts(idx)


def test_ranges_as_an_array_fix_as_tuples_do() -> None:
    """A fix's ranges given as an (n, 2) array (a rule's many gaps, 16 bytes each) scale
    what the same pairs as tuples scale, in any order."""
    from opscope.analysis.critical.fixes import _scale_ranges
    from opscope.analysis.critical.model import Graph

    rng = np.random.default_rng(1)
    n = 200
    t = np.sort(rng.integers(0, 10**6, n))
    src = np.arange(n - 1)
    g = Graph(
        time=t,
        row=np.arange(n),
        role=np.zeros(n, np.int8),
        src=src,
        dst=src + 1,
        weight=np.diff(t),
        label=np.zeros(n - 1, np.int8),
        edge_row=src,
        kind=np.zeros(n - 1, np.int8),
    )
    starts = rng.integers(0, 10**6, 30)
    pairs = [
        (int(s), int(s) + int(d)) for s, d in zip(starts, rng.integers(1, 5000, 30), strict=True)
    ]
    w = g.weight.astype(np.float64)
    by_tuples = _scale_ranges(g, w.copy(), tuple(pairs), 0.25, [0])
    by_array = _scale_ranges(g, w.copy(), np.asarray(pairs[::-1]), 0.25, [0])
    assert np.array_equal(by_tuples, by_array)
    assert not np.array_equal(by_tuples, w)
