"""Checks shared by the trace engine's unit and integration tests."""

from __future__ import annotations

import json

import orjson

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
