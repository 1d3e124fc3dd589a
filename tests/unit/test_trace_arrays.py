"""The shared Arrow -> NumPy conversions: codes across chunks with different dictionaries,
nulls, tests evaluated once per distinct value."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from opscope.trace.arrays import Codes, bools, ints


def _two_dictionaries() -> pa.ChunkedArray:
    a = pa.array(["x", "y", None, "x"]).dictionary_encode()
    b = pa.array(["z", "x", None]).dictionary_encode()
    return pa.chunked_array([a, b])


def test_codes_map_chunks_onto_one_sorted_list() -> None:
    c = Codes.of(_two_dictionaries())
    assert c.values.tolist() == ["x", "y", "z"]
    assert [c[i] for i in range(len(c))] == ["x", "y", "", "x", "z", "x", ""]
    assert c.codes.tolist() == [0, 1, -1, 0, 2, 0, -1]


def test_tests_per_value_spread_to_rows() -> None:
    c = Codes.of(_two_dictionaries())
    assert c.isin(("x", "z")).tolist() == [True, False, False, True, True, True, False]
    assert c.eq("y").tolist() == [False, True, False, False, False, False, False]
    assert c.matches("^[yz]$").tolist() == [False, True, False, False, True, False, False]
    assert c.starts_with("x").tolist() == [True, False, False, True, False, True, False]
    assert c.code("z") == 2 and c.code("nope") == -1


def test_numbers_and_bools_with_nulls() -> None:
    assert ints(pa.array([1, None, 3]), fill=-7).tolist() == [1, -7, 3]
    assert ints(pa.chunked_array([[1], [2, None]])).tolist() == [1, 2, -1]
    assert bools(pa.array([True, None, False])).tolist() == [True, False, False]
    assert ints(pa.array([], pa.int64())).dtype == np.int64


def test_unique_inverse_equals_numpys() -> None:
    from opscope.trace.arrays import unique_inverse

    rng = np.random.default_rng(0)
    for keys in (
        rng.integers(0, 50, 1000),  # small range: the table
        rng.integers(0, 10**12, 1000),  # wide range: NumPy's sort
        np.array([7], dtype=np.int64),
        np.zeros(0, dtype=np.int64),
    ):
        uniq, inverse = unique_inverse(keys)
        want_u, want_i = np.unique(keys, return_inverse=True)
        assert uniq.tolist() == want_u.tolist()
        assert inverse.tolist() == want_i.reshape(-1).tolist()
