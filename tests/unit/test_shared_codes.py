"""The event table's string columns made of the index's codes (``Trace.share_codes``): one
copy of each column's indices where there were two, every row's string the same; and the
findings' rows read as strings on demand (``Codes.texts``), as the cached object arrays gave
them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from opscope.trace import load
from opscope.trace.arrays import Codes
from opscope.trace.index import SHARED_CODES

TRACES = (
    "cuda/a100_nccl_rank0_of2.json.gz",
    "rocm/mi250_minitoy_train.json.gz",
    "mtia/mtia_inference_rank0.json.gz",
)


@pytest.mark.parametrize("rel", TRACES)
def test_the_shared_columns_read_the_same_strings(shared: Callable[[str], Path], rel: str) -> None:
    path = shared(rel)
    plain, compact = load(path, cache=False), load(path, cache=False)
    compact.pack_args()
    compact.share_codes()
    assert compact.index.events is compact.events
    for column in (*SHARED_CODES, "lane"):
        want = plain.events.column(column).cast(pa.string()).combine_chunks()
        got = compact.events.column(column)
        assert got.type == plain.events.column(column).type
        assert got.cast(pa.string()).combine_chunks().equals(want), column
        assert got.null_count == plain.events.column(column).null_count
    for column in SHARED_CODES:  # the table's indices are the index's codes, not a copy
        codes: Codes = getattr(compact.index, column)
        (chunk,) = compact.events.column(column).chunks
        assert chunk.indices.buffers()[1].address == codes.codes.ctypes.data, column
    # a column the index had not read stays as it was
    assert compact.events.column("lane").num_chunks == plain.events.column("lane").num_chunks
    q = "SELECT name, count(*) AS n FROM events GROUP BY name ORDER BY n DESC, name LIMIT 20"
    assert compact.sql(q).to_pylist() == plain.sql(q).to_pylist()
    assert compact.column("name") == plain.column("name")


def test_nulls_and_an_all_null_column_are_shared() -> None:
    from opscope.trace.index import EventIndex

    n = 6
    name = pa.chunked_array(
        [
            pa.array(["b", None, "a"]).dictionary_encode(),
            pa.array([None, "c", "b"]).dictionary_encode(),
        ]
    )
    empty = pa.chunked_array([pa.array([None] * n, pa.string()).dictionary_encode()])
    events = pa.table({"id": pa.array(range(n), pa.int64()), "name": name, "cat": empty})
    idx = EventIndex(events)
    assert idx.name.strings().tolist() == ["b", "", "a", "", "c", "b"]
    _ = idx.cat, idx.name
    shared = idx.share_codes()
    assert shared.column("name").to_pylist() == ["b", None, "a", None, "c", "b"]
    assert shared.column("cat").to_pylist() == [None] * n
    assert idx.events is shared


def test_row_texts_read_as_the_cached_strings() -> None:
    col = pa.chunked_array([pa.array(["x", None, "y", "", "x"]).dictionary_encode()])
    codes = Codes.of(col)
    texts, whole = codes.texts(), codes.strings()
    assert len(texts) == len(whole) == 5
    for r in range(5):
        assert texts[r] == whole[r] and type(texts[r]) is str
        assert texts[np.int64(r)] == whole[r]
    rows = np.array([4, 1, 0, 3])
    assert texts[rows].tolist() == whole[rows].tolist()
    assert texts[rows].dtype == object
    assert (texts[rows] == "x").tolist() == [True, False, True, False]
    assert np.asarray(texts).tolist() == whole.tolist()
    assert texts[1:3].tolist() == ["", "y"]


@pytest.mark.parametrize("rel", TRACES)
def test_a_compact_trace_gives_its_links_back(shared: Callable[[str], Path], rel: str) -> None:
    path = shared(rel)
    plain, compact = load(path, cache=False), load(path, cache=False)
    compact.compact()
    links = ("parent_id", "op_id", "launch_id")
    assert compact.index.held_links() == links
    for column in links:
        assert column not in compact.events.column_names
        want = plain.events.column(column).combine_chunks()
        assert compact.index.link_ids(column).combine_chunks().equals(want), column
        rows = np.arange(0, plain.index.n, 5)
        assert (
            compact.index.link_ids(column, rows).combine_chunks().equals(want.take(pa.array(rows)))
        )
        assert compact.column(column) == plain.column(column)
    _same_rows(compact.events_with_args(), plain.events)
    _same_rows(compact.kernels, plain.kernels)
    _same_rows(compact.ops, plain.ops)
    q = "SELECT count(*) AS n, sum(op_id) AS o, sum(launch_id) AS l FROM events"
    assert compact.sql(q).to_pylist() == plain.sql(q).to_pylist()


def test_a_link_to_no_row_stays_in_the_table() -> None:
    from opscope.trace.index import EventIndex

    events = pa.table(
        {
            "id": pa.array([10, 11, 12], pa.int64()),
            "parent_id": pa.array([None, 10, 99], pa.int64()),  # 99: no such event
            "op_id": pa.array([10, None, 11], pa.int64()),
        }
    )
    idx = EventIndex(events)
    kept = idx.hold_links()
    assert idx.held_links() == ("op_id",)
    assert kept.column_names == ["id", "parent_id"]
    assert idx.link_ids("op_id").to_pylist() == [10, None, 11]
    assert idx.link_ids("parent_id").to_pylist() == [None, 10, 99]
    assert idx.link_ids("op_id", np.array([2, 1])).to_pylist() == [11, None]


def _same_rows(got: pa.Table, want: pa.Table) -> None:
    """The same columns holding the same values row by row (dictionaries read as strings)."""
    assert got.column_names == want.column_names
    for column in got.column_names:
        a, b = got.column(column), want.column(column)
        assert a.type == b.type, column
        if pa.types.is_dictionary(a.type):
            a, b = a.cast(pa.string()), b.cast(pa.string())
        assert a.combine_chunks().equals(b.combine_chunks()), column


def test_a_compact_analysis_reads_the_args_once_and_lets_them_go(
    shared: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the trace compact (``analyze(pack_args=True)``) what was read off the ``args``
    text goes once the tables and rules are done, and nothing after reads it again; the
    report is the plain one."""
    import orjson

    from opscope.analysis.pipeline import analyze
    from opscope.trace import index as index_mod

    path = shared("cuda/a100_cudagraph_rank0_of16.json.gz")
    plain = orjson.dumps(analyze(load(path, cache=False)).to_dict())
    reads: list[int] = []
    real = index_mod.arg_values

    def counted(*a: object, **k: object) -> object:
        reads.append(1)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(index_mod, "arg_values", counted)
    trace = load(path, cache=False)
    compact = orjson.dumps(analyze(trace, pack_args=True).to_dict())
    assert len(reads) == 1
    assert not {"arg_values", "shapes", "layouts"} & set(vars(trace.index))
    assert compact == plain
    _ = trace.index.shapes  # made again from the packed text when asked
    assert len(reads) == 2
