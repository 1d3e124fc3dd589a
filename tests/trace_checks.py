"""Checks shared by the trace engine's unit and integration tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.trace import rows
from opscope.trace.kineto import convert as kineto_convert
from opscope.trace.kineto import file as kineto_file
from opscope.trace.kineto.columns import KinetoParse


def assert_same_parse(a: KinetoParse, b: KinetoParse, same_args_text: bool = False) -> None:
    """Every column, skip count, flow, metadata key and name equal; ``args`` as decoded JSON
    (the typed decoder keeps the trace's own compact text, the dict decoder re-serialises),
    or as text with ``same_args_text`` (two decoders that both keep the trace's text)."""
    assert a.events.column_names == b.events.column_names
    for c in a.events.column_names:
        x, y = a.events.column(c), b.events.column(c)
        if c == "args" and not same_args_text:
            xs, ys = x.to_pylist(), y.to_pylist()
            assert [v is None for v in xs] == [v is None for v in ys]
            assert [json.loads(v) if v else None for v in xs] == [
                json.loads(v) if v else None for v in ys
            ]
        else:
            assert x.to_pylist() == y.to_pylist(), c
    assert a.skipped == b.skipped
    assert a.flows.to_pylist() == b.flows.to_pylist()
    assert a.meta == b.meta
    assert a.process_names == b.process_names
    assert a.thread_names == b.thread_names


class TypedCount:
    """How many runs a decoder read (``typed``) and handed on (``refused``)."""

    def __init__(self) -> None:
        self.typed = 0
        self.refused = 0


def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise rows.NotTyped


def _count(monkeypatch: pytest.MonkeyPatch, name: str) -> TypedCount:
    c = TypedCount()
    real = getattr(kineto_convert, name)

    def counting(piece: bytes) -> Any:
        try:
            parts = real(piece)
        except rows.NotTyped:
            c.refused += 1
            raise
        c.typed += 1
        return parts

    monkeypatch.setattr(kineto_convert, name, counting)
    return c


def count_typed(monkeypatch: pytest.MonkeyPatch) -> TypedCount:
    """Count the typed (msgspec) decoder's outcomes from now on (in this process), with the C
    scanner switched off so that every run meets the typed decoder first."""
    monkeypatch.setattr(kineto_convert, "convert_native", _refuse)
    return _count(monkeypatch, "convert_typed")


def count_native(monkeypatch: pytest.MonkeyPatch) -> TypedCount:
    """Count the C scanner's outcomes from now on (in this process)."""
    return _count(monkeypatch, "convert_native")


def parse_typed_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> KinetoParse:
    """``path`` parsed in this process with the C scanner refusing every run (the typed
    decoder, then dicts, read them)."""
    with monkeypatch.context() as m:
        m.setattr(kineto_convert, "convert_native", _refuse)
        parsed, _ = kineto_file.parse_file(path, workers=0)
    return parsed


def parse_dict_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> KinetoParse:
    """``path`` parsed in this process with the C scanner and the typed decoder refusing
    every run."""
    with monkeypatch.context() as m:
        m.setattr(kineto_convert, "convert_native", _refuse)
        m.setattr(kineto_convert, "convert_typed", _refuse)
        parsed, _ = kineto_file.parse_file(path, workers=0)
    return parsed


def X(name: str, ts: Any, dur: Any, cat: str = "cpu_op", **extra: Any) -> dict[str, Any]:
    """A complete ("X") event on pid 1, tid 1 unless ``extra`` says otherwise."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, **extra}


# A Kineto-like document: a step, an op, its launch and kernel linked by correlation and a
# flow pair, an instant, a B/E pair, process and thread names, a counter.  Parsed: five timed
# rows (four X and the B/E pair); skipped: the instant and the counter.
KINETO_LIKE: dict[str, Any] = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "A100"}],
    "traceEvents": [
        X("ProfilerStep#1", 0, 100, "user_annotation", args={"External id": 1}),
        X("aten::mm", 10, 50, args={"External id": 2, "Input Dims": [[4, 4], [4, 4]]}),
        X(
            "cudaLaunchKernel",
            20,
            5,
            "cuda_runtime",
            args={"External id": 2, "correlation": 9, "cbid": 211},
        ),
        X("gemm", 40, 30, "kernel", pid=0, tid=7, args={"External id": 2, "correlation": 9}),
        {"ph": "s", "id": 9, "pid": 1, "tid": 1, "ts": 20, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 9, "pid": 0, "tid": 7, "ts": 40, "cat": "ac2g", "bp": "e"},
        {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 5, "s": "t"},
        {"ph": "B", "name": "region", "pid": 1, "tid": 2, "ts": 60, "args": {"a": 1}},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 70, "args": {"b": 2}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 3, "args": {"bytes": 10}},
    ],
    "traceName": "t",
    "baseTimeNanoseconds": 1700000000000000000,
}


def mm_step_doc(rank: int, ops: int, world_size: int = 2) -> dict[str, Any]:
    """A Kineto document of one profiler step of ``ops`` ``aten::mm`` ops, each launching one
    ``sgemm`` kernel, on rank ``rank`` of ``world_size`` (an A100)."""
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 1000},
    ]  # fmt: skip
    for i in range(ops):
        t = 10 + 50 * i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t,
             "dur": 20, "args": {"External id": i}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 1, "dur": 5, "args": {"correlation": 100 + i, "External id": i}},
            {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": t + 10,
             "dur": 30, "args": {"correlation": 100 + i, "External id": i}},
        ]  # fmt: skip
    return {
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
        "distributedInfo": {"rank": rank, "world_size": world_size},
        "traceEvents": events,
    }
