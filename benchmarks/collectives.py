"""Matching collectives across ranks: the time of ``match_collectives`` and ``stragglers``.

    python benchmarks/collectives.py                          # 10^5 instances x 64 ranks
    python benchmarks/collectives.py --instances 20000 --ranks 128 --dict-instances 5000

Synthetic records: every rank runs the same program of collectives (all_reduce, all_gather,
reduce_scatter in turn, sizes by type, ``seq`` numbered), arrivals jittered per rank, one rank
``--slow`` late at every tenth collective (a straggler), and ``--missing`` records dropped at
random (ranks missing from some instances).  Timed, best of ``--repeat``:

* ``match (columns)`` - :func:`match_collectives` on the records as columns
  (:class:`CollectiveColumns`): the matching itself, ``instances x ranks`` records, into
  :class:`~opscope.analysis.instance_table.Instances` (the instances and their waits as
  arrays); the first call is printed too (it also pays for the process's fresh memory: the
  matching drops each record-sized array once reduced, so little of it is fresh);
* ``stragglers`` - :func:`stragglers` over the instances it returned (on the arrays);
* ``instance dicts`` - the report's ``distributed.instances``: one dict per instance with its
  wait per rank (10^5 dicts of 64 waits each), as the JSON report holds them;
* ``end to end`` - what a job report does with them: the matching, the stragglers, the
  instance dicts and those written as JSON (``orjson.dumps``, as the JSON report writes
  them), in one go; the first such run is printed too;
* ``columns from dicts`` - :func:`collective_columns` on record dicts (what rank reports hold),
  at ``--dict-instances`` instances (dicts of every record of a large job take gigabytes), with
  the cost per record, and ``match (dicts)`` end to end at that size.

Nothing is asserted; the target is the matching (its first call) under a second at
10^5 x 64.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from opscope.analysis.collective_match import (
    CollectiveColumns,
    collective_columns,
    match_collectives,
    stragglers,
)

NAMES = ["all_reduce", "all_gather", "reduce_scatter"]
BYTES = [4 << 20, 1 << 20, 2 << 20]


def synthetic(
    n: int, ranks: int, slow: int, missing: float, seed: int = 0
) -> tuple[CollectiveColumns, np.ndarray]:
    """Columns of ``n`` collectives on ``ranks`` ranks (see the module docstring) and the mask
    of the records kept."""
    rng = np.random.default_rng(seed)
    seq = np.tile(np.arange(n, dtype=np.int64), ranks)
    rank = np.repeat(np.arange(ranks, dtype=np.int64), n)
    name = seq % len(NAMES)
    base = seq * 2_000_000  # one collective every 2 ms
    arrival = base + rng.integers(0, 50_000, size=n * ranks)
    late = (rank == slow) & (seq % 10 == 0)
    arrival[late] += 1_000_000
    last = np.full(n, 0, dtype=np.int64)
    np.maximum.at(last, seq, arrival)
    transfer = 200_000
    end = last[seq] + transfer + rng.integers(0, 5_000, size=n * ranks)
    keep = rng.random(n * ranks) >= missing
    cols = CollectiveColumns(
        rank=rank[keep],
        pg=np.zeros(int(keep.sum()), dtype=np.int64),
        pgs=["0"],
        name=name[keep],
        names=list(NAMES),
        seq=seq[keep],
        has_seq=np.ones(int(keep.sum()), dtype=bool),
        index=seq[keep],
        bytes=np.asarray(BYTES, dtype=np.int64)[name][keep],
        arrival=arrival[keep],
        end=end[keep],
        dur_us=((end - arrival) / 1000.0)[keep],
        pg_size=np.full(int(keep.sum()), ranks, dtype=np.int64),
    )
    return cols, keep


def as_dicts(cols: CollectiveColumns) -> dict[int, list[dict[str, Any]]]:
    """The records of ``cols`` as :func:`collective_records` dicts, per rank."""
    out: dict[int, list[dict[str, Any]]] = {}
    for i in range(len(cols)):
        r = int(cols.rank[i])
        out.setdefault(r, []).append(
            {
                "rank": r,
                "name": cols.names[int(cols.name[i])],
                "raw_name": "c10d::x",
                "pg": "0",
                "pg_size": int(cols.pg_size[i]),
                "seq": int(cols.seq[i]),
                "index": int(cols.index[i]),
                "bytes": int(cols.bytes[i]),
                "dtype": "Float",
                "arrival_ns": int(cols.arrival[i]),
                "end_ns": int(cols.end[i]),
                "dur_us": float(cols.dur_us[i]),
            }
        )
    return out


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """The first and the best wall time of ``repeat`` calls and the last result (the
    previous result is dropped before each call).  The first call also pays for the process's
    fresh memory (page faults), the best is the steady state."""
    times, out = [], None
    for _ in range(repeat):
        out = None
        gc.collect()
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return times[0], min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", type=int, default=100_000)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--slow", type=int, default=5, help="the straggler rank")
    ap.add_argument("--missing", type=float, default=0.0001, help="share of records dropped")
    ap.add_argument("--dict-instances", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    cols, _ = synthetic(a.instances, a.ranks, a.slow, a.missing)
    first, t_match, (instances, warnings) = best(lambda: match_collectives(cols), a.repeat)
    _, t_strag, found = best(lambda: stragglers(instances), a.repeat)
    print(f"{a.instances} instances x {a.ranks} ranks ({len(cols)} records)")
    print(
        f"  match (columns)      {t_match * 1e3:8.1f} ms  (first call {first * 1e3:.0f} ms)"
        f"  -> {len(instances)} instances"
    )
    print(f"  stragglers           {t_strag * 1e3:8.1f} ms  -> {[s['rank'] for s in found]}")
    _, t_dicts, _ = best(instances.dicts, a.repeat)
    print(f"  instance dicts       {t_dicts * 1e3:8.1f} ms")
    print(f"  warnings: {len(warnings)} (missing records)")

    def end_to_end() -> int:
        found, _warnings = match_collectives(cols)
        stragglers(found)
        return len(orjson.dumps(found.dicts()))

    instances = found = None
    first, t_all, size = best(end_to_end, a.repeat)
    print(
        f"  end to end           {t_all * 1e3:8.1f} ms  (first call {first * 1e3:.0f} ms)"
        f"  match + stragglers + JSON ({size / 1e6:.0f} MB)"
    )

    small, _ = synthetic(a.dict_instances, a.ranks, a.slow, a.missing)
    dicts = as_dicts(small)
    _, t_cols, _ = best(lambda: collective_columns(dicts), a.repeat)
    _, t_dicts, _ = best(lambda: match_collectives(dicts), a.repeat)
    per = t_cols / max(1, len(small)) * 1e9
    print(f"{a.dict_instances} instances x {a.ranks} ranks as dicts ({len(small)} records)")
    print(f"  columns from dicts   {t_cols * 1e3:8.1f} ms  ({per:.0f} ns per record)")
    print(f"  match (dicts)        {t_dicts * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
