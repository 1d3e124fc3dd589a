"""A CPU collective's resume edges on the caller's thread (gloo runs the work on its own
thread): a caller busy in a range when the work ends was not waiting for it; a caller idle
since the work began that resumes just before the range's recorded end was."""

from __future__ import annotations

import numpy as np
from test_findings_kit import Doc

from opscope.analysis.critical.graph import build
from opscope.analysis.critical.model import LABELS, RESUME
from opscope.trace import Trace


def _rows(trace: Trace, *names: str) -> list[int]:
    got = trace.index.name
    return [int(np.flatnonzero(got.eq(n))[0]) for n in names]


def _resumes(trace: Trace, links: dict[int, int]) -> list[tuple[str, str, float]]:
    """The resume edges: (label, the start they lead to, weight µs)."""
    g = build(trace.index, host_links=links)
    names = trace.index.name
    out = []
    for e in np.flatnonzero(g.kind == RESUME).tolist():
        row = int(g.row[g.dst[e]])
        out.append((LABELS[int(g.label[e])], str(names[row]), float(g.weight[e]) / 1000))
    return out


def _job(sleep_in_range: bool) -> tuple[Trace, dict[int, int]]:
    d = Doc(gpu=False)
    d.step(1, 0, 400)
    d.op("c10d::allreduce_", 10, 10)  # the async call on the main thread
    d.op("gloo:all_reduce", 15, 185, tid=9, cat="user_annotation")  # ends at 200
    if sleep_in_range:
        d.op("slow_region", 30, 240, cat="user_annotation")  # busy until 270
        d.op("aten::mm", 280, 20)
    else:
        d.op("aten::mm", 198, 20)  # idle since 20, resumed 2 µs before the range closed
    tr = d.trace()
    rng, call = _rows(tr, "gloo:all_reduce", "c10d::allreduce_")
    return tr, {rng: call}


def test_a_caller_busy_in_a_range_at_the_work_end_is_not_resumed_by_it() -> None:
    tr, links = _job(sleep_in_range=True)
    assert _resumes(tr, links) == []


def test_a_caller_idle_since_the_work_began_is_resumed_by_it_before_the_range_closes() -> None:
    tr, links = _job(sleep_in_range=False)
    # from the range's start (no mid without a job) to the resumed op: the transfer
    assert ("gpu_comm", "aten::mm", 183.0) in _resumes(tr, links)
    g = build(tr.index, host_links=links)
    # the caller's gap before the resumed op weighs nothing: the wait is the collective's
    mm = _rows(tr, "aten::mm")[0]
    into = np.flatnonzero(g.dst == np.flatnonzero((g.row == mm) & (g.role == 0))[0])
    assert sorted(float(g.weight[e]) / 1000 for e in into) == [0.0, 183.0]
