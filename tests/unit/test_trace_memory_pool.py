"""Ingestion allocates from jemalloc (or the system allocator), and puts Arrow's default back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from opscope.errors import TraceError
from opscope.trace import load, mempool
from opscope.trace.kineto import file as kineto_file


def test_switch_is_nested_and_restored() -> None:
    before = pa.default_memory_pool().backend_name
    with mempool.ingest_memory_pool():
        inside = pa.default_memory_pool().backend_name
        assert inside in ("jemalloc", "system")
        with mempool.ingest_memory_pool():
            assert pa.default_memory_pool().backend_name == inside
        assert pa.default_memory_pool().backend_name == inside
        arr = pa.array(list(range(1000)))
    assert pa.default_memory_pool().backend_name == before
    assert arr.to_pylist()[-1] == 999  # a buffer outlives the switch back


def test_load_allocates_from_the_switched_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real = kineto_file.parse_file

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(pa.default_memory_pool().backend_name)
        return real(*args, **kwargs)

    monkeypatch.setattr(kineto_file, "parse_file", spy)
    before = pa.default_memory_pool().backend_name
    path = tmp_path / "t.json"
    ev = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
    path.write_text(json.dumps({"traceEvents": [ev]}))
    t = load(path, cache=False)
    assert len(t) == 1 and seen and seen[0] in ("jemalloc", "system")
    assert pa.default_memory_pool().backend_name == before
    bad = tmp_path / "bad.json"
    bad.write_text("not a trace")
    with pytest.raises(TraceError):  # raised while switched: restored all the same
        load(bad, cache=False)
    assert pa.default_memory_pool().backend_name == before
