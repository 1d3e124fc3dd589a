"""The path's data_loading shared out among the loader workers' events (hand-computed)."""

from __future__ import annotations

import numpy as np
import pytest

from opscope.analysis.critical.loader import loader_section
from opscope.analysis.critical.model import CPU, DATA, UNTRACED
from opscope.analysis.critical.path import Pieces, Segments
from opscope.trace.loader_work import LoaderWork, LoaderWorker


def _segments(pieces: list[tuple[int, int, int]]) -> Segments:
    """Pieces of (label, start_ns, dur_ns) on rank 0."""
    label = np.asarray([p[0] for p in pieces], np.int8)
    start = np.asarray([p[1] for p in pieces], np.int64)
    dur = np.asarray([p[2] for p in pieces], np.int64)
    n = len(pieces)
    parts = Pieces(np.zeros(n, np.int32), label, np.full(n, -1, np.int64), start, dur)
    return Segments(parts, None)  # type: ignore[arg-type]  # the index is not read here


def _work(events: list[tuple[int, str, int, int]], n_workers: int = 2) -> LoaderWork:
    """Worker events of (worker, name, start_ns, end_ns)."""
    workers = [LoaderWorker(f"w{k}.json", [str(100 + k)], 0, 0) for k in range(n_workers)]
    return LoaderWork(
        workers=workers,
        worker=np.asarray([e[0] for e in events], np.int64),
        name=[e[1] for e in events],
        start=np.asarray([e[2] for e in events], np.int64),
        end=np.asarray([e[3] for e in events], np.int64),
    )


def test_shares_sum_to_the_paths_data_loading_and_split_overlaps_equally() -> None:
    # the path: cpu 0-1000, data_loading 1000-5000, untraced 5000-6000, data_loading 6000-7000
    segs = _segments(
        [(CPU, 0, 1000), (DATA, 1000, 4000), (UNTRACED, 5000, 1000), (DATA, 6000, 1000)]
    )
    # worker 0 decodes 500-3000 (2000 ns of it on the path's data_loading), worker 1
    # decodes 2000-4000 (overlapping worker 0 over 2000-3000) and collates 5500-6500
    work = _work([(0, "decode", 500, 3000), (1, "decode", 2000, 4000), (1, "collate", 5500, 6500)])
    got = loader_section(segs, work)
    assert got["on_path_us"] == 5.0
    # busy on the path: 1000-4000 (3000) and 6000-6500 (500)
    assert got["in_workers_us"] == 3.5
    assert got["not_in_workers_us"] == 1.5
    # worker 0: 1000-2000 alone (1000) + half of 2000-3000 (500) = 1500
    # worker 1: half of 2000-3000 (500) + 3000-4000 (1000) + 6000-6500 (500) = 2000
    assert [w["on_path_us"] for w in got["workers"]] == [1.5, 2.0]
    top = {t["name"]: t["us"] for t in got["top"]}
    assert top == {"decode": 3.0, "collate": 0.5}
    assert got["top"][0] == {"name": "decode", "us": 3.0, "share": 0.6}
    total = sum(t["us"] for t in got["top"]) + got["not_in_workers_us"]
    assert total == pytest.approx(got["on_path_us"])


def test_work_off_the_path_counts_nothing() -> None:
    segs = _segments([(CPU, 0, 1000), (DATA, 1000, 1000)])
    work = _work([(0, "decode", 0, 1000), (1, "decode", 2000, 9000)])  # before and after
    got = loader_section(segs, work)
    assert got["on_path_us"] == 1.0
    assert got["in_workers_us"] == 0.0
    assert got["not_in_workers_us"] == 1.0
    assert got["top"] == []
    assert [w["on_path_us"] for w in got["workers"]] == [0.0, 0.0]


def test_no_data_loading_on_the_path() -> None:
    got = loader_section(_segments([(CPU, 0, 1000)]), _work([(0, "decode", 0, 1000)]))
    assert got["on_path_us"] == 0.0
    assert got["top"] == []
