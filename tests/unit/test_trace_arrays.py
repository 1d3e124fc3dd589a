"""The shared Arrow -> NumPy conversions: dictionary codes across chunks, nulls, tests per value."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from opscope.trace import arrays


def _two_dictionaries() -> pa.ChunkedArray:
    a = pa.array(["x", "y", None, "x"]).dictionary_encode()
    b = pa.array(["z", "x", None]).dictionary_encode()
    return pa.chunked_array([a, b])


def test_codes_map_chunks_onto_one_list_of_values() -> None:
    col = _two_dictionaries()
    c, values = arrays.codes(col)
    decoded = [values[i] if i < len(values) else None for i in c.tolist()]
    assert decoded == ["x", "y", None, "x", "z", "x", None]
    assert sorted(values) == ["x", "y", "z"]


def test_codes_of_a_plain_string_column() -> None:
    c, values = arrays.codes(pa.array(["a", None, "a", "b"]))
    assert [values[i] if i < len(values) else None for i in c.tolist()] == ["a", None, "a", "b"]


def test_tests_per_value_spread_to_rows() -> None:
    col = _two_dictionaries()
    assert arrays.isin(col, ("x", "z")).tolist() == [True, False, False, True, True, True, False]
    assert arrays.equals(col, "y").tolist() == [False, True, False, False, False, False, False]
    assert arrays.matches(col, "^[yz]$").tolist() == [
        False, True, False, False, True, False, False,
    ]  # fmt: skip
    assert arrays.starts_with(col, "x").tolist() == [True, False, False, True, False, True, False]
    assert arrays.strings(col, fill="-").tolist() == ["x", "y", "-", "x", "z", "x", "-"]


def test_numbers_and_bools_with_nulls() -> None:
    assert arrays.ints(pa.array([1, None, 3]), fill=-7).tolist() == [1, -7, 3]
    assert arrays.ints(pa.chunked_array([[1], [2, None]])).tolist() == [1, 2, -1]
    assert arrays.bools(pa.array([True, None, False])).tolist() == [True, False, False]
    assert arrays.ints(pa.array([], pa.int64())).dtype == np.int64
    c, values = arrays.codes(pa.chunked_array([], pa.dictionary(pa.int32(), pa.string())))
    assert len(c) == 0 and values == []
