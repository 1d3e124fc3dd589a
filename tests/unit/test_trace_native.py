"""The C scanner (``opscope.trace._scan``) gives the table the typed and the dict decoders
give, hands every run it does not read to them, and survives any bytes.

Each case writes a trace and parses it three ways in this process: as in production (the
scanner first), with the scanner off (the typed decoder, dicts where it refuses) and dicts
only.  The scanner and the typed decoder both keep ``args`` as the trace's own compact text,
so that column must match byte for byte; against dicts ``args`` are compared decoded.
"""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opscope.trace import native
from opscope.trace.kineto import file as kineto_file
from opscope.trace.kineto.columns import KinetoParse
from trace_checks import (
    KINETO_LIKE,
    TypedCount,
    X,
    assert_same_parse,
    count_native,
    parse_dict_only,
    parse_typed_only,
)

needs_scanner = pytest.mark.skipif(
    not native.AVAILABLE, reason="the C scanner is not built (no C compiler at install)"
)


def test_scanner_is_built_where_a_compiler_is() -> None:
    """The build is optional (the install goes on without a compiler); where one is present a
    missing scanner means the build broke, which must not pass unnoticed."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) on this machine: the msgspec decoder serves")
    assert native.AVAILABLE


def test_environment_switches_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_NATIVE", "0")
    assert not native.enabled()
    monkeypatch.setenv("OPSCOPE_NATIVE", "1")
    assert native.enabled() == native.AVAILABLE


@pytest.fixture
def count(monkeypatch: pytest.MonkeyPatch) -> TypedCount:
    if not native.AVAILABLE:
        pytest.skip("the C scanner is not built (no C compiler at install)")
    return count_native(monkeypatch)


def three_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> KinetoParse:
    scanned, _ = kineto_file.parse_file(path, workers=0)
    assert_same_parse(scanned, parse_typed_only(path, monkeypatch), same_args_text=True)
    assert_same_parse(scanned, parse_dict_only(path, monkeypatch))
    return scanned


def parse_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> KinetoParse:
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    return three_ways(path, monkeypatch)


# the shared document with one event of a phase no reader knows
KINETO_ODD = {
    **KINETO_LIKE,
    "traceEvents": [*KINETO_LIKE["traceEvents"], {"ph": "Q", "name": "odd", "pid": 1, "ts": 3}],
}


def test_kineto_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount) -> None:
    parsed = parse_text(tmp_path, monkeypatch, json.dumps(KINETO_ODD, indent=2))
    assert count.typed >= 1 and count.refused == 0
    assert parsed.events.num_rows == 5  # four X events and one B/E pair
    assert parsed.skipped == {
        "untimed event (ph i)": 1,
        "untimed event (ph C)": 1,
        "unknown phase": 1,
    }
    assert parsed.process_names == {"1": "python"}
    assert parsed.flows.num_rows == 2


def test_values_read_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    text = (
        '{"traceEvents": [\n'
        '{"ph": "X", "name": "caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\\\", "cat": null,'
        ' "pid": "Spans", "tid": -3, "ts": 1712195495519695.8125, "dur": 1.0005,'
        ' "args": {"External id": 3.0, "correlation": "  0042 ", "x": [1, {"y": " a  b "}]}},\n'
        '{"ph": "X", "name": "b", "pid": 18446744073709551615, "tid": 1, "ts": "12.5",'
        ' "dur": 3, "args": {"External\\u0020id": 4, "correlation": 1e3}},\n'
        '{"ph": "X", "name": "c", "ts": -1.5, "dur": 2, "args": {"correlationId": 6,'
        ' "correlation id": null}},\n'
        '{"ph": "X", "name": "d", "ts": 1, "dur": 2, "name": "d2", "args": {"a": 1},'
        ' "args": {}},\n'
        '{"ph": "s", "cat": "ac2g", "id": " 007 ", "pid": 1, "tid": 1, "ts": 2},\n'
        '{"ph": "f", "cat": "ac2g", "id": "--5", "pid": 1, "tid": 1, "ts": 3},\n'
        '{"ph": "f", "cat": "ac2g", "id": null, "bind_id": 8, "pid": 1, "tid": 1, "ts": 4}\n'
        "]}"
    )
    parsed = parse_text(tmp_path, monkeypatch, text)
    assert count.typed == 1 and count.refused == 0
    ev = parsed.events
    assert ev.column("name").to_pylist() == ['café 😀 "q" \\', "b", "c", "d2"]
    assert ev.column("cat").to_pylist() == ["", "", "", ""]
    assert ev.column("pid").to_pylist() == ["Spans", "18446744073709551615", "", ""]
    assert ev.column("tid").to_pylist() == ["-3", "1", "", ""]
    assert ev.column("start_ns").to_pylist() == [1712195495519695813, 12500, -1500, 1000]
    assert ev.column("dur_ns").to_pylist() == [1000, 3000, 2000, 2000]  # 1.0005 as a double
    assert ev.column("external_id").to_pylist() == [3, 4, None, None]
    assert ev.column("correlation").to_pylist() == [42, 1000, None, None]
    assert ev.column("args").to_pylist()[0] == (
        '{"External id":3.0,"correlation":"  0042 ","x":[1,{"y":" a  b "}]}'
    )
    assert ev.column("args").to_pylist()[3] is None  # the last "args" wins: empty
    assert parsed.flows.column("id").to_pylist() == [7, 8]
    assert parsed.skipped == {"flow without id or ts": 1}


def test_ids_the_typed_decoder_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount
) -> None:
    """A boolean or an integer beyond 64 bits under an id key: the scanner reads them as the
    dict decoder does (present, not an id), where the typed decoder hands the run to dicts."""
    path = tmp_path / "t.json"
    events = [
        X("a", 1, 1, args={"correlation": True, "correlation id": 7}),
        X("b", 2, 1, args={"external_id": 99999999999999999999, "External id": {"x": 1}}),
        X("c", 3, 1, args={"external_id": 5}),
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    scanned, _ = kineto_file.parse_file(path, workers=0)
    assert count.typed == 1
    assert_same_parse(scanned, parse_dict_only(path, monkeypatch))
    assert scanned.events.column("correlation").to_pylist() == [None, None, None]
    assert scanned.events.column("external_id").to_pylist() == [None, None, 5]


@pytest.mark.parametrize(
    "events",
    [
        pytest.param('{"ph": "X", "ts": 1, "dur": 1, "args": [1, 2]}', id="args not an object"),
        pytest.param('{"ph": "X", "ts": 1, "dur": 1, "args": null}', id="null args"),
        pytest.param('{"ph": "X", "ts": 1, "dur": 1, "pid": 1.5}', id="float pid"),
        pytest.param('{"ph": "X", "ts": 1, "dur": 1}, 7, "x"', id="not objects"),
        pytest.param('{"ph": "X", "ts": 1, "dur": 1, "args": {"v": NaN}}', id="NaN"),
        pytest.param('{"ph": "X", "name": "a\\ud800", "ts": 1, "dur": 1}', id="lone surrogate"),
        pytest.param('{"ph": "X", "ts": 1.5e3, "dur": 1}', id="exponent ts"),
        pytest.param('{"ph": "X", "ts": 1, "dur": "2"}', id="dur as text"),
        pytest.param('{"ph": "X", "ts": true, "dur": 1}', id="boolean ts"),
        pytest.param('{"ph": "X", "n\\u0061me": "a", "ts": 1, "dur": 1}', id="escaped key"),
        pytest.param('{"ph": "X", "ts": 12345678901234567, "dur": 1}', id="17-digit ts"),
        pytest.param('{"ph": "X", "ts": 1, "dur": 1, "name": 5}', id="numeric name"),
        pytest.param('{"ph": "s", "cat": "ac2g", "ts": 1, "id": 2.0}', id="float flow id"),
    ],
)
def test_what_it_does_not_read_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount, events: str
) -> None:
    parse_text(tmp_path, monkeypatch, '{"traceEvents": [' + events + "]}")
    assert count.typed == 0  # refused, or never offered (the stream decodes odd text whole)


@pytest.mark.parametrize("depth", [300, 900])
def test_deep_args_are_read_as_the_python_decoders_read_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: TypedCount, depth: int
) -> None:
    """Nesting has no bound in the scanner (an explicit stack, no recursion): args 300 or 900
    levels deep are read, with the typed and dict decoders' result."""
    nested = '{"d": ' + "[" * depth + '{"k": [1, "x"]}' + "]" * depth + "}"
    parse_text(tmp_path, monkeypatch, '{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, '
               f'"args": {nested}}}]}}')  # fmt: skip
    assert count.typed == 1


@needs_scanner
@pytest.mark.parametrize("piece", [b"", b"  ", b"{}", b" {} , {\n} "])
def test_empty_runs_and_objects_are_read(piece: bytes) -> None:
    assert native.scan(piece) is not None


@needs_scanner
@pytest.mark.parametrize(
    "piece",
    [
        b"{},",
        b",{}",
        b"{} {}",
        b'{"a":1}}',
        b'{"a":}',
        b'{"a" 1}',
        b'{"ts":01}',
        b'{"ts":1.}',
        b'{"ts":-}',
        b'{"name":"\\x"}',
        b'{"name":"\\u12"}',
        b'{"name":"a\nb"}',
        b'{"name":"\xff"}',
        b'{"name":"\xc0\x80"}',
        b'{"name":"\xed\xa0\x80"}',
        b'{"name":"\xf4\x90\x80\x80"}',
        b'{"args":{"a":tru}}',
        b'{"args":{"a":[1,]}}',
        b'{"args":{"a":"x}}',
        b'{"id":"\\u0031"}',
        b'{"args":{"a":[[1]}}',
        b'{"args":{"a":[{"b":1]}}',
        b'{"args":{"a":{"b":[1}}}',
        b'{"args":{"a":[' + b"[" * 5000 + b"]" * 4999 + b"}}",
        b'{"args":{"a":[1 2]}}',
        b'{"args":{"a":{"b" 1}}}',
    ],
)
def test_text_that_is_not_plain_json_is_refused(piece: bytes) -> None:
    assert native.scan(piece) is None


@needs_scanner
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=400))
def test_any_bytes_at_all(noise: bytes, at: int) -> None:
    """Random bytes, alone and spliced into a real run: never a crash."""
    base = json.dumps(KINETO_ODD["traceEvents"])[1:-1].encode()
    native.scan(noise)
    native.scan(base[:at] + noise + base[at:])
    native.scan(base[:at])


_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from(["12", " 7 ", "-3", "--5", "1.5", "x", "007"]),
)
_value = st.recursive(
    _scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_odd = st.one_of(st.booleans(), st.text(max_size=4), st.lists(st.integers(), max_size=2))
# timestamps with at most three decimals or not numbers at all: every path reads those alike
# (more decimals are the one documented difference between reading text and doubles)
_ts = st.one_of(
    st.integers(min_value=-(10**15), max_value=10**16),
    st.decimals(min_value=-(10**12), max_value=10**15, places=3).map(float),
    st.decimals(min_value=0, max_value=10**15, places=3).map(str),
    st.none(),
    _odd,
)
_ids = st.sampled_from(
    [
        "correlation",
        "correlation id",
        "correlationId",
        "External id",
        "external id",
        "external_id",
        "x",
    ]
)
_event = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "X", "X", "B", "E", "M", "s", "f", "t", "i", "C", ""]),
        "name": st.one_of(st.text(max_size=6), st.sampled_from(["process_name", "thread_name"])),
        "cat": st.sampled_from(["cpu_op", "kernel", "ac2g", "cuda_runtime", ""]),
        "pid": st.one_of(st.integers(min_value=-5, max_value=2**64), st.text(max_size=3)),
        "tid": st.one_of(st.integers(min_value=-5, max_value=2**64), st.text(max_size=3)),
        "ts": _ts,
        "dur": st.one_of(
            st.integers(min_value=-(10**6), max_value=10**12),
            st.floats(min_value=-(10**6), max_value=10**12),
            _value,
        ),
        "id": _value,
        "bind_id": _value,
        "args": st.one_of(st.dictionaries(_ids, _value, max_size=4), _value),
        "bp": st.just("e"),
    },
)


@needs_scanner
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_event, max_size=12), st.sampled_from([None, 1]))
def test_generated_events_read_alike(events: list[dict[str, Any]], indent: int | None) -> None:
    """Whatever the scanner reads, it reads as the typed decoder (or, where that refuses, the
    dict decoder) does; whatever it refuses, they read."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        path = Path(tmp) / "t.json"
        path.write_text(json.dumps({"traceEvents": events}, indent=indent), encoding="utf-8")
        scanned, _ = kineto_file.parse_file(path, workers=0)
        other = parse_typed_only(path, mp)
        assert_same_parse(scanned, other)
