"""The NumPy group-by of the op, kernel and roofline tables: the groups and values Arrow's
``group_by`` gives, in the order of each group's first row, exact integer sums, and an op
table listing equal-time shapes of one op in the order the trace first ran them."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from opscope.analysis.optable import op_table
from opscope.trace import load_document
from opscope.trace.groupby import grouped

AGGS = [("v", "count"), ("v", "sum"), ("w", "sum"), ("v", "min"), ("v", "max"), ("w", "count")]


def _table(rng: random.Random, n: int) -> pa.Table:
    pool = ["a", "b", "c", "dd", "", "é", None][: rng.randint(1, 7)]
    t = pa.table(
        {
            "name": pa.array([rng.choice(pool) for _ in range(n)], pa.string()),
            "dims": pa.array([rng.choice(["[1]", "[2, 3]", None, "[]"]) for _ in range(n)]),
            "code": pa.array([rng.choice([-1, 0, 3, 7, None]) for _ in range(n)], pa.int64()),
            "v": pa.array([rng.choice([None, 0, 1, 5, 2**40, -3]) for _ in range(n)], pa.int64()),
            "w": pa.array([rng.randint(0, 10**12) for _ in range(n)], pa.int64()),
        }
    )
    r = rng.random()
    if r < 0.4:
        t = t.set_column(0, "name", t.column("name").dictionary_encode())
    elif r < 0.6:
        t = t.set_column(0, "name", t.column("name").cast(pa.large_string()))
    return t


def _as_text(t: pa.Table, keys: list[str]) -> pa.Table:
    for k in keys:
        col = t.column(k)
        if pa.types.is_dictionary(col.type):
            t = t.set_column(t.schema.get_field_index(k), k, col.cast(pa.string()))
    return t


@pytest.mark.parametrize("seed", range(6))
def test_same_groups_and_values_as_arrow_in_first_appearance_order(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        t = _table(rng, rng.choice([1, 2, 7, 60, 900]))
        keys = rng.choice([["name"], ["name", "dims"], ["name", "dims", "code"], ["code"]])
        got = grouped(t, keys, AGGS)
        text = _as_text(t, keys)
        want = text.group_by(keys, use_threads=False).aggregate(AGGS).to_pylist()

        def key(r: dict[str, Any], keys: list[str] = keys) -> tuple[Any, ...]:
            return tuple((r[k] is None, r[k]) for k in keys)

        assert sorted(got, key=key) == sorted(want, key=key)
        rows = list(zip(*(text.column(k).to_pylist() for k in keys), strict=True))
        assert [tuple(r[k] for k in keys) for r in got] == list(dict.fromkeys(rows))


def test_a_dictionary_of_numbers_keeps_its_numbers() -> None:
    k = pa.array([3, 1, 3, None, 1]).dictionary_encode()
    t = pa.table({"k": k, "v": pa.array([1, 2, 3, 4, 5])})
    assert grouped(t, ["k"], [("v", "sum")]) == [
        {"k": 3, "v_sum": 4},
        {"k": 1, "v_sum": 7},
        {"k": None, "v_sum": 4},
    ]
    t = pa.table({"g": ["a", "a", "b", "a", "b"], "k": k})
    assert grouped(t, ["g"], [("k", "distinct")]) == [
        {"g": "a", "k_distinct": [3, 1, None]},
        {"g": "b", "k_distinct": [3, 1]},
    ]


def test_integer_sums_are_exact_past_a_double() -> None:
    big = 2**62 // 4 + 1  # four of them do not fit a double's mantissa
    t = pa.table({"k": ["x"] * 4 + ["y"], "v": [big] * 4 + [None]})
    got = grouped(t, ["k"], [("v", "sum"), ("v", "count"), ("v", "min")])
    assert got == [
        {"k": "x", "v_sum": 4 * big, "v_count": 4, "v_min": big},
        {"k": "y", "v_sum": None, "v_count": 0, "v_min": None},
    ]


def test_distinct_lists_each_groups_values_once() -> None:
    t = pa.table({"k": ["a", "b", "a", "a"], "op": ["x", None, "y", "x"]})
    assert grouped(t, ["k"], [("op", "distinct")]) == [
        {"k": "a", "op_distinct": ["x", "y"]},
        {"k": "b", "op_distinct": [None]},
    ]


@pytest.mark.parametrize("seed", range(4))
def test_distinct_values_per_group_in_first_appearance_order(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(30):
        t = _table(rng, rng.choice([1, 5, 80, 700]))
        t = t.append_column("f", pa.array([rng.choice([0.5, None, 2.0]) for _ in range(len(t))]))
        keys = rng.choice([["name"], ["name", "dims"], ["code"]])
        got = grouped(t, keys, [("dims", "distinct"), ("code", "distinct"), ("f", "distinct")])
        text = _as_text(t, keys)
        rows = text.to_pylist()
        for g in got:
            mine = [r for r in rows if all(r[k] == g[k] for k in keys)]
            for col in ("dims", "code", "f"):
                assert g[f"{col}_distinct"] == list(dict.fromkeys(r[col] for r in mine))


def test_bad_aggregates_are_refused() -> None:
    t = pa.table({"k": ["a"], "f": [1.5]})
    with pytest.raises(ValueError, match="one of count"):
        grouped(t, ["k"], [("f", "mean")])
    with pytest.raises(TypeError, match="integers or booleans"):
        grouped(t, ["k"], [("f", "sum")])
    assert grouped(t.slice(0, 0), ["k"], [("f", "count")]) == []


def _cpu_trace(shapes: list[list[list[int]]]) -> dict[str, Any]:
    """One ``aten::add`` per shape, each 5 µs on the host."""
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::add",
            "pid": 1,
            "tid": 1,
            "ts": 1000.0 + 10 * i,
            "dur": 5.0,
            "args": {"Input Dims": dims, "Input type": ["float" for _ in dims]},
        }
        for i, dims in enumerate(shapes)
    ]
    return {"traceEvents": events}


def test_equal_time_shapes_come_in_the_order_the_trace_ran_them() -> None:
    # 40 shapes and more: Arrow's hash grouper gave them in another order
    shapes = [[[7, 3]], [[1]], [[2, 2]], [[1]], *([[k, 9]] for k in range(60))]
    for order in (shapes, shapes[::-1]):
        table = op_table(load_document(_cpu_trace(order)))
        got = [r.input_dims for r in table.by_shape]
        # [1] ran twice: more CPU time, so first; the rest tie and keep their first run's order
        assert got[0] == "[[1]]"
        firsts = list(dict.fromkeys(str(d).replace(" ", "") for d in order))
        assert got[1:] == [d for d in firsts if d != "[[1]]"]
