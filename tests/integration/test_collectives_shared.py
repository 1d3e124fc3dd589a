"""Collective records of recorded NCCL traces (../shared): one rank of a two-rank job with
``record_param_comms`` arguments, and two ranks of a 128-rank job of an older PyTorch (sizes
from the recorded shapes only)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from opscope.analysis.collective_match import match_collectives
from opscope.analysis.collectives import collective_records
from opscope.analysis.job_report import rank_report
from opscope.analysis.pipeline import analyze
from opscope.trace import load

pytestmark = pytest.mark.shared


def test_an_nccl_rank_of_two(shared: Callable[[str], Path]) -> None:
    trace = load(shared("cuda/a100_nccl_rank0_of2.json.gz"))
    records = collective_records(trace)
    assert Counter(r["name"] for r in records) == {"all_reduce": 15, "broadcast": 6}
    assert {(r["rank"], r["pg"], r["pg_size"]) for r in records} == {(0, "0", 2)}
    assert [r["index"] for r in records] == list(range(len(records)))
    first = next(r for r in records if r["name"] == "all_reduce")
    # record_param_comms: In/Out msg nelems 2049000, dtype Float
    assert (first["raw_name"], first["bytes"], first["dtype"]) == (
        "c10d::allreduce_",
        2049000 * 4,
        "Float",
    )
    assert {r["dtype"] for r in records if r["name"] == "broadcast"} == {"Float", "Long"}
    # arrival and end: the start and end of a comm kernel of the trace
    idx = trace.index
    comm = np.flatnonzero(idx.kind.eq("comm"))
    starts = set(idx.start[comm].tolist())
    ends = set(idx.end[comm].tolist())
    assert all(r["arrival_ns"] in starts and r["end_ns"] in ends for r in records)
    instances, warnings = match_collectives({0: records})
    assert len(instances) == len(records)
    assert warnings == ["pg 0: records from 1 of its 2 ranks (0); waits and skews cover those only"]
    # the rank report of the trace holds them
    report = analyze(trace, findings=False, roofline=False)
    assert rank_report(report).collectives == records


def test_two_ranks_of_a_128_rank_job(shared: Callable[[str], Path]) -> None:
    job = shared("cuda/sampled_world128")
    by_rank = {r: collective_records(load(job / f"rank{r}.json.gz")) for r in (0, 1)}
    for rank, records in by_rank.items():
        assert len(records) == 10
        assert Counter(r["name"] for r in records) == {
            "all_to_all": 4,
            "all_reduce": 4,
            "all_gather": 2,
        }
        assert {r["rank"] for r in records} == {rank}
        gathers = [r for r in records if r["name"] == "all_gather"]
        # _allgather_base_: output 1073741824 signed chars, the larger of its two tensors
        assert [(g["bytes"], g["dtype"]) for g in gathers] == [(1073741824, "Char")] * 2
        assert all(r["bytes"] for r in records)
    # the two sampled windows do not hold the same collectives: the matcher says where the
    # ranks part and matches nothing past it
    instances, warnings = match_collectives(by_rank)
    # the calls name no process group and distributedInfo lists none: the default group,
    # whose size is the world's (128), of which two ranks are here
    assert {r["pg_size"] for recs in by_rank.values() for r in recs} == {128}
    assert len(warnings) == 2
    assert warnings[0] == (
        "pg 0: records from 2 of its 128 ranks (0, 1); waits and skews cover those only"
    )
    assert "disagree" in warnings[1]
    assert "stopped" in warnings[1]
    for inst in instances:
        assert inst["ranks"] == [0, 1]
        names = {by_rank[r][inst["seq"]]["name"] for r in (0, 1)}
        assert names == {inst["name"]}
