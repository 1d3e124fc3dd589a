"""Progress told by the core (trace.progress) as a file is read and a trace analysed, and
the report's stage line built from it (cli.stages)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from opscope.cli.stages import describe
from opscope.trace import progress
from opscope.trace.readers import ByteStream


def _trace(path: Path, n: int = 2000) -> bytes:
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"aten::op{i % 7}",
            "pid": 1,
            "tid": 1,
            "ts": 10 * i,
            "dur": 5,
        }
        for i in range(n)
    ]
    data = json.dumps({"traceEvents": events}).encode()
    path.write_bytes(data)
    return data


def _told(fn: object) -> list[tuple[str, int, int]]:
    seen: list[tuple[str, int, int]] = []
    with progress.reporting(lambda *a: seen.append(a)):
        fn()  # type: ignore[operator]
    return seen


def test_a_listener_hears_only_inside_its_block_and_the_one_before_comes_back() -> None:
    outer: list[tuple[str, int, int]] = []
    inner: list[tuple[str, int, int]] = []
    progress.tell("read", 1, 2)  # nobody listening: nothing happens
    with progress.reporting(lambda *a: outer.append(a)):
        progress.tell("read", 1, 2)
        with progress.reporting(lambda *a: inner.append(a)):
            progress.tell("analyse", 0, 5)
        progress.tell("read", 2, 2)
    progress.tell("read", 3, 3)
    assert outer == [("read", 1, 2), ("read", 2, 2)]
    assert inner == [("analyse", 0, 5)]


@pytest.mark.parametrize("gz", [False, True])
def test_reading_a_file_tells_its_bytes_up_to_its_size_on_disk(tmp_path: Path, gz: bool) -> None:
    path = tmp_path / "t.json"
    data = _trace(path, 20000)
    if gz:
        path = tmp_path / "t.json.gz"
        path.write_bytes(gzip.compress(data))
    size = path.stat().st_size

    def read() -> None:
        assert b"".join(ByteStream(path, block=1 << 14)) == data

    told = _told(read)
    reads = [(d, t) for s, d, t in told if s == "read"]
    assert len(reads) >= (1 if gz else 2)
    assert all(t == size for _, t in reads)
    done = [d for d, _ in reads]
    assert done == sorted(done) and done[-1] == size


def test_the_analysis_tells_its_events_and_a_jobs_ranks(tmp_path: Path) -> None:
    import opscope
    from distjobs import write_nccl_job

    path = tmp_path / "t.json"
    _trace(path, 500)
    told = _told(lambda: opscope.analyze(path, cache=False))
    assert told[0][0] == "read"
    assert ("link", 0, 0) in told
    events = opscope.load(path, cache=False).events.num_rows
    assert ("analyse", 0, events) in told
    assert told.index(("link", 0, 0)) < told.index(("analyse", 0, events))

    folder = tmp_path / "job"
    write_nccl_job(folder, world=3)
    ranks = [t for t in _told(lambda: opscope.analyze(folder, cache=False)) if t[0] == "rank"]
    assert ranks == [("rank", 0, 3), ("rank", 1, 3), ("rank", 2, 3), ("rank", 3, 3)]


def test_the_stage_line() -> None:
    assert describe("read", 0, 0, "t.json") == ("reading t.json", None, 0)
    assert describe("read", 1_500_000, 3_000_000, "t.json") == (
        "reading t.json (2 of 3 MB)",
        3_000_000,
        1_500_000,
    )
    assert describe("link", 0, 0, "t.json") == ("linking the events of t.json", None, 0)
    assert describe("analyse", 0, 9_992_143, "t.json") == ("analysing 9,992,143 events", None, 0)
    assert describe("rank", 0, 4, "job") == ("analysing rank 1 of 4", 4, 0)
    assert describe("rank", 4, 4, "job") == ("analysing rank 4 of 4", 4, 4)
