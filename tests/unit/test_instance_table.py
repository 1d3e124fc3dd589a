"""The matched instances kept as columns: their dicts, and every figure computed on the
arrays, equal what a loop over the instance dicts gives, float for float, on random jobs with
missing records, several process groups, doubled records and point-to-point records."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from test_collectives import rec

from opscope.analysis.collective_match import (
    INSTANCE_KEYS,
    instance_members,
    match_collectives,
    member_waits,
    stragglers,
)
from opscope.analysis.distributed import _add_transfer
from opscope.analysis.instance_table import Instances, straggler_sums


def random_job(seed: int) -> dict[int, list[dict[str, Any]]]:
    rng = random.Random(seed)
    ranks = rng.randint(2, 9)
    n = rng.randint(1, 60)
    by_seq = rng.random() < 0.5
    sizes = [rng.choice([4096, None, 0]) for _ in range(n)]  # one size per instance
    out: dict[int, list[dict[str, Any]]] = {}
    for r in range(ranks):
        recs = []
        for i in range(n):
            if by_seq and rng.random() < 0.08:  # this rank has no record of instance i
                continue
            pg = "1" if i % 3 == 2 else "0"
            name = ["all_reduce", "all_gather", "broadcast"][i % 3]
            arrival = i * 1000.0 + rng.random() * 300 + (200 if r == 1 and i % 4 == 0 else 0)
            recs.append(
                rec(
                    r,
                    len(recs),
                    arrival,
                    dur_us=rng.choice([5.0, 7.25, 11.125, rng.random() * 20]),
                    name=name,
                    seq=i if by_seq else None,
                    nbytes=sizes[i] if name == "broadcast" else 4096,
                    pg=pg,
                )
            )
            if by_seq and rng.random() < 0.03:  # a doubled record (the first is kept)
                recs.append({**recs[-1], "index": len(recs)})
        if rng.random() < 0.5:
            recs.append({**rec(r, len(recs), n * 1000.0, name="send"), "pg": "0"})
        for k, x in enumerate(recs):
            x["index"] = k
        out[r] = recs
    return out


def dict_waits(dicts: list[dict[str, Any]]) -> dict[int, float]:
    waits: dict[int, float] = {}
    for inst in dicts:
        for rank, w in inst["wait_us"].items():
            waits[int(rank)] = waits.get(int(rank), 0.0) + float(w)
    return waits


@pytest.mark.parametrize("seed", range(40))
def test_every_figure_on_the_arrays_equals_the_loop_over_the_dicts(seed: int) -> None:
    job = random_job(seed)
    table, _warnings = match_collectives(job)
    assert isinstance(table, Instances)
    dicts = table.dicts()
    assert list(table) == dicts
    assert [table[i] for i in range(len(table))] == dicts
    assert table[-1:] == dicts[-1:]
    assert all(tuple(d) == INSTANCE_KEYS for d in dicts)
    assert table.wait_by_rank() == dict_waits(dicts)
    assert straggler_sums(table) == straggler_sums(dicts)
    assert stragglers(table) == stragglers(dicts)
    assert instance_members(job, table) == instance_members(job, dicts)
    assert member_waits(job, table) == member_waits(job, dicts)
    names = ("all_reduce", "all_gather", "broadcast")
    groups_a = [{"name": n, "pg": p} for n in names for p in "01"]
    groups_b = [dict(g) for g in groups_a]
    _add_transfer(groups_a, table)
    _add_transfer(groups_b, dicts)
    assert groups_a == groups_b


def test_a_straggler_is_found_the_same_on_the_table_and_on_dicts() -> None:
    job = {
        r: [rec(r, i, i * 1000.0 + (400.0 if r == 2 else r * 1.5), seq=i) for i in range(50)]
        for r in range(4)
    }
    table, _ = match_collectives(job)
    found = stragglers(table)
    assert [s["rank"] for s in found] == [2]
    assert found == stragglers(table.dicts())
    assert found[0]["times_last"] == 50


def test_the_table_is_a_sequence_of_fresh_dicts() -> None:
    job = {r: [rec(r, i, i * 100.0 + r) for i in range(3)] for r in range(2)}
    table, _ = match_collectives(job)
    assert len(table) == 3
    first = table[0]
    first["wait_us"]["0"] = -1.0
    assert table[0]["wait_us"]["0"] == 1.0  # rank 0 arrived 1 µs before rank 1
    with pytest.raises(IndexError):
        table[3]
    assert table != [*table.dicts(), {}]
    assert Instances() == []
    assert float(np.sum([len(d["wait_us"]) for d in table])) == 6


def test_a_wide_job_sums_the_same_floats() -> None:
    """32 ranks, 400 instances, waits of many digits: numpy's pairwise sum would differ from
    the loop's in the last bits; the table's sums must not."""
    rng = random.Random(7)
    job = {
        r: [rec(r, i, i * 1000.0 + rng.random() * 97.0, seq=i) for i in range(400)]
        for r in range(32)
    }
    table, _ = match_collectives(job)
    dicts = table.dicts()
    assert table.wait_by_rank() == dict_waits(dicts)
    assert straggler_sums(table) == straggler_sums(dicts)
