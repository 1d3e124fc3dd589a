"""Checks shared by the trace engine's unit and integration tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from opscope.trace import kineto, rows
from opscope.trace.kineto import KinetoParse


def assert_same_parse(a: KinetoParse, b: KinetoParse) -> None:
    """Every column, skip count, flow, metadata key and name equal; ``args`` as decoded JSON
    (the typed decoder keeps the trace's own compact text, the dict decoder re-serialises)."""
    assert a.events.column_names == b.events.column_names
    for c in a.events.column_names:
        x, y = a.events.column(c), b.events.column(c)
        if c == "args":
            xs, ys = x.to_pylist(), y.to_pylist()
            assert [v is None for v in xs] == [v is None for v in ys]
            assert [orjson.loads(v) if v else None for v in xs] == [
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
    """How many runs the typed decoder read (``typed``) and handed to dicts (``refused``)."""

    def __init__(self) -> None:
        self.typed = 0
        self.refused = 0


def count_typed(monkeypatch: pytest.MonkeyPatch) -> TypedCount:
    """Count the typed decoder's outcomes from now on (in this process)."""
    c = TypedCount()
    real = kineto.convert_typed

    def counting(piece: bytes) -> Any:
        try:
            parts = real(piece)
        except rows.NotTyped:
            c.refused += 1
            raise
        c.typed += 1
        return parts

    monkeypatch.setattr(kineto, "convert_typed", counting)
    return c


def parse_dict_only(path: Path, monkeypatch: pytest.MonkeyPatch) -> KinetoParse:
    """``path`` parsed in this process with the typed decoder refusing every run."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise rows.NotTyped

    with monkeypatch.context() as m:
        m.setattr(kineto, "convert_typed", refuse)
        parsed, _ = kineto.parse_file(path, workers=0)
    return parsed
