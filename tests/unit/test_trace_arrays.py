"""The shared Arrow -> NumPy conversions: codes across chunks with different dictionaries,
nulls, tests evaluated once per distinct value."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from opscope.trace.arrays import Codes, bools, ints, unique_ints


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


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.uint64])
@pytest.mark.parametrize("n", [0, 1, 7, 5000])
@pytest.mark.parametrize("spread", [1, 3, 1000, 10**9])
def test_unique_ints_is_numpys_unique(dtype: type, n: int, spread: int) -> None:
    """Both ways (a table over a small range, a sort over a wide one): NumPy's values and
    dtype, negative values and the ends of each dtype's range included."""
    info = np.iinfo(dtype)
    lo = max(info.min, -spread)
    hi = min(info.max, spread)
    a = np.random.default_rng(n + spread).integers(lo, hi, n, endpoint=True, dtype=dtype)
    if n > 2 and spread == 10**9:
        a[:2] = (info.min, info.max)  # the dtype's extremes: the widest range it can hold
    got, want = unique_ints(a), np.unique(a)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


def test_unique_ints_of_other_dtypes_is_numpys() -> None:
    a = np.array([2.5, -1.0, 2.5, np.nan])
    assert np.array_equal(unique_ints(a), np.unique(a), equal_nan=True)
