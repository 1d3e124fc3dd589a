"""The CUDA/HIP graph rules (graph_host_gaps, graph_input_copies, graph_recapture) and the
fusion rule over captured ops, each on a hand-made trace where it must fire and one where it
must not."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_findings_kit import context, run_rule

from graph_docs import GraphDoc, Node
from opscope.trace.graphs import attribute
from opscope.trace.graphs.captures import find_captures

KERNELS = [("gemm", 60.0), ("norm", 20.0), ("act", 20.0)]


def serving_loop(overlapped: bool) -> GraphDoc:
    """Six decode steps, one replay each (100 µs of device work); between them the host
    samples for 200 µs.  ``overlapped``: the next launch is queued before the replay ends."""
    d = GraphDoc()
    t = 0.0
    for i in range(6):
        d.op("execute_8_context_0", t, 60 if overlapped else 260, cat="user_annotation")
        if overlapped:
            d.replay(t + 1, KERNELS, device_at=100 * i + 10)
            t += 100
        else:
            end = d.replay(t + 1, KERNELS)
            d.op("sample", end + 2, 196)
            t = end + 200
    return d


def test_host_gaps_between_replays_fire_when_the_device_waits() -> None:
    (f,) = run_rule("graph_host_gaps", serving_loop(overlapped=False).trace())
    assert f.details["gaps"] == 5 and f.details["replays"] == 6
    assert f.time_at_stake_us > 5 * 150
    assert f.details["host_ops"][0]["op"] == "sample"
    assert f.evidence and f.evidence[0].event_ids


def test_no_host_gap_finding_when_the_host_keeps_ahead() -> None:
    assert run_rule("graph_host_gaps", serving_loop(overlapped=True).trace()) == []


def copies_then_replays(every: bool) -> GraphDoc:
    d = GraphDoc()
    for i in range(4):
        t = 1000.0 * i
        d.op("CompiledFunction", t, 300)
        if every or i != 2:
            d.op("aten::copy_", t + 10, 20)
            corr = d.runtime("hipMemcpyAsync", t + 12, 5)
            d.device("Memcpy DtoD (Device -> Device)", t + 20, 80, corr, bytes=4 << 20)
        d.replay(t + 50, [("gemm", 100.0)], device_at=t + 110)
    return d


def test_input_copies_before_every_replay() -> None:
    (f,) = run_rule("graph_input_copies", copies_then_replays(every=True).trace())
    assert f.details["replays"] == 4 and f.details["copies"] == 4
    assert f.time_at_stake_us == 4 * 80
    assert f.details["bytes"] == 4 * (4 << 20)
    assert "CompiledFunction" in f.title


def test_no_input_copy_finding_when_a_replay_reads_its_inputs_in_place() -> None:
    assert run_rule("graph_input_copies", copies_then_replays(every=False).trace()) == []


def test_a_graph_captured_again_after_replays() -> None:
    d = GraphDoc()
    t = d.capture(0, [Node("aten::mm", "gemm")])
    d.replay(t + 10, [("gemm", 10.0)])
    d.capture(t + 100, [Node("aten::mm", "gemm")])  # the same graph, captured again
    (f,) = run_rule("graph_recapture", d.trace())
    assert [c["again"] for c in f.details["windows"]] == [False, True]
    assert f.details["again"] == 1 and f.details["instantiations"] == 2
    assert f.severity != "info"


def test_no_recapture_finding_without_a_capture() -> None:
    assert run_rule("graph_recapture", serving_loop(overlapped=False).trace()) == []


def test_reinstantiated_graph_ids_count_as_captured_again() -> None:
    d = GraphDoc(rocm=False)
    d.replay(0, [("gemm", 10.0)], graph_id=1, node_ids=[1])
    d.replay(100, [("gemm", 10.0)], graph_id=2, node_ids=[1])
    (f,) = run_rule("graph_recapture", d.trace())
    assert f.details["reinstantiated_graphs"] == [{"kernels": 1, "graph_ids": [1, 2]}]


RMSNORM = ["aten::mul", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"]


def test_fusion_sees_the_captured_ops_of_a_replayed_graph() -> None:
    """A naive RMSNorm captured in a graph: the replays are its only device work.  Without
    the capture the kernels belong to the replay's op; with it, to the six captured ops,
    which the fusion rule reports as one elementwise run."""
    cap = GraphDoc()
    cap.capture(1, [Node(op, f"k_{i}") for i, op in enumerate(RMSNORM)])
    e = GraphDoc()
    for i in range(20):
        e.op("forward", 1000.0 * i, 400, cat="user_annotation")
        e.replay(1000.0 * i + 1, [(f"k_{j}", 30.0) for j in range(6)])
    plain = e.trace()
    assert run_rule("fusion", plain) == []
    merged = attribute(plain, captures=find_captures(cap.trace(), source="cap"))
    found = run_rule("fusion", merged)
    assert found, "the captured elementwise run is a fusion finding"
    assert any("aten::rsqrt" in f.title or "aten::rsqrt" in str(f.details) for f in found)


def _bytes_oracle(v: Any, rows: np.ndarray) -> int:
    """The bytes of the device copies under ``rows``: each device copy's launching op walked
    up until one of ``rows`` (the rule's first form, a walk per set of copies)."""
    idx = v.index
    copies = np.flatnonzero(idx.is_work & idx.kind.eq("memcpy") & (idx.op >= 0) & v.in_window)
    wanted = set(rows.tolist())
    total = 0
    for r in copies.tolist():
        at = int(idx.op[r])
        while at >= 0 and at not in wanted:
            at = int(idx.tree_parent[at])
        if at < 0:
            continue
        b = v.args(r).get("bytes")
        if isinstance(b, int) or (isinstance(b, str) and b.isdigit()):
            total += int(b)
    return total


@pytest.mark.parametrize(
    "name", ["cuda/a100_cudagraph_rank0_of16.json.gz", "rocm/mi300x_models/owlv2_large.json.gz"]
)
def test_copy_bytes_read_once_match_a_walk_per_set(shared: Any, name: str) -> None:
    """The copies' bytes, read once for the window, give each set of copies what walking
    every device copy up to that set gives: all the outermost copies, each one, random sets,
    and the copy ops nested in others (a device copy under two sets' copies counts for
    both)."""
    from opscope.analysis.findings._view import view
    from opscope.analysis.findings.graph_input_copies import COPY_OPS, _copies, _CopyBytes
    from opscope.trace import load

    trace = load(shared(name), cache=False)
    v = view(context(trace))
    copies = _copies(v)
    every = np.flatnonzero(v.is_op & v.index.name.isin(COPY_OPS) & v.in_window)
    assert len(copies) and len(every) >= len(copies)
    got = _CopyBytes(v, every)
    rng = np.random.default_rng(7)
    sets = [every, copies, *(every[i : i + 1] for i in range(min(len(every), 25)))]
    sets += [rng.choice(every, size=max(1, len(every) // k), replace=False) for k in (2, 5, 9)]
    found = [got.of(rows) for rows in sets]
    assert found == [_bytes_oracle(v, rows) for rows in sets]
    assert found[0] > 0  # the trace's device copies record their bytes


def test_copy_bytes_of_nested_copies_count_once_for_either() -> None:
    """A copy op inside another (``_foreach_copy_`` around ``copy_``): its device copy counts
    for a set holding either or both, once, as the walk per set counts it."""
    from opscope.analysis.findings._view import view
    from opscope.analysis.findings.graph_input_copies import COPY_OPS, _CopyBytes

    d = GraphDoc()
    for i in range(3):
        t = 1000.0 * i
        d.op("CompiledFunction", t, 300)
        d.op("aten::_foreach_copy_", t + 5, 40)
        d.op("aten::copy_", t + 10, 20)
        corr = d.runtime("hipMemcpyAsync", t + 12, 5)
        d.device("Memcpy DtoD (Device -> Device)", t + 20, 80, corr, bytes=(i + 1) << 20)
        d.replay(t + 50, [("gemm", 100.0)], device_at=t + 110)
    v = view(context(d.trace()))
    every = np.flatnonzero(v.is_op & v.index.name.isin(COPY_OPS))
    outer = every[v.index.name.isin(["aten::_foreach_copy_"])[every]]
    inner = every[v.index.name.isin(["aten::copy_"])[every]]
    assert len(outer) == len(inner) == 3
    assert (v.index.tree_parent[inner] == outer).all()  # nested, as built
    got = _CopyBytes(v, every)
    for rows in (every, outer, inner, outer[:1], inner[1:], np.array([outer[0], inner[0]])):
        assert got.of(rows) == _bytes_oracle(v, rows)
    assert got.of(every) == got.of(outer) == got.of(inner) == 6 << 20
    assert got.of(np.array([outer[0], inner[0]])) == 1 << 20
