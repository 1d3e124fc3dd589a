"""The capture merge on hand-made traces: which capture a replay ran, how its kernels are
paired with the capture's launches, and what the analysis then sees."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest

from graph_docs import GraphDoc, Node
from opscope.analysis.pipeline import analyze
from opscope.errors import UsageError
from opscope.trace import load, load_document
from opscope.trace.graphs import attribute, capture_paths, find_replays, with_captures
from opscope.trace.graphs.align import BY_NAME, POSITIONAL, SCAN, STREAMS, pair
from opscope.trace.graphs.captures import find_captures
from opscope.trace.graphs.sources import CaptureFile

BF16 = ["c10::BFloat16", "c10::BFloat16"]


def ops_of(report_doc: dict) -> dict[str, dict]:
    return {o["name"]: o for o in report_doc["ops"]}


def kernel_ops(trace) -> dict[str, set[str]]:
    k = trace.kernels
    out: dict[str, set[str]] = {}
    for name, op in zip(k.column("name").to_pylist(), k.column("op_name").to_pylist(), strict=True):
        out.setdefault(name, set()).add(op)
    return out


def test_a_graph_recaptured_mid_trace_attributes_each_replay_to_its_own_capture() -> None:
    d = GraphDoc()
    t = d.capture(0, [Node("aten::mm", "gemm_64"), Node("aten::add", "add_k")])
    for i in range(2):
        d.replay(100 + 50 * i, [("gemm_64", 10), ("add_k", 2)])
    # captured again (a new shape): the same launches now come from other ops
    t = d.capture(300, [Node("aten::addmm", "gemm_64"), Node("aten::relu", "add_k")])
    for i in range(3):
        d.replay(t + 100 + 50 * i, [("gemm_64", 20), ("add_k", 4)])
    merged = attribute(d.trace())
    info = merged.graph_capture
    assert info is not None
    assert info.replays == 5 and info.matched_replays == 5 and info.captures == 2
    assert info.replay_capture == [0, 0, 1, 1, 1]
    assert info.matched_kernels == 10 and info.unmatched_kernels == 0
    ops = ops_of(analyze(merged).to_dict())
    # each captured op: its one call at capture, then one per replay of its graph
    assert ops["aten::mm"]["calls"] == 3 and ops["aten::mm"]["replayed_calls"] == 2
    assert ops["aten::mm"]["device_self_us"] == pytest.approx(20)
    assert ops["aten::addmm"]["calls"] == 4 and ops["aten::addmm"]["device_self_us"] == 60
    assert ops["aten::relu"]["device_self_us"] == pytest.approx(12)
    # the copies add calls, never host time: the ops captured keep their one capture-time call
    assert ops["aten::addmm"]["replayed_calls"] == 3 and ops["aten::addmm"]["graph_replayed"]
    assert ops["aten::addmm"]["cpu_total_us"] == pytest.approx(4.0)


def test_without_a_capture_the_replays_are_units_of_the_kernel_table() -> None:
    d = GraphDoc()
    for i in range(4):
        d.replay(100 * i, [("gemm_64", 10), ("add_k", 2), ("add_k", 2)])
    d.replay(500, [("other", 1)])
    trace = d.trace()
    assert with_captures(trace, None) is trace  # nothing to attribute with
    doc = analyze(trace).to_dict()
    units = [k for k in doc["kernels"] if "graph" in k]
    assert [u["name"] for u in units] == ["hipGraphLaunch #1", "hipGraphLaunch #2"]
    u = units[0]
    assert u["calls"] == 4 and u["graph"]["kernels_per_replay"] == 3
    assert u["device_us"] == pytest.approx(56) and u["mean_us"] == pytest.approx(14)
    # back to back every 100 µs, each 14 µs long after a 5 µs launch: 86 µs idle between
    assert u["graph"]["idle_between_us"] == pytest.approx(86)
    assert [r["idle_before_us"] for r in u["replays"]] == [None, 86, 86, 86]
    assert {k["name"]: k["per_replay"] for k in u["kernels"]} == {"gemm_64": 1, "add_k": 2}
    assert "graph-capture" in u["hint"]
    # the kernel rows are still there (the unit groups them, after them)
    assert doc["kernels"][0]["name"] == "gemm_64" and "graph" not in doc["kernels"][0]


def test_graph_node_ids_order_the_replay_whatever_the_streams_did() -> None:
    """CUDA: the capture's launches name no kernel, the replay's kernels ran on two streams
    out of capture order; their node ids give the order back."""
    d = GraphDoc(rocm=False)
    d.capture(0, [Node("aten::mm", "k"), Node("aten::mul", "k"), Node("aten::add", "k")])
    # node 12 (aten::add) ran first, on another stream
    d.replay(
        100,
        [("gemm", 10), ("mul_k", 3), ("add_k", 2)],
        streams=[7, 7, 9],
        graph_id=4,
        node_ids=[10, 11, 12],
        starts=[110, 121, 105],
    )
    trace = d.trace()
    (r,) = find_replays(trace.index)
    assert r.ordered_by == "graph_node_ids" and r.graph_id == 4
    assert r.names == ("gemm", "mul_k", "add_k")
    merged = attribute(trace)
    assert merged.graph_capture is not None
    assert merged.graph_capture.method == "graph_node_ids"
    assert kernel_ops(merged) == {
        "gemm": {"aten::mm"},
        "mul_k": {"aten::mul"},
        "add_k": {"aten::add"},
    }


def test_without_node_ids_several_streams_are_paired_stream_by_stream() -> None:
    """ROCm, two streams: in start order the replay interleaves them; each stream in order
    takes the capture's launches that name its kernels."""
    d = GraphDoc()
    d.capture(0, [Node("a_op", "a1"), Node("b_op", "b1"), Node("a_op2", "a2"), Node("b_op2", "b2")])
    d.replay(
        100,
        [("a1", 5), ("a2", 5), ("b1", 2), ("b2", 2)],
        streams=[1, 1, 2, 2],
        starts=[110, 115, 111, 113],
    )
    merged = attribute(d.trace())
    assert merged.graph_capture is not None
    assert merged.graph_capture.pairings == {STREAMS: 1}
    assert kernel_ops(merged) == {"a1": {"a_op"}, "a2": {"a_op2"}, "b1": {"b_op"}, "b2": {"b_op2"}}


def test_a_lost_kernel_record_leaves_the_rest_paired() -> None:
    d = GraphDoc()
    d.capture(0, [Node("x", "k1"), Node("y", "k2"), Node("z", "k3")])
    d.replay(100, [("k1", 1), ("k3", 1)])  # k2's record is missing
    merged = attribute(d.trace())
    info = merged.graph_capture
    assert info is not None and info.pairings == {SCAN: 1}
    assert info.matched_kernels == 2 and info.unmatched_kernels == 0
    assert kernel_ops(merged) == {"k1": {"x"}, "k3": {"z"}}


def test_pairing_stages() -> None:
    k = "kernel"
    assert pair([(k, "a"), (k, "b")], [(k, "a"), (k, "b")]) == ([0, 1], POSITIONAL)
    # the scheduler ran independent nodes the other way round
    assert pair([(k, "b"), (k, "a")], [(k, "a"), (k, "b")]) == ([1, 0], BY_NAME)
    # a capture call with no node (the profiler lost one)
    assert pair([(k, "a"), (k, "c")], [(k, "a"), (k, "b"), (k, "c")]) == ([0, 2], SCAN)
    # names unknown on the capture side (CUDA): kinds only
    assert pair([(k, "a"), ("memcpy", "Memcpy DtoD")], [(k, None), ("memcpy", None)])[1] == (
        POSITIONAL
    )
    got, _ = pair([(k, "a"), (k, "zzz")], [(k, "a"), (k, "b")])
    assert got == [0, -1]


def test_captured_ops_carry_their_module_call_stack_and_shapes() -> None:
    c = GraphDoc()
    c.capture(
        0,
        [
            Node("aten::mm", "gemm", "kernel", "nn.Module: Linear_3", [[32, 64], [64, 128]], BF16),
            Node("aten::mm", "gemm", "kernel", "nn.Module: Proj_0", [[32, 128], [128, 8]], BF16),
        ],
        label="capture_32_FULL",
    )
    (cap,) = find_captures(c.trace(), source="x")
    assert cap.label == "capture_32_FULL" and cap.batch_size == 32
    assert [o.module for o in cap.ops] == ["nn.Module: Linear", "nn.Module: Proj"]
    assert cap.ops[0].stack == ("nn.Module: Linear_3",)
    e = GraphDoc()
    e.replay(100, [("gemm", 10), ("gemm", 3)])
    doc = analyze(attribute(e.trace(), captures=[cap])).to_dict()
    mm = ops_of(doc)["aten::mm"]
    assert mm["calls"] == mm["replayed_calls"] == 2 and mm["cpu_total_us"] == 0
    assert mm["modules"] == [
        {"module": "nn.Module: Linear", "calls": 1, "device_self_us": 10.0},
        {"module": "nn.Module: Proj", "calls": 1, "device_self_us": 3.0},
    ]
    assert mm["call_stack"] == ["nn.Module: Linear_3"]
    shapes = {o["input_dims"] for o in doc["op_shapes"] if o["name"] == "aten::mm"}
    assert shapes == {"[[32,64],[64,128]]", "[[32,128],[128,8]]"}
    # the roofline costs them from the shapes the capture recorded
    row = next(o for o in doc["roofline"]["ops"] if o["name"] == "aten::mm")
    assert row["flops"] == 2 * (32 * 64 * 128 + 32 * 128 * 8)


def _write(path: Path, doc: dict) -> Path:
    path.write_bytes(gzip.compress(orjson.dumps(doc)))
    return path


def test_the_capture_of_the_batch_size_the_replay_ran_at(tmp_path: Path) -> None:
    """Two capture files make the same kernels for batch sizes 16 and 32; a replay inside
    ``execute_20_context_0`` ran at 20 tokens, padded to the graph of 32."""
    folder = tmp_path / "capture_traces"
    folder.mkdir()
    for bs in (16, 32):
        c = GraphDoc()
        c.capture(0, [Node(f"op_for_{bs}", "gemm")])
        _write(folder / f"cap_{bs}.json.gz", c.doc())
    (folder / "execution_details.json").write_text(
        '[{"file": "cap_16.json.gz", "batch_size": 16, "mode": "FULL"},'
        ' {"file": "cap_32.json.gz", "batch_size": 32, "mode": "FULL"}]'
    )
    e = GraphDoc()
    e.op("execute_20_context_0(sq0)_generation_20(sq20)", 0, 50, cat="user_annotation")
    e.replay(10, [("gemm", 5)])
    exec_path = _write(tmp_path / "graph_execution.json.gz", e.doc())

    merged = with_captures(load(exec_path), exec_path)  # the folder beside it, found
    assert merged.graph_capture is not None
    assert kernel_ops(merged) == {"gemm": {"op_for_32"}}
    assert [f.batch_size for f in capture_paths(folder)] == [16, 32]
    # the details file named stands for its folder
    assert capture_paths(folder / "execution_details.json") == capture_paths(folder)
    # no capture asked for: left alone
    assert with_captures(load(exec_path), exec_path, False).graph_capture is None


def test_equal_graphs_of_one_iteration_pair_in_order() -> None:
    """Piecewise graphs with the same kernels (the middle layers): the i-th replay of an
    iteration ran the i-th capture."""
    cap = GraphDoc()
    for i in range(3):
        cap.capture(100 * i, [Node(f"layer{i}", "k")])
    captures = find_captures(cap.trace(), source="c")
    e = GraphDoc()
    for step in range(2):
        e.op(f"execute_8_context_{step}", 1000 * step, 900, cat="user_annotation")
        for i in range(3):
            e.replay(1000 * step + 100 * i + 10, [("k", 1)])
    merged = attribute(e.trace(), captures=captures, in_trace=False)
    assert merged.graph_capture is not None
    assert merged.graph_capture.replay_capture == [0, 1, 2, 0, 1, 2]


def test_capture_paths_refuse_what_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or folder"):
        capture_paths(tmp_path / "nope")
    with pytest.raises(UsageError, match="holds no trace file"):
        capture_paths(tmp_path)
    (tmp_path / "execution_details.json").write_text("{not json")
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(UsageError, match="not readable JSON"):
        capture_paths(tmp_path)


def test_a_multi_rank_trace_is_attributed_one_rank_at_a_time() -> None:
    d = GraphDoc()
    d.replay(0, [("k", 1)])
    doc = d.doc()
    two = {**doc, "traceEvents": doc["traceEvents"]}
    t = load_document(two)
    t.meta.ranks = [0, 1]
    with pytest.raises(UsageError, match="one rank at a time"):
        with_captures(t, None, "capture_traces")
    assert with_captures(t, None) is t


def test_no_replay_and_no_capture_change_nothing(tmp_path: Path) -> None:
    d = GraphDoc()
    d.op("aten::add", 0, 5)
    trace = d.trace()
    assert attribute(trace) is trace
    c = GraphDoc()
    c.capture(0, [Node("x", "k")])
    f = _write(tmp_path / "c.json.gz", c.doc())
    got = attribute(trace, [CaptureFile(f)])
    assert got.graph_capture is not None
    assert got.graph_capture.notes == ["no graph launch in the trace"]
    assert len(got) == len(trace)


def test_only_the_capture_files_of_the_batch_sizes_run_are_read(tmp_path: Path) -> None:
    from opscope.trace.graphs.merge import needed_files

    files = []
    for bs in (8, 16, 32):
        c = GraphDoc()
        c.capture(0, [Node(f"op_for_{bs}", f"gemm_{bs}")])
        files.append(CaptureFile(_write(tmp_path / f"cap_{bs}.json.gz", c.doc()), bs, "FULL"))
    e = GraphDoc()
    e.op("execute_10_context_0", 0, 50, cat="user_annotation")
    e.replay(10, [("gemm_16", 5)])
    trace = e.trace()
    assert [f.batch_size for f in needed_files(trace.index, find_replays(trace.index), files)] == [
        16
    ]
    assert kernel_ops(attribute(trace, files)) == {"gemm_16": {"op_for_16"}}
    # a replay whose graph is not in the file of its size: every file is read after all
    e2 = GraphDoc()
    e2.op("execute_10_context_0", 0, 50, cat="user_annotation")
    e2.replay(10, [("gemm_32", 5)])
    assert kernel_ops(attribute(e2.trace(), files)) == {"gemm_32": {"op_for_32"}}


def test_one_graph_id_keeps_its_capture() -> None:
    """CUDA: captures known by their kinds only, three of one kernel each; a graph replayed
    twice in an iteration keeps the capture its first replay took (its graph id says it is
    the same graph), where the order alone would move on to the next one."""
    cap = GraphDoc(rocm=False)
    for i in range(3):
        cap.capture(100 * i, [Node(f"layer{i}", "k")])
    captures = find_captures(cap.trace(), source="c")
    e = GraphDoc(rocm=False)
    e.op("execute_8_context_0", 0, 900, cat="user_annotation")
    for i, gid in enumerate((1, 1, 2, 3)):
        e.replay(100 * i + 10, [("k", 1)], graph_id=gid, node_ids=[1])
    merged = attribute(e.trace(), captures=captures, in_trace=False)
    assert merged.graph_capture is not None
    assert merged.graph_capture.replay_capture == [0, 0, 1, 2]
    assert merged.graph_capture.method == "graph_node_ids"


def _in_workspace(capture: GraphDoc, execution: GraphDoc) -> tuple[Any, Any, int]:
    """The execution merged with the capture, in a workspace: (workspace, its event index,
    the row of the replayed kernel ``gemm``)."""
    from opscope.service import Workspace

    merged = attribute(execution.trace(), captures=find_captures(capture.trace(), source="c"))
    ws = Workspace()
    ws.add(merged, path="x")
    idx = merged.index
    return ws, idx, next(r for r in range(idx.n) if idx.name[r] == "gemm")


def test_the_chain_of_a_replayed_kernel_goes_through_its_captured_op() -> None:
    c = GraphDoc()
    c.capture(0, [Node("aten::mm", "gemm"), Node("aten::add", "add_k")])
    e = GraphDoc()
    e.op("execute_8_context_0", 0, 50, cat="user_annotation")
    e.replay(1, [("gemm", 10), ("add_k", 2)])
    ws, idx, gemm = _in_workspace(c, e)
    chain = ws.chain(int(idx.ids[gemm]))
    assert [h["name"] for h in chain["paths"][0]] == ["aten::mm", "hipGraphLaunch", "gemm"]
    assert [s["name"] for s in chain["stack"]] == ["execute_8_context_0"]
    back = ws.chain(int(idx.ids[idx.op[gemm]]))
    assert [h["name"] for h in back["paths"][0]] == ["aten::mm", "hipGraphLaunch", "gemm"]
    assert back["device_executions"] == 1 and "graph" in back["note"]


def test_the_chain_of_a_captured_op_with_many_kernels_is_capped_and_counts_them_all() -> None:
    from opscope.analysis.chain import dependency_chain

    c = GraphDoc()
    c.runtime("hipStreamBeginCapture", 0, 1)
    c.op("aten::linear", 2, 10)
    c.runtime("hipLaunchKernel", 3, 2, kernel="gemm")
    c.runtime("hipLaunchKernel", 6, 2, kernel="bias_k")
    c.runtime("hipStreamEndCapture", 13, 1)
    c.runtime("hipGraphInstantiate", 15, 3)
    e = GraphDoc()
    e.replay(100, [("gemm", 10), ("bias_k", 2)])
    ws, idx, gemm = _in_workspace(c, e)
    op_id = int(idx.ids[idx.op[gemm]])
    full = dependency_chain(ws.get(None).index, op_id)
    hops = ["aten::linear", "hipGraphLaunch", "gemm", "bias_k"]
    assert [h["name"] for h in full["paths"][0]] == hops and full["truncated"] == 0
    capped = dependency_chain(ws.get(None).index, op_id, max_paths=1)
    assert [h["name"] for h in capped["paths"][0]] == hops[:3] and capped["truncated"] == 1
    assert capped["device_executions"] == 2 and capped["device_ns"] == full["device_ns"] == 12_000


def test_a_capture_trace_reported_itself_reads_its_captures_once(tmp_path: Path) -> None:
    folder = tmp_path / "capture_traces"
    folder.mkdir()
    c = GraphDoc()
    c.capture(0, [Node("aten::mm", "gemm")])
    path = _write(folder / "cap.json.gz", c.doc())
    trace = load(path)
    # its own folder is the capture folder beside it; the trace's own captures suffice
    assert with_captures(trace, path) is trace
    assert with_captures(trace, path, folder) is trace
