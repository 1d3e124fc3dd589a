"""Collective records of one rank, matched across ranks, stragglers: on synthetic records and
hand-made Kineto documents (waits and skews checked by hand)."""

from __future__ import annotations

from typing import Any

import pytest
from test_findings_kit import Doc

from opscope.analysis.collective_match import (
    INSTANCE_KEYS,
    collective_columns,
    match_collectives,
    stragglers,
)
from opscope.analysis.collectives import RECORD_KEYS, collective_records
from opscope.analysis.lateness import evidence as lateness_evidence
from opscope.trace import load_document


def rec(
    rank: int,
    index: int,
    arrival_us: float,
    dur_us: float = 10.0,
    *,
    name: str = "all_reduce",
    seq: int | None = None,
    nbytes: int | None = 4096,
    pg: str = "0",
    pg_size: int | None = None,
) -> dict[str, Any]:
    """A record as collective_records writes it (times in microseconds)."""
    arrival = int(arrival_us * 1000)
    end = arrival + int(dur_us * 1000)
    return {
        "rank": rank,
        "name": name,
        "raw_name": f"c10d::{name}",
        "pg": pg,
        "pg_size": pg_size,
        "seq": seq,
        "index": index,
        "bytes": nbytes,
        "dtype": "Float",
        "arrival_ns": arrival,
        "end_ns": end,
        "dur_us": dur_us,
    }


# -- matching --------------------------------------------------------------------------------


def test_seq_matching_and_the_arithmetic() -> None:
    # three ranks, seq numbered; rank 2 lists its records out of order and with other
    # indices (seq wins); rank 1 arrives 30 us late at seq 8, rank 2 is last at seq 9
    by_rank = {
        0: [rec(0, 0, 100.0, 40.0, seq=8), rec(0, 1, 300.0, 25.0, seq=9)],
        1: [rec(1, 0, 130.0, 12.0, seq=8), rec(1, 1, 305.0, 22.0, seq=9)],
        2: [rec(2, 5, 320.0, 6.5, seq=9), rec(2, 4, 110.0, 32.0, seq=8)],
    }
    instances, warnings = match_collectives(by_rank)
    assert warnings == []
    assert [i["seq"] for i in instances] == [8, 9]
    first, second = instances
    assert tuple(first) == INSTANCE_KEYS
    assert first["ranks"] == [0, 1, 2]
    assert first["last_rank"] == 1
    assert first["start_skew_us"] == pytest.approx(30.0)
    assert first["wait_us"] == {"0": 30.0, "1": 0.0, "2": 20.0}
    # ends: 140, 142, 142 -> skew 2
    assert first["end_skew_us"] == pytest.approx(2.0)
    assert first["dur_us"] == pytest.approx(12.0)
    assert first["bytes"] == 4096
    assert (first["name"], first["pg"]) == ("all_reduce", "0")
    assert second["last_rank"] == 2
    assert second["wait_us"] == {"0": 20.0, "1": 15.0, "2": 0.0}
    assert second["start_skew_us"] == pytest.approx(20.0)
    assert second["dur_us"] == pytest.approx(6.5)


def test_index_matching_when_a_rank_has_no_seq() -> None:
    by_rank = {
        0: [rec(0, 0, 0.0, seq=1), rec(0, 1, 50.0, seq=2)],
        1: [rec(1, 0, 5.0), rec(1, 1, 52.0)],
    }
    instances, warnings = match_collectives(by_rank)
    assert warnings == []
    assert [i["seq"] for i in instances] == [0, 1]  # the index
    assert [i["last_rank"] for i in instances] == [1, 1]
    assert instances[0]["wait_us"] == {"0": 5.0, "1": 0.0}


def test_a_tie_names_the_lowest_rank_last() -> None:
    instances, _ = match_collectives({3: [rec(3, 0, 7.0)], 1: [rec(1, 0, 7.0)]})
    assert instances[0]["last_rank"] == 1
    assert instances[0]["ranks"] == [1, 3]


def test_a_type_mismatch_warns_and_stops_the_group() -> None:
    by_rank = {
        r: [
            rec(r, 0, 0.0),
            rec(r, 1, 10.0, name="all_gather" if r == 2 else "all_reduce"),
            rec(r, 2, 20.0),
        ]
        for r in range(4)
    }
    instances, warnings = match_collectives(by_rank)
    assert [i["seq"] for i in instances] == [0]
    assert len(warnings) == 1
    w = warnings[0]
    assert "ranks [2]" in w
    assert "index 1" in w
    assert "all_gather" in w
    assert "stopped" in w
    assert "2 instances" in w


def test_a_size_mismatch_warns_only_where_sizes_must_agree() -> None:
    by_rank = {r: [rec(r, 0, 0.0, nbytes=100 if r == 1 else 64)] for r in range(3)}
    instances, warnings = match_collectives(by_rank)
    assert instances == []
    assert len(warnings) == 1
    assert "ranks [1]" in warnings[0]
    assert "bytes" in warnings[0]
    # all_to_all sizes may differ per rank; an unknown size is never a mismatch
    by_rank = {
        r: [rec(r, 0, 0.0, name="all_to_all", nbytes=100 * (r + 1)), rec(r, 1, 1.0, nbytes=None)]
        for r in range(3)
    }
    by_rank[0][1]["bytes"] = 64
    instances, warnings = match_collectives(by_rank)
    assert warnings == []
    assert [i["bytes"] for i in instances] == [300, 64]


def test_a_missing_rank_is_matched_without_and_named() -> None:
    by_rank = {
        0: [rec(0, 0, 0.0), rec(0, 1, 10.0), rec(0, 2, 20.0)],
        1: [rec(1, 0, 1.0), rec(1, 1, 14.0)],  # no record of index 2
        2: [rec(2, 0, 2.0), rec(2, 1, 11.0), rec(2, 2, 23.0)],
    }
    instances, warnings = match_collectives(by_rank)
    assert [i["ranks"] for i in instances] == [[0, 1, 2], [0, 1, 2], [0, 2]]
    assert instances[2]["wait_us"] == {"0": 3.0, "2": 0.0}
    assert instances[1]["last_rank"] == 1
    assert len(warnings) == 1
    assert "rank 1" in warnings[0]
    assert "1 instance " in warnings[0]
    assert "index 2" in warnings[0]


def test_a_group_with_fewer_ranks_than_its_size_says_so() -> None:
    instances, warnings = match_collectives({0: [rec(0, 0, 0.0, pg_size=2)]})
    assert len(instances) == 1
    assert instances[0]["ranks"] == [0]
    assert instances[0]["wait_us"] == {"0": 0.0}
    assert warnings == ["pg 0: records from 1 of its 2 ranks (0); waits and skews cover those only"]


def test_groups_are_matched_apart_and_point_to_point_not_at_all() -> None:
    by_rank = {
        0: [rec(0, 0, 0.0, pg="0"), rec(0, 0, 5.0, pg="1"), rec(0, 0, 6.0, name="send")],
        1: [rec(1, 0, 3.0, name="recv"), rec(1, 0, 2.0, pg="0"), rec(1, 0, 9.0, pg="1")],
    }
    instances, warnings = match_collectives(by_rank)
    assert warnings == []
    assert [(i["pg"], i["last_rank"], i["start_skew_us"]) for i in instances] == [
        ("0", 1, 2.0),
        ("1", 1, 4.0),
    ]


def test_a_doubled_seq_keeps_the_first() -> None:
    by_rank = {
        0: [rec(0, 0, 0.0, seq=4), rec(0, 1, 9.0, seq=4)],
        1: [rec(1, 0, 1.0, seq=4)],
    }
    instances, warnings = match_collectives(by_rank)
    assert len(instances) == 1
    assert instances[0]["wait_us"] == {"0": 1.0, "1": 0.0}
    assert len(warnings) == 1
    assert "ranks [0]" in warnings[0]


def test_columns_and_dicts_match_alike() -> None:
    by_rank = {r: [rec(r, i, 10.0 * i + r) for i in range(5)] for r in range(3)}
    assert match_collectives(collective_columns(by_rank)) == match_collectives(by_rank)
    assert match_collectives({}) == ([], [])


def _reference(by_rank: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The instances of one group matched by seq, record by record in plain Python."""
    by_key: dict[int, dict[int, dict[str, Any]]] = {}
    for r in sorted(by_rank):
        for x in by_rank[r]:
            by_key.setdefault(int(x["seq"]), {}).setdefault(r, x)
    out = []
    for k in sorted(by_key):
        recs = by_key[k]
        arr = {r: x["arrival_ns"] for r, x in recs.items()}
        end = [x["end_ns"] for x in recs.values()]
        last = max(arr.values())
        out.append(
            {
                "name": "all_reduce",
                "pg": "0",
                "seq": k,
                "ranks": sorted(recs),
                "last_rank": min(r for r, a in arr.items() if a == last),
                "start_skew_us": round((last - min(arr.values())) / 1000.0, 3),
                "end_skew_us": round((max(end) - min(end)) / 1000.0, 3),
                "wait_us": {str(r): round((last - arr[r]) / 1000.0, 3) for r in sorted(recs)},
                "dur_us": min(x["dur_us"] for x in recs.values()),
                "bytes": 4096,
            }
        )
    return out


def test_many_instances_some_ranks_missing_match_record_by_record() -> None:
    # more instances than the matcher makes dicts of at a time, ranks missing here and there
    # (instances with every rank and without straddle its blocks)
    ranks, n = 5, 3 * 4096 + 7
    by_rank = {
        r: [
            rec(r, i, 50.0 * i + ((i * 7 + r * 13) % 11) * 0.137, 2.0 + (i + r) % 3, seq=i)
            for i in range(n)
            if (i * 31 + r) % 97 != 0 or i % 3
        ]
        for r in range(ranks)
    }
    want = _reference(by_rank)
    assert any(len(i["ranks"]) < ranks for i in want)
    got, warnings = match_collectives(by_rank)
    assert got == want
    assert match_collectives(collective_columns(by_rank))[0] == want
    assert len(warnings) == ranks  # each rank misses some instances
    full = [i for i in got if len(i["ranks"]) == ranks]
    # the full instances' rank lists are their own (one changed leaves the others alone)
    full[0]["ranks"].append(99)
    assert full[1]["ranks"] == list(range(ranks))


# -- stragglers ------------------------------------------------------------------------------


def _job(slow: int | None, delay_us: float, n: int = 20, ranks: int = 3) -> list[dict[str, Any]]:
    """Instances of a job where each rank is a little late in turn and ``slow`` is
    ``delay_us`` late at every other collective."""
    by_rank = {
        r: [
            rec(
                r,
                i,
                100.0 * i
                + (3.0 if i % ranks == r else 0.0)
                + (delay_us if r == slow and i % 2 == 0 else 0.0),
                20.0,
            )
            for i in range(n)
        ]
        for r in range(ranks)
    }
    return match_collectives(by_rank)[0]


def test_the_slow_rank_is_the_straggler() -> None:
    found = stragglers(_job(slow=2, delay_us=50.0))
    assert len(found) == 1
    s = found[0]
    assert set(s) == {"rank", "times_last", "caused_wait_us", "own_wait_us", "cause", "evidence"}
    assert s["rank"] == 2
    # late beyond the others' spread (3 us, the one late in turn) at its 10 delayed collectives
    assert s["evidence"]["late_instances"] == 10
    assert s["evidence"]["noise_us"] == pytest.approx(3.0)
    # last at the 10 delayed collectives and at its own turns (i % 3 == 2) among the others
    assert s["times_last"] == 10 + 3
    # delayed at its turn (i = 2, 8, 14): both others wait 53 us; delayed at another's turn
    # (7 times): that rank waits 47 us, the third 50 us; its turn otherwise (i = 5, 11, 17):
    # both wait 3 us
    expected = 3 * 2 * 53.0 + 7 * (47.0 + 50.0) + 3 * 2 * 3.0
    assert s["caused_wait_us"] == pytest.approx(expected)
    assert s["cause"] is None


def test_no_straggler_when_ranks_are_late_in_turn() -> None:
    assert stragglers(_job(slow=None, delay_us=0.0)) == []


def test_a_small_delay_does_not_stand_out() -> None:
    # rank 1 is always last, but by 1 us next to 20 us collectives: not a meaningful share
    by_rank = {r: [rec(r, i, 100.0 * i + r, 20.0) for i in range(10)] for r in range(2)}
    instances, _ = match_collectives(by_rank)
    assert {i["last_rank"] for i in instances} == {1}
    assert stragglers(instances) == []
    assert stragglers([]) == []


def test_own_waits_sum_per_rank() -> None:
    found = stragglers(_job(slow=0, delay_us=500.0, n=6, ranks=2))
    assert [s["rank"] for s in found] == [0]
    # rank 0 is last at i = 0, 2, 4 (delayed at its turn: rank 1 waits 503 us), rank 1 at
    # i = 1, 3, 5 (its turn: rank 0 waits 3 us)
    assert found[0]["times_last"] == 3
    assert found[0]["own_wait_us"] == pytest.approx(3.0 * 3)
    assert found[0]["caused_wait_us"] == pytest.approx(503.0 * 3)
    # two ranks: the noise is how late the other rank is when it is the one last
    assert found[0]["evidence"]["noise_us"] == pytest.approx(3.0)


def test_two_late_collectives_are_too_few_to_name_a_straggler() -> None:
    assert stragglers(_job(slow=0, delay_us=500.0, n=4, ranks=2)) == []


def test_lateness_within_the_jobs_own_noise_names_no_straggler() -> None:
    """Rank 0 is last at most collectives, by 1-2 ms, while the others arrive 3-9 ms apart (a
    control run of four gloo ranks on two shared cores): no straggler; the same rank 15 ms
    late every time is one."""
    others = [(4.5, 2.0, 10.5), (2.9, 1.4, 4.7), (1.1, 2.6, 10.3), (3.9, 0.0, 2.0), (0.6, 7.5, 5.2)]

    def job(late_ms: float) -> list[dict[str, Any]]:
        by_rank: dict[int, list[dict[str, Any]]] = {r: [] for r in range(4)}
        for i, waits in enumerate(others):
            last = 100_000.0 * i + 12_000.0
            by_rank[0].append(rec(0, i, last + late_ms * 1e3, 5_000.0))
            for r, w in enumerate(waits, 1):
                by_rank[r].append(rec(r, i, last - w * 1e3, 5_000.0))
        return match_collectives(by_rank)[0]

    assert stragglers(job(0.0)) == []
    (found,) = stragglers(job(15.0))
    assert found["rank"] == 0 and found["evidence"]["late_instances"] == 5


# -- records from a trace ----------------------------------------------------------------------


def _nccl_rank() -> Doc:
    """One NCCL all_reduce (c10d op > record_param_comms > nccl:all_reduce > launch) and a
    broadcast of an older PyTorch (no collective args: sizes from the recorded shapes)."""
    d = Doc()
    d.step(1, 0.0, 1000.0)
    d.op("c10d::allreduce_", 10.0, 50.0)
    d.op(
        "record_param_comms",
        12.0,
        46.0,
        Collective_name="allreduce",
        In_msg_nelems=1000,
        Out_msg_nelems=1000,
        dtype="BFloat16",
        Process_Group_Name="3",
        Group_size=8,
        Seq=41,
    )
    d.op("nccl:all_reduce", 14.0, 40.0, cat="user_annotation")
    d.launch(20.0, 5.0, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)", 30.0, 200.0)
    d.op("record_param_comms", 70.0, 5.0, Collective_name="wait", In_msg_nelems=0)
    d.op("c10d::broadcast_", 300.0, 50.0, Input_Dims=[[], []], Input_type=["TensorList", ""])
    d.op(
        "nccl:broadcast",
        305.0,
        40.0,
        cat="user_annotation",
        Input_Dims=[[16, 8]],
        Input_type=["c10::Half"],
    )
    d.launch(310.0, 5.0, "ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)", 400.0, 30.0)
    return d


def _ids_by_name(trace: Any) -> dict[str, list[int]]:
    ev = trace.events
    names = ev.column("name").to_pylist()
    out: dict[str, list[int]] = {}
    for name, i in zip(names, ev.column("id").to_pylist(), strict=True):
        out.setdefault(str(name), []).append(int(i))
    return out


def test_records_of_an_nccl_rank() -> None:
    trace = _nccl_rank().trace()
    records = collective_records(trace)
    assert [tuple(r) for r in records] == [RECORD_KEYS] * 2
    ar, bc = records
    assert ar["name"] == "all_reduce"
    assert ar["raw_name"] == "c10d::allreduce_"
    assert (ar["pg"], ar["pg_size"], ar["seq"], ar["index"]) == ("3", 8, 41, 0)
    assert (ar["bytes"], ar["dtype"]) == (2000, "BFloat16")
    # the kernel's start and end: arrival and end of the work
    assert ar["dur_us"] == pytest.approx(200.0)
    assert ar["end_ns"] - ar["arrival_ns"] == 200_000
    assert bc["name"] == "broadcast"
    assert (bc["pg"], bc["pg_size"], bc["seq"], bc["index"]) == ("0", None, None, 0)
    assert (bc["bytes"], bc["dtype"]) == (16 * 8 * 2, "Half")
    assert bc["dur_us"] == pytest.approx(30.0)
    assert bc["arrival_ns"] - ar["arrival_ns"] == 370_000
    # the events: the c10d op (the anchor) and the comm kernel it issued
    ids = _ids_by_name(trace)
    assert ar["event_id"] == ids["c10d::allreduce_"][0]
    assert ar["work_event_ids"] == ids["ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)"]
    assert bc["event_id"] == ids["c10d::broadcast_"][0]
    assert bc["work_event_ids"] == ids["ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)"]


def _gloo_rank(offset_us: float) -> dict[str, Any]:
    """Two gloo all_reduces and a send: host ops on thread 1, the work on gloo's thread 9
    (the second all_reduce's range starts after the next host op: queued), the send's range
    on the calling thread; a stray range whose call is outside the window comes first."""
    d = Doc(gpu=False)
    o = offset_us
    d.op(
        "gloo:all_reduce",
        o + 1.0,
        4.0,
        tid=9,
        cat="user_annotation",
        Input_Dims=[[7]],
        Input_type=["float"],
    )
    d.op(
        "c10d::allreduce_",
        o + 10.0,
        5.0,
        Input_Dims=[[[96, 64]], []],
        Input_type=["TensorList", ""],
    )
    d.op("c10d::allreduce_", o + 20.0, 5.0, Input_Dims=[[[96]], []], Input_type=["TensorList", ""])
    d.op(
        "gloo:all_reduce",
        o + 12.0,
        30.0,
        tid=9,
        cat="user_annotation",
        Input_Dims=[[96, 64]],
        Input_type=["float"],
    )
    d.op(
        "gloo:all_reduce",
        o + 45.0,
        8.0,
        tid=9,
        cat="user_annotation",
        Input_Dims=[[96]],
        Input_type=["float"],
    )
    d.op("c10d::send", o + 60.0, 3.0, Input_Dims=[[[4]], [], []], Input_type=["TensorList"])
    d.op(
        "gloo:send", o + 61.0, 9.0, cat="user_annotation", Input_Dims=[[4]], Input_type=["long int"]
    )
    doc = d.doc()
    doc["distributedInfo"] = {
        "backend": "gloo",
        "rank": 0,
        "world_size": 2,
        "pg_config": [{"pg_name": "0", "pg_size": 2, "ranks": [0, 1]}],
    }
    return doc


def test_records_of_a_gloo_rank_link_the_work_thread() -> None:
    trace = load_document(_gloo_rank(0.0))
    records = collective_records(trace)
    assert [(r["name"], r["raw_name"], r["index"]) for r in records] == [
        ("all_reduce", "gloo:all_reduce", 0),  # the stray range: a record of its own
        ("all_reduce", "c10d::allreduce_", 1),
        ("all_reduce", "c10d::allreduce_", 2),
        ("send", "c10d::send", 0),  # point-to-point: counted apart
    ]
    stray, big, small, send = records
    assert stray["bytes"] == 28
    assert (big["bytes"], big["dtype"], big["pg"], big["pg_size"]) == (96 * 64 * 4, "Float", "0", 2)
    # arrival and end of the gloo range linked first in, first out
    assert (big["arrival_ns"] - stray["arrival_ns"], big["dur_us"]) == (11_000, 30.0)
    assert (small["arrival_ns"] - stray["arrival_ns"], small["dur_us"]) == (44_000, 8.0)
    assert small["bytes"] == 96 * 4
    assert (send["bytes"], send["dtype"], send["dur_us"]) == (32, "Long", 9.0)
    # the events: a stray range is its own anchor and work; a call names its linked range;
    # the send its nested one
    ids = _ids_by_name(trace)
    ranges, calls = ids["gloo:all_reduce"], ids["c10d::allreduce_"]
    assert (stray["event_id"], stray["work_event_ids"]) == (ranges[0], [ranges[0]])
    assert (big["event_id"], big["work_event_ids"]) == (calls[0], [ranges[1]])
    assert (small["event_id"], small["work_event_ids"]) == (calls[1], [ranges[2]])
    assert (send["event_id"], send["work_event_ids"]) == (ids["c10d::send"][0], ids["gloo:send"])


def test_records_of_a_trace_without_collectives() -> None:
    d = Doc()
    d.op("aten::mm", 0.0, 10.0)
    assert collective_records(d.trace()) == []


def test_records_of_a_step_window() -> None:
    d = Doc()
    for step, t0 in ((1, 0.0), (2, 1000.0)):
        d.step(step, t0, 900.0)
        d.op("c10d::allreduce_", t0 + 10.0, 50.0)
        d.op(
            "record_param_comms",
            t0 + 12.0,
            40.0,
            Collective_name="allreduce",
            In_msg_nelems=10,
            Out_msg_nelems=10,
            dtype="Float",
        )
        d.launch(t0 + 20.0, 5.0, "ncclKernel_AllReduce_RING_LL_Sum_float", t0 + 30.0, 100.0)
    trace = d.trace()
    assert [r["index"] for r in collective_records(trace)] == [0, 1]
    (only,) = collective_records(trace, (2, 2))
    assert only["index"] == 0
    assert only["arrival_ns"] - collective_records(trace)[0]["arrival_ns"] == 1_000_000


def test_a_rank_late_once_a_step_keeps_its_claim_against_hairline_lateness() -> None:
    """Rank 2 is 80 ms late before each step's first of four collectives; at the others,
    ranks 0 and 1 are in turn a little late, just over the others' spread, as often as rank
    2 is late: it is the straggler (half the lateness beyond noise by count, nearly all of it
    by time). Without the 80 ms, nobody is."""
    jitter = [(0.0, 5.0, 9.0), (400.0, 0.0, 8.0), (0.0, 450.0, 3.0), (420.0, 6.0, 0.0)]

    def job(delay_us: float) -> list[dict[str, Any]]:
        by_rank: dict[int, list[dict[str, Any]]] = {r: [] for r in range(3)}
        for step in range(3):
            for k in range(4):
                i = 4 * step + k
                base = 200_000.0 * i
                for r in range(3):
                    late = jitter[k][r] + (delay_us if (r == 2 and k == 0) else 0.0)
                    by_rank[r].append(rec(r, i, base + late + 3.0 * ((i + r) % 3), 2_000.0))
        return match_collectives(by_rank)[0]

    (found,) = stragglers(job(80_000.0))
    ev = found["evidence"]
    assert found["rank"] == 2
    assert ev["late_instances"] == 3
    assert int(ev["test"].split(" late beyond noise in all")[0].rsplit(", ", 1)[-1]) == 6
    assert stragglers(job(0.0)) == []


def _waits(rows: list[tuple[float, ...]]) -> list[dict[str, Any]]:
    """Matched instances from each instance's arrivals (µs, one per rank), 2 µs long."""
    by_rank: dict[int, list[dict[str, Any]]] = {r: [] for r in range(len(rows[0]))}
    for i, arrivals in enumerate(rows):
        for r, a in enumerate(arrivals):
            by_rank[r].append(rec(r, i, 1_000_000.0 * i + a, 2.0))
    return match_collectives(by_rank)[0]


def test_lateness_no_later_than_the_others_when_last_is_noise() -> None:
    """Arrivals (ms) shaped like a control run of four gloo ranks on two shared cores: rank 2
    is last at 4 of 5 collectives by about 1.5 ms, over the median spread of the others'
    arrivals (1.4 ms) but not over how late rank 0 was when it was the one last (1.6 ms):
    noise, no claim. Rank 2 late by 15 ms instead is a straggler."""
    arrivals = [
        (6.0, 3.8, 4.4, 2.2),
        (3.5, 0.0, 5.0, 1.0),
        (2.2, 1.0, 3.7, 0.9),
        (1.3, 0.0, 4.3, 0.8),
        (0.0, 1.4, 2.9, 1.3),
    ]
    noisy = lateness_evidence(_waits([tuple(1e3 * a for a in row) for row in arrivals]))
    assert noisy[2]["late_instances"] <= 1 and not noisy[2]["above_noise"]
    assert noisy[2]["noise_us"] == pytest.approx(1600.0)
    assert "when one was last" in noisy[2]["test"]
    slow = [
        tuple(1e3 * (a + (13.0 if r == 2 else 0.0)) for r, a in enumerate(row)) for row in arrivals
    ]
    late = lateness_evidence(_waits(slow))
    assert late[2]["late_instances"] == 5 and late[2]["above_noise"]
    assert "the median spread of the other ranks' arrivals" in late[2]["test"]


def test_a_rank_late_by_far_fewer_times_keeps_its_claim_by_time() -> None:
    """Rank 2 is 80 ms late at 3 collectives; rank 0 is 5 ms late at 5 (beyond the others'
    lateness when one was last, rank 1 by 1 ms at 5 more): by count rank 2 holds 3 of the 8
    lateness instances beyond noise, by time nearly all of it, and keeps its claim."""
    rows: list[tuple[float, ...]] = []
    rows += [(0.0, 0.0, 80_000.0)] * 3
    rows += [(5_000.0, 0.0, 0.0)] * 5
    rows += [(0.0, 1_000.0, 0.0)] * 5
    seen = lateness_evidence(_waits(rows))
    assert seen[2]["late_instances"] == 3 and seen[0]["late_instances"] == 5
    assert seen[2]["above_noise"]  # 3 of 8 by count, 240 of 265 ms by time
    assert int(seen[2]["test"].split(" late beyond noise in all")[0].rsplit(", ", 1)[-1]) == 8
