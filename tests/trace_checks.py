"""Checks shared by the trace engine's unit and integration tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.trace import kineto, rows
from opscope.trace.kineto import KinetoParse


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
    real = getattr(kineto, name)

    def counting(piece: bytes) -> Any:
        try:
            parts = real(piece)
        except rows.NotTyped:
            c.refused += 1
            raise
        c.typed += 1
        return parts

    monkeypatch.setattr(kineto, name, counting)
    return c


def count_typed(monkeypatch: pytest.MonkeyPatch) -> TypedCount:
    """Count the typed (msgspec) decoder's outcomes from now on (in this process), with the C
    scanner switched off so that every run meets the typed decoder first."""
    monkeypatch.setattr(kineto, "convert_native", _refuse)
    return _count(monkeypatch, "convert_typed")


def count_native(monkeypatch: pytest.MonkeyPatch) -> TypedCount:
    """Count the C scanner's outcomes from now on (in this process)."""
    return _count(monkeypatch, "convert_native")


def parse_typed_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> KinetoParse:
    """``path`` parsed in this process with the C scanner refusing every run (the typed
    decoder, then dicts, read them)."""
    with monkeypatch.context() as m:
        m.setattr(kineto, "convert_native", _refuse)
        parsed, _ = kineto.parse_file(path, workers=0)
    return parsed


def parse_dict_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> KinetoParse:
    """``path`` parsed in this process with the C scanner and the typed decoder refusing
    every run."""
    with monkeypatch.context() as m:
        m.setattr(kineto, "convert_native", _refuse)
        m.setattr(kineto, "convert_typed", _refuse)
        parsed, _ = kineto.parse_file(path, workers=0)
    return parsed
