"""The typed decoder (msgspec structs) gives the table the dict decoder gives, and hands every
run it cannot read exactly to the dict decoder.

Each case writes a trace, parses it twice (typed first as in production; dict only, with the
typed decoder switched off) and compares every column, the skip counts, the flows, the
metadata and the names.  ``args`` are compared as decoded JSON: the typed path keeps the
trace's own text (compact), the dict path re-serialises it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opscope.trace.kineto import file as kineto_file
from opscope.trace.kineto.columns import KinetoParse
from trace_checks import (
    KINETO_LIKE,
    TypedCount,
    X,
    assert_same_parse,
    count_typed,
    parse_dict_only,
)


@pytest.fixture
def count(monkeypatch: pytest.MonkeyPatch) -> TypedCount:
    return count_typed(monkeypatch)


def both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> tuple[KinetoParse, KinetoParse]:
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    typed, _ = kineto_file.parse_file(path, workers=0)
    plain = parse_dict_only(path, monkeypatch)
    assert_same_parse(typed, plain)
    return typed, plain


def test_kineto_layout_goes_typed_and_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    typed, _ = both(tmp_path, monkeypatch, json.dumps(KINETO_LIKE, indent=1))
    assert count.typed >= 1 and count.refused == 0
    assert typed.events.num_rows == 5  # four X events and one B/E pair
    assert typed.meta["baseTimeNanoseconds"] == 1700000000000000000
    assert typed.skipped == {"untimed event (ph i)": 1, "untimed event (ph C)": 1}


def test_args_text_is_compact_and_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    text = (
        '{"traceEvents": [\n  {\n    "ph": "X", "cat": "cpu_op", "name": "caf\\u00e9",'
        ' "pid": 1, "tid": 1,\n    "ts": 1, "dur": 2,\n    "args": {\n      "External id": 3,'
        ' "x": 1.50, "s": "\\u00e9 a b"\n    }\n  }\n]}'
    )
    typed, _ = both(tmp_path, monkeypatch, text)
    assert count.typed == 1
    assert typed.events.column("name").to_pylist() == ["café"]
    compact = '{"External id":3,"x":1.50,"s":"\\u00e9 a b"}'
    assert typed.events.column("args").to_pylist() == [compact]
    assert typed.events.column("external_id").to_pylist() == [3]


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([X("a", 1, 1, args=[1, 2])], id="args not an object"),
        pytest.param([X("a", 1, 1, args={"External id": True})], id="boolean id"),
        pytest.param([X("a", 1, 1, pid=1.5)], id="float pid"),
        pytest.param([X("a", 1, 1), 7, "x"], id="not objects"),
        pytest.param([X("a", 1, 1, args={"v": float("nan")})], id="NaN"),
    ],
)
def test_what_the_typed_decoder_cannot_read_goes_to_dicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount, events: list[Any]
) -> None:
    both(tmp_path, monkeypatch, json.dumps({"traceEvents": events}))
    assert count.typed == 0


def test_lone_surrogate_goes_to_dicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    text = '{"traceEvents": [{"ph": "X", "name": "a\\ud800", "pid": 1, "ts": 1, "dur": 1}]}'
    both(tmp_path, monkeypatch, text)
    assert count.typed == 0


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([X("a", 1, 1, args={"External id": 2**70})], id="id beyond 64 bits"),
        pytest.param([X("a", "12.5", "3", args={"External id": "7"})], id="numbers as text"),
        pytest.param([X("a", True, 1), X("b", 1, 1)], id="boolean ts"),
        pytest.param([X("a", 1, -1), X("b", 2, 1)], id="negative duration"),
        pytest.param(
            [{"ph": "X", "name": "a", "dur": 1}, {"ph": "X", "name": "b", "ts": None, "dur": 1}],
            id="no ts and null ts",
        ),
        pytest.param([X("a", 1, 1, pid="Spans", tid="Traces")], id="string pid"),
        pytest.param([X("a", 1, 1, args={"correlationId": 3})], id="other spelling alone"),
        pytest.param(
            [
                X("a", 1, 1, args={"correlation": 4}),
                X("b", 2, 1, args={"correlation id": 5, "correlation": None}),
                X("c", 3, 1, args={"correlationId": 6, "correlation id": "7"}),
                X("d", 4, 1, args={"External id": 8, "external id": 9}),
                X("e", 5, 1, args={"external id": 10}),
            ],
            id="several spellings of one id",
        ),
        pytest.param([X("a", 1, 1, args={})], id="empty args"),
        pytest.param(
            [{"ph": "s", "bind_id": 4, "cat": "ac2g", "ts": 1, "pid": 1, "tid": 1}],
            id="flow with bind_id",
        ),
    ],
)
def test_unusual_values_the_typed_decoder_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount, events: list[Any]
) -> None:
    both(tmp_path, monkeypatch, json.dumps({"traceEvents": events}))
    assert count.typed >= 1 and count.refused == 0


def test_sub_nanosecond_digits_round_half_up_from_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    """The one place the two paths differ: a timestamp written with more than three decimals.
    The typed path reads the text (1.0005 us -> 1001 ns, half up, as for epoch values); the
    dict path rounds the double nearest to it (1.000499999... -> 1000 ns)."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [X("a", 1.0005, 1), X("b", 2.0004, 1)]}))
    typed, _ = kineto_file.parse_file(path, workers=0)
    plain = parse_dict_only(path, monkeypatch)
    assert count.typed == 1
    assert typed.events.column("start_ns").to_pylist() == [1001, 2000]
    assert plain.events.column("start_ns").to_pylist() == [1000, 2000]


def test_epoch_float_timestamps_keep_their_nanoseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    text = (
        '{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1,'
        ' "ts": 1712195495519695.812, "dur": 1.5}]}'
    )
    typed, _ = both(tmp_path, monkeypatch, text)
    assert typed.events.column("start_ns").to_pylist() == [1712195495519695812]
    assert count.typed >= 1


def test_big_file_through_runs_and_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    """Many runs (small blocks and chunks), a tail with keys after the array, both forms;
    in this process and in workers."""
    from opscope.trace.jsonstream import EventStream
    from opscope.trace.readers import ByteStream

    monkeypatch.setattr(kineto_file, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(EventStream.__init__, "__defaults__", (32 << 10,))
    monkeypatch.setattr(ByteStream.__init__, "__defaults__", (None, 32 << 10))
    events = [
        X(f"op{i}", i * 10, 5, args={"External id": i, "correlation": i + 1}) for i in range(3000)
    ]
    for form in ("object", "array"):
        doc: Any = {"traceEvents": events, "traceName": "x"} if form == "object" else events
        path = tmp_path / f"{form}.json"
        path.write_text(json.dumps(doc, indent=2))
        before = count.typed
        typed, _ = kineto_file.parse_file(path, workers=0)
        assert count.typed - before > 8  # the runs and the tail
        pooled, _ = kineto_file.parse_file(path, workers=2)
        plain = parse_dict_only(path, monkeypatch)
        assert_same_parse(typed, plain)
        assert_same_parse(pooled, plain)
        assert typed.events.num_rows == 3000


def test_first_spelling_present_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    events = [
        X("a", 1, 1, args={"correlation": 4}),
        X("b", 2, 1, args={"correlation id": 5, "correlation": None}),
        X("c", 3, 1, args={"correlationId": 6, "correlation id": "7"}),
        X("d", 4, 1, args={"External id": 8, "external id": 9}),
        X("e", 5, 1, args={"external id": 10}),
    ]
    typed, _ = both(tmp_path, monkeypatch, json.dumps({"traceEvents": events}))
    assert count.typed == 1
    assert typed.events.column("correlation").to_pylist() == [4, None, 7, None, None]
    assert typed.events.column("external_id").to_pylist() == [None, None, None, 8, 10]


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param('"12.5"', id="string"),
        pytest.param("null", id="null"),
        pytest.param("-1712195495519695.8125", id="negative"),
        pytest.param("1.5e3", id="exponent"),
        pytest.param("1712195495519695", id="integer"),
        pytest.param("true", id="boolean"),
    ],
)
def test_timestamps_as_text_beside_odd_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount, odd: str
) -> None:
    """A run with epoch timestamps is decoded with ``ts`` kept as text; the other timestamps
    in it convert as the dict path converts them (or are skipped for the same reason)."""
    text = (
        '{"traceEvents": ['
        '{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495519695.812, "dur": 1},'
        f'{{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": {odd}, "dur": 1}},'
        '{"ph": "X", "name": "c", "pid": 1, "tid": 1, "dur": 1},'
        '{"ph": "B", "name": "d", "pid": 1, "tid": 2, "ts": 1712195495519695.5},'
        '{"ph": "E", "pid": 1, "tid": 2, "ts": 1712195495519696.25}'
        "]}"
    )
    typed, _ = both(tmp_path, monkeypatch, text)
    names = typed.events.column("name").to_pylist()
    starts = dict(zip(names, typed.events.column("start_ns").to_pylist(), strict=True))
    assert starts["a"] == 1712195495519695812
    assert starts["d"] == 1712195495519695500
    assert "c" not in starts and typed.skipped["no ts"] == 1
    if odd != "true":  # a boolean is not a time: typed refuses the run, dicts skip the event
        assert count.typed >= 1


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "-"]),
            st.integers(min_value=0, max_value=10**16),
            st.one_of(st.none(), st.text(alphabet="0123456789", min_size=1, max_size=6)),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_decimal_text_converts_as_to_ns(items: list[tuple[str, int, str | None]]) -> None:
    """Whole-array conversion of timestamps kept as text equals :func:`to_ns` value by value
    (or declines, and the per-value path runs)."""
    import pyarrow as pa

    from opscope.trace.kineto.times import _decimal_text_ns, to_ns

    texts = [f"{s}{w}" + ("" if f is None else f".{f}") for s, w, f in items]
    got = _decimal_text_ns(pa.array(texts))
    plain = all(s == "" and w < 9 * 10**15 for s, w, _ in items)
    short = all(w < 9 * 10**15 and (f is None or len(f) <= 3) for _, w, f in items)
    if plain or short:  # the cases it is there for: it must not decline them
        assert got is not None
    if got is not None:
        assert got.tolist() == [to_ns(t) for t in texts]
