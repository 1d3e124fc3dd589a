"""One collective vocabulary (:mod:`opscope.trace.commnames`) for the classification of events
and for the collective records: every spelling that the records' parser
(``analysis.collectives._collective_type``, now gone) and the classification's
(``collective_of_host_op``) knew has one answer, and a kernel of a collective names the same
collective as the host op that issued it."""

from __future__ import annotations

import pytest
from test_findings_kit import Doc

from opscope.analysis import collectives
from opscope.analysis.collectives import collective_records
from opscope.analysis.comm import is_comm_op
from opscope.trace import load_document
from opscope.trace.commnames import (
    COLLECTIVES,
    OP_PREFIXES,
    RANGE_PREFIXES,
    collective_of,
    collective_of_host_op,
    host_spelling,
    is_wait,
)

# Every compact spelling the two parsers knew (the records' table had no underscores, the
# classification's had both), with the collective it names.
SPELLINGS: dict[str, str] = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "allgatherv": "all_gather",
    "reducescatter": "reduce_scatter",
    "reduce_scatter": "reduce_scatter",
    "reducescatterv": "reduce_scatter",
    "alltoall": "all_to_all",
    "all_to_all": "all_to_all",
    "alltoallv": "all_to_all",
    "all_to_allv": "all_to_all",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv",
    "recv_any_source": "recv",
    "recvAnySource": "recv",
    "sendrecv": "send_recv",
    "send_recv": "send_recv",
    "barrier": "barrier",
    "monitoredbarrier": "barrier",
    "monitored_barrier": "barrier",
}
# the variants both parsers cut (one without underscores, one with)
SUFFIXES = ("", "_coalesced", "_into_tensor", "_tensor", "_base", "_oop", "_single", "_inplace")
# NCCL's kernel spelling of each collective, in both parsers
NCCL_WORDS = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "AllToAll": "all_to_all",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "SendRecv": "send_recv",
    "Send": "send",
    "Recv": "recv",
}


def _host_names() -> list[tuple[str, str]]:
    out = []
    for spelling, collective in SPELLINGS.items():
        for suffix in SUFFIXES:
            for prefix in ("", *OP_PREFIXES, *RANGE_PREFIXES):
                for lead, trail in (("", ""), ("_", "_")):
                    out.append((f"{prefix}{lead}{spelling}{suffix}{trail}", collective))
    return out


HOST_NAMES = _host_names()


def test_every_host_spelling_has_one_answer() -> None:
    wrong = [
        (n, collective_of_host_op(n), c) for n, c in HOST_NAMES if collective_of_host_op(n) != c
    ]
    assert wrong == []
    # the records name a call by the same function: its kind is the classification's answer
    assert [n for n, c in HOST_NAMES if collectives._kind(n) != c] == []
    # and the classification counts every one as a communication op, never as a wait
    assert [n for n, _ in HOST_NAMES if not is_comm_op(n) or is_wait(n)] == []
    assert {c for _, c in HOST_NAMES} == set(COLLECTIVES)


@pytest.mark.parametrize(
    ("name", "collective"),
    [
        # where the two parsers disagreed, and the answer kept
        ("nccl:send 0->1", "send"),  # records: "send0->1" (spaces were removed, not cut)
        ("nccl:recv 1<-0", "recv"),
        ("_broadcast_oop", "broadcast"),  # records: "broadcastoop" (no _oop variant)
        ("nccl:_reduce_oop", "reduce"),
        ("hccl:all_reduce", "all_reduce"),  # classification: None (no hccl: prefix)
        ("hccl:broadcast", "broadcast"),
        ("sendrecv", "send_recv"),  # classification: None
        ("bcast", "broadcast"),
        ("allgatherv", "all_gather"),
        ("allreduce_inplace", "all_reduce"),
    ],
)
def test_where_the_parsers_disagreed(name: str, collective: str) -> None:
    assert collective_of_host_op(name) == collective
    assert collectives._kind(name) == collective


@pytest.mark.parametrize(
    "name",
    ["wait", "wait_tensor", "_c10d_functional::wait_tensor", "c10d_functional::wait", "nccl:wait"],
)
def test_waits(name: str) -> None:
    assert is_wait(name)
    assert collective_of_host_op(name) is None


@pytest.mark.parametrize(
    ("name", "spelling"),
    [
        ("something_new", "somethingnew"),  # a collective the vocabulary does not know
        ("nccl:coalesced", "coalesced"),
        ("aten::gather", ""),  # another namespace
        ("nccl:", ""),
    ],
)
def test_unknown_names_keep_their_spelling(name: str, spelling: str) -> None:
    assert collective_of_host_op(name) is None
    assert not is_wait(name)
    assert host_spelling(name) == spelling
    assert collectives._kind(name) == spelling


@pytest.mark.parametrize(("word", "collective"), NCCL_WORDS.items())
def test_kernels_name_the_collective_of_their_host_op(word: str, collective: str) -> None:
    for kernel in (
        f"ncclKernel_{word}_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        f"ncclDevKernel_{word}_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        f"nccl{word}RingLLKernel_sum_f32",
    ):
        assert collective_of(kernel) == collective, kernel
    host = {"send_recv": "sendrecv"}.get(collective, collective)
    assert collective_of_host_op(f"nccl:{host}") == collective


def test_records_and_classification_agree_on_a_trace() -> None:
    # a call whose Collective name is an out-of-place broadcast, and a send range with peers:
    # the records name them as the classification does
    doc = Doc()
    doc.op("c10d::broadcast_", 0, 100)
    doc.op("record_param_comms", 5, 90, Collective_name="_broadcast_oop")
    doc.op("nccl:send 0->1", 200, 300)
    trace = load_document(doc.doc())
    names = [r["name"] for r in collective_records(trace)]
    assert names == ["broadcast", "send"]
    assert [collective_of_host_op(n) for n in ("_broadcast_oop", "nccl:send 0->1")] == names
