"""A collective record's first work event, found for many records at once
(``critical.job.first_works``), against the record-by-record rule it replaced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from distjobs import nccl_rank_doc
from opscope.analysis.critical.job import first_works
from opscope.trace import load


def _one_by_one(trace: Any, rec: dict[str, Any]) -> int:
    """The earliest-starting of the record's work events that the trace holds (the first in
    the list on a tie), -1 where none is."""
    idx = trace.index
    best = -1
    for w in rec.get("work_event_ids") or []:
        (row,) = idx.rows_of(np.asarray([int(w)], dtype=np.int64)).tolist()
        if row >= 0 and (best < 0 or idx.start[row] < idx.start[best]):
            best = row
    return best


def test_first_works_matches_the_record_by_record_rule(tmp_path: Path) -> None:
    f = tmp_path / "trace_rank_0.json"
    doc = nccl_rank_doc(0, 2)
    timed = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    for e in timed[-4:]:  # four events that start together: ties
        e["ts"] = timed[-5]["ts"]
    f.write_text(json.dumps(doc))
    trace = load(f, cache=False)
    idx = trace.index
    ids = idx.ids.tolist()
    rng = np.random.default_rng(7)
    # equal starts, so ties are decided by the list order
    starts, counts = np.unique(idx.start, return_counts=True)
    tied = [int(i) for i in idx.ids[idx.start == starts[np.argmax(counts)]]]
    assert len(tied) > 1
    recs: list[dict[str, Any]] = [{}, {"work_event_ids": []}, {"work_event_ids": None}]
    recs.append({"work_event_ids": [max(ids) + 10, -5]})  # none in the trace
    recs.append({"work_event_ids": tied[::-1] + tied})
    for _ in range(300):
        k = int(rng.integers(1, 6))
        picked = [int(x) for x in rng.choice(ids, size=k)]
        if rng.random() < 0.3:
            picked.append(max(ids) + int(rng.integers(1, 100)))
        if rng.random() < 0.3:
            picked = [str(p) for p in picked]  # ids as text, as JSON records may hold them
        recs.append({"work_event_ids": picked})
    rng.shuffle(recs)  # type: ignore[arg-type]
    got = first_works(trace, recs).tolist()
    want = [_one_by_one(trace, r) for r in recs]
    assert got == want
    assert sum(g >= 0 for g in got) > 250  # most records found their work
    assert first_works(trace, []).tolist() == []
