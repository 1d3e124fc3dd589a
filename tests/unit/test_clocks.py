"""Clock offsets from the ends of matched collectives: estimated, applied only when the data
support it, and the waits measured on one clock afterwards."""

from __future__ import annotations

from typing import Any

import pytest

from opscope.analysis import clocks
from opscope.analysis.collective_match import match_collectives


def _records(
    offset_ns: int, n: int = 6, late_ns: int = 2_000_000
) -> dict[int, list[dict[str, Any]]]:
    """Two ranks, ``n`` all-reduces; rank 1 arrives ``late_ns`` late each time and its clock
    reads ``offset_ns`` ahead.  Every collective ends at the same true moment."""
    out: dict[int, list[dict[str, Any]]] = {0: [], 1: []}
    for i in range(n):
        t0 = 1_000_000_000 + i * 10_000_000
        end = t0 + late_ns + 500_000
        for rank, arrival, shift in ((0, t0, 0), (1, t0 + late_ns, offset_ns)):
            out[rank].append(
                {
                    "rank": rank,
                    "name": "all_reduce",
                    "raw_name": "c10d::allreduce_",
                    "pg": "0",
                    "pg_size": 2,
                    "seq": None,
                    "index": i,
                    "bytes": 1024,
                    "dtype": "Float",
                    "arrival_ns": arrival + shift,
                    "end_ns": end + shift + 1_000 * (i % 2),
                    "dur_us": (end - arrival) / 1e3,
                }
            )
    return out


def test_offset_found_and_applied_across_hosts() -> None:
    recs = _records(offset_ns=5_000_000)
    clock = clocks.estimate(recs)
    assert clock["offsets_us"]["1"] == pytest.approx(5000.0, abs=2.0)
    assert clock["residual_us"] < 2.0 and clock["applied"] and clock["instances"] == 6
    raw, _ = match_collectives(recs)
    fixed, _ = match_collectives(clocks.corrected(recs, clock["offsets_us"]))
    assert raw[0]["wait_us"]["0"] == pytest.approx(7000.0, abs=2.0)  # the clocks mixed in
    assert fixed[0]["wait_us"]["0"] == pytest.approx(2000.0, abs=2.0)  # the true wait


def test_one_host_shares_a_clock_nothing_applied() -> None:
    clock = clocks.estimate(_records(offset_ns=0))
    assert abs(clock["offsets_us"]["1"]) < 2.0 and not clock["applied"]
    one = clocks.estimate({0: _records(0)[0]})
    assert one["method"] == "none" and not one["applied"]


def test_noisy_ends_are_not_trusted() -> None:
    recs = _records(offset_ns=300_000)
    for i, rec in enumerate(recs[1]):  # ends scattered by up to +-2 ms
        rec["end_ns"] += (-1) ** i * 2_000_000 * (i % 3)
    clock = clocks.estimate(recs)
    assert not clock["applied"]
