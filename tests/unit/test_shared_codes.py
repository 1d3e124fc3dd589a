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
