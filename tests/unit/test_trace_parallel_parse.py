"""The pooled parse gives what the sequential one gives: runs converted in threads (the C
scanner releases the GIL) or, without the scanner, in worker processes."""

from __future__ import annotations

import gzip
import json
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from opscope.trace import jsonstream, native, readers
from opscope.trace.kineto import file as kineto_file


def _trace(n: int) -> dict[str, object]:
    ev: list[object] = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "main"}},
    ]
    for i in range(n):
        t = 10.0 + i * 3.5
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"aten::op{i % 5}",
                "pid": 1,
                "tid": 7,
                "ts": t,
                "dur": 3.0,
                "args": {"External id": i, "note": "},{ not a cut" if i == n - 9 else ""},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 7,
                "ts": t + 0.5,
                "dur": 1.0,
                "args": {"correlation": i},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 2,
                "ts": t + 2,
                "dur": 0.25,
                "args": {"correlation": i, "External id": i},
            }
        )
        ev.append({"ph": "s", "cat": "ac2g", "id": i, "pid": 1, "tid": 7, "ts": t + 0.5})
        ev.append({"ph": "f", "cat": "ac2g", "id": i, "pid": 0, "tid": 2, "ts": t + 2})
        if i % 7 == 0:  # B/E pairs across runs, instants, odd rows
            ev.append(
                {"ph": "B", "cat": "user_annotation", "name": "b", "pid": 1, "tid": 9, "ts": t}
            )
        if i % 7 == 3:
            ev.append({"ph": "E", "pid": 1, "tid": 9, "ts": t, "args": {"x": 1}})
        if i % 11 == 0:
            ev.append({"ph": "i", "name": "mark", "pid": 1, "tid": 7, "ts": t})
            ev.append({"ph": "X", "cat": "cpu_op", "name": "no ts", "pid": 1, "tid": 7})
            ev.append({"ph": "Q", "pid": 1, "tid": 7, "ts": t})
            ev.append(5)
    return {"traceEvents": ev, "baseTimeNanoseconds": 1_000_000_000}


def _parse(path: Path, workers: int | None) -> tuple[object, ...]:
    parsed, warnings = kineto_file.parse_file(path, workers=workers)
    return (
        parsed.events,
        parsed.flows,
        json.dumps(parsed.meta),
        list(parsed.skipped.items()),
        parsed.process_names,
        parsed.thread_names,
        warnings,
    )


def _small_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small runs, the same for the sequential and the pooled parse (where B/E pairs close
    decides the rows' order)."""
    monkeypatch.setattr(jsonstream.EventStream.__init__, "__defaults__", (20_000,))
    monkeypatch.setattr(readers.ByteStream.__init__, "__defaults__", (None, 16_384))


@pytest.mark.parametrize("pool", ["threads", "processes"])
@pytest.mark.parametrize("cut", [False, True])
def test_pooled_matches_sequential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: bool, pool: str
) -> None:
    if pool == "threads" and not native.AVAILABLE:
        pytest.skip("the C scanner is not built (no C compiler at install): no thread pool")
    monkeypatch.setenv("OPSCOPE_NATIVE", "1" if pool == "threads" else "0")
    executor: type[Executor] = ThreadPoolExecutor if pool == "threads" else ProcessPoolExecutor
    data = json.dumps(_trace(3000)).encode()
    if cut:
        data = data[: len(data) * 2 // 3]
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(data))
    _small_runs(monkeypatch)
    seq = _parse(path, workers=1)
    monkeypatch.setattr(kineto_file, "PARALLEL_MIN_BYTES", 1)
    submitted: list[str] = []
    real = executor.submit

    def spy(self: Executor, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        submitted.append(fn.__name__)
        return real(self, fn, *args, **kwargs)

    monkeypatch.setattr(executor, "submit", spy)
    pooled = _parse(path, workers=2)
    assert submitted.count("_convert_piece") > 5  # the runs went to the workers
    assert pooled[0].num_rows > 1000  # type: ignore[attr-defined]
    for a, b in zip(seq, pooled, strict=True):
        assert a == b if not hasattr(a, "equals") else a.equals(b)  # type: ignore[attr-defined]


def _dies(piece: bytes, quote: bool, portable: bool) -> Any:
    """A worker that dies as one killed for memory does (the pool is then broken)."""
    import os

    os._exit(9)


def test_a_worker_that_dies_leaves_the_sequential_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker process killed mid-parse (the pool broken) makes the file go through the
    sequential path: the same parse, not an error and not a partial table."""
    monkeypatch.setenv("OPSCOPE_NATIVE", "0")
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_trace(1500)).encode()))
    _small_runs(monkeypatch)
    seq = _parse(path, workers=1)
    monkeypatch.setattr(kineto_file, "PARALLEL_MIN_BYTES", 1)
    made: list[Executor] = []
    real_pool = kineto_file._process_pool

    def dying_pool(n_workers: int) -> Executor:
        pool = real_pool(n_workers)
        made.append(pool)
        real = pool.submit
        pool.submit = lambda fn, *a, **k: real(_dies, *a, **k)  # type: ignore[method-assign]
        return pool

    monkeypatch.setattr(kineto_file, "_process_pool", dying_pool)
    got = _parse(path, workers=2)
    assert made, "the parse made no process pool"
    assert got[0].num_rows > 1000  # type: ignore[attr-defined]
    for a, b in zip(seq, got, strict=True):
        assert a == b if not hasattr(a, "equals") else a.equals(b)  # type: ignore[attr-defined]
