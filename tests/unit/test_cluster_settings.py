"""A cluster task's settings (analysis.cluster.worker.Settings): passed as an argument, in
force for that task only, never written to the process's environment, so that two tasks in
one worker process (Dask runs several threads per worker) each read with their own."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.cluster.worker import Settings, read_part, read_rank
from opscope.trace.commuser import user_patterns
from opscope.trace.readers import MAX_INFLATE_RATIO, max_inflate_ratio

_ENV = ("OPSCOPE_MAX_INFLATE", "OPSCOPE_COMM_KERNELS", "OPSCOPE_MAX_TRACE_BYTES")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _trace(path: Path) -> Path:
    """One op launching an in-house kernel (communication only under a user's pattern)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10,
         "dur": 20, "args": {"External id": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 11, "dur": 5, "args": {"correlation": 7, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "acme_ring_exchange", "pid": 0, "tid": 7,
         "ts": 20, "dur": 30, "args": {"correlation": 7, "External id": 1}},
    ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _kernel_kind(part: Any) -> str:
    names = part.table.column("name").to_pylist()
    return str(part.table.column("kind").to_pylist()[names.index("acme_ring_exchange")])


def test_two_tasks_in_one_process_see_their_own_settings() -> None:
    """Two tasks' scopes open at once on two threads of one process: each sees its own
    bound and patterns, the process's environment is never touched."""
    strict = Settings(max_inflate=3.0, comm_kernels="^acme_")
    loose = Settings(max_inflate=None, comm_kernels=None)
    both_inside = threading.Barrier(2, timeout=30)
    seen: dict[str, tuple[float, str, dict[str, str | None]]] = {}

    def task(name: str, settings: Settings) -> None:
        with settings.scope():
            both_inside.wait()  # the other task's scope is open now too
            env = {k: os.environ.get(k) for k in _ENV}
            seen[name] = (max_inflate_ratio(), user_patterns(), env)
            both_inside.wait()

    threads = [
        threading.Thread(target=task, args=("strict", strict)),
        threading.Thread(target=task, args=("loose", loose)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert seen["strict"][:2] == (3.0, "^acme_")
    assert seen["loose"][:2] == (float(MAX_INFLATE_RATIO), "")
    assert all(env == dict.fromkeys(_ENV) for _b, _p, env in seen.values())
    assert (max_inflate_ratio(), user_patterns()) == (float(MAX_INFLATE_RATIO), "")


def test_a_tasks_patterns_class_its_kernels_and_leave_the_next_task_alone(tmp_path: Path) -> None:
    path = str(_trace(tmp_path / "rank0.json"))
    mine = Settings(cache=False, comm_kernels="^acme_")
    assert _kernel_kind(read_part(path, mine)) == "comm"
    assert _kernel_kind(read_part(path, Settings(cache=False))) == "kernel"
    assert "OPSCOPE_COMM_KERNELS" not in os.environ


def test_the_coordinators_settings_come_from_its_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert Settings.here("kineto", True) == Settings()
    monkeypatch.setenv("OPSCOPE_MAX_INFLATE", "0")
    monkeypatch.setenv("OPSCOPE_COMM_KERNELS", "^acme_")
    monkeypatch.setenv("OPSCOPE_MAX_TRACE_BYTES", "10")
    got = Settings.here("event_store", False)
    assert got == Settings("event_store", False, 10, float("inf"), "^acme_")
    path = str(_trace(tmp_path / "rank0.json"))
    monkeypatch.delenv("OPSCOPE_MAX_TRACE_BYTES")
    assert "over the 10 byte limit" in read_rank(path, Settings(max_trace_bytes=10))["error"]
