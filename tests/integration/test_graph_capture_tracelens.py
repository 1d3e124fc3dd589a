"""The capture merge against TraceLens's merged tables on the shared execution/capture pairs.

``../shared/traces/rocm/{vllm_graph,sglang_graph}`` each hold an execution trace (decode in a
HIP graph, FULL mode), the trace of the graph's capture (``capture_traces/``) and TraceLens's
report of the execution trace with the capture merged (``tracelens_reference/``).  TraceLens's
``ops_summary.csv`` has one row per (op, parent module): ``total_direct_kernel_time_sum`` (µs)
is opscope's ``device_self_us`` and ``Count`` its ``launching_calls`` (calls that launched
device work; TraceLens lists no op without); its rows summed per name are opscope's op rows.

Two names differ by design, and are mapped before comparing:

* TraceLens renames ``sglang_profiler::X_<n>`` (the numbered custom ops of SGLang's shape
  profiler) to ``sglang_profiler::X``; opscope keeps names as recorded;
* a kernel launched outside any ``cpu_op`` is named after its launch call by TraceLens
  (``hipLaunchKernel``); opscope gives it to the annotation around it (its op table counts
  annotations as ops), so those rows are compared as one total.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.pipeline import analyze
from opscope.trace import load
from opscope.trace.graphs import attribute, capture_paths
from opscope.trace.graphs.sources import default_capture_folder

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "rocm"
PAIRS = ("vllm_graph", "sglang_graph")
RUNTIME = re.compile(r"^(hip|cuda|cu)[A-Z]")


def _pair(name: str) -> Path:
    folder = SHARED / name
    if not (folder / "graph_execution.json.gz").is_file():
        pytest.skip(f"../shared/traces/rocm/{name} not present")
    return folder


def tracelens_name(name: str) -> str:
    """The name TraceLens gives an op (its SGLang profiler ops lose their number)."""
    if name.startswith("sglang_profiler::"):
        return re.sub(r"_\d+$", "", name)
    return name


def reference(folder: Path) -> list[dict[str, Any]]:
    with (folder / "tracelens_reference" / "ops_summary.csv").open() as f:
        return list(csv.DictReader(f))


def merged_report(folder: Path) -> dict[str, Any]:
    trace = load(folder / "graph_execution.json.gz")
    merged = attribute(trace, capture_paths(folder / "capture_traces"))
    return analyze(merged).to_dict()


@pytest.mark.parametrize("pair", PAIRS)
def test_top_ops_equal_tracelens_merged_ops_summary(pair: str) -> None:
    folder = _pair(pair)
    doc = merged_report(folder)
    gc = doc["source"]["graph_capture"]
    assert gc["method"] == "kernel_sequence"  # ROCm records no graph node ids
    assert gc["unmatched_kernels"] == 0 and gc["matched_kernels"] > 400
    want_us: dict[str, float] = defaultdict(float)
    want_n: dict[str, int] = defaultdict(int)
    launch_named = 0.0
    for r in reference(folder):
        if RUNTIME.match(r["name"]):
            launch_named += float(r["total_direct_kernel_time_sum"])
            continue
        want_us[r["name"]] += float(r["total_direct_kernel_time_sum"])
        want_n[r["name"]] += int(r["Count"])
    got = {tracelens_name(o["name"]): o for o in doc["ops"]}
    top = sorted(want_us, key=lambda n: -want_us[n])
    worst = 0.0
    for name in top:
        assert name in got, f"{pair}: TraceLens's {name} is not an op of the report"
        o = got[name]
        rel = abs(o["device_self_us"] - want_us[name]) / want_us[name]
        worst = max(worst, rel)
        assert rel < 0.01, (pair, name, o["device_self_us"], want_us[name])
        assert o["launching_calls"] == want_n[name], (pair, name)
    # the first ops are the captured ones, in TraceLens's order
    ranked = [tracelens_name(o["name"]) for o in doc["ops"] if o["device_self_us"] > 0]
    assert ranked[:5] == top[:5]
    # kernels TraceLens names after their launch sit on annotations here: the same time
    on_annotations = sum(
        o["device_self_us"] for o in doc["ops"] if tracelens_name(o["name"]) not in want_us
    )
    assert on_annotations == pytest.approx(launch_named, rel=0.01, abs=0.01)
    assert worst < 0.001  # in fact: the same kernels, to the rounding of the CSV


@pytest.mark.parametrize("pair", PAIRS)
def test_modules_equal_tracelens_parent_modules(pair: str) -> None:
    folder = _pair(pair)
    doc = merged_report(folder)
    got: dict[tuple[str, str], dict[str, Any]] = {}
    for o in doc["ops"]:
        for m in o.get("modules") or []:
            got[(tracelens_name(o["name"]), m["module"])] = m
    compared = 0
    for r in reference(folder):
        key = (r["name"], r["parent_module"])
        if key not in got:
            continue  # an op outside the graph (TraceLens finds its module in the execution)
        m = got[key]
        assert m["device_self_us"] == pytest.approx(
            float(r["total_direct_kernel_time_sum"]), rel=0.01
        )
        assert m["calls"] == int(r["Count"])
        compared += 1
    assert compared >= 10


@pytest.mark.parametrize("pair", PAIRS)
def test_without_the_capture_the_replay_is_a_unit_with_the_hint(pair: str) -> None:
    folder = _pair(pair)
    doc = analyze(load(folder / "graph_execution.json.gz")).to_dict()
    assert "graph_capture" not in doc["source"]
    units = [k for k in doc["kernels"] if "graph" in k]
    assert len(units) == 1
    (unit,) = units
    assert unit["name"] == "hipGraphLaunch #1"
    assert unit["calls"] == unit["graph"]["replays"] == len(unit["replays"]) == 1
    assert unit["replays"][0]["kernels"] == unit["graph"]["kernels_per_replay"] > 400
    assert "--graph-capture" in unit["hint"]
    # its kernels grouped by name hold its device time; no op is marked replayed
    assert sum(k["device_us"] for k in unit["kernels"]) == pytest.approx(unit["device_us"])
    assert not any(o.get("graph_replayed") for o in doc["ops"])


def test_capture_folder_is_found_beside_the_trace() -> None:
    folder = _pair("vllm_graph")
    assert default_capture_folder(folder / "graph_execution.json.gz") == folder / "capture_traces"
    (f,) = capture_paths(folder / "capture_traces")
    assert f.batch_size == 32 and f.mode == "FULL"  # execution_details.json


@pytest.mark.parametrize("capture", [True, False], ids=["merged", "units"])
def test_documents_validate_and_round_trip(capture: bool) -> None:
    from opscope.analysis.job import RankReport
    from opscope.analysis.job_report import rank_report
    from schema_checks import check_document

    folder = _pair("vllm_graph")
    trace = load(folder / "graph_execution.json.gz")
    if capture:
        trace = attribute(trace, capture_paths(folder / "capture_traces"))
    report = analyze(trace)
    doc = report.to_dict()
    check_document(doc, "report")
    rr = rank_report(report)
    check_document(rr.to_dict(), "rank_report")
    back = RankReport.from_dict(rr.to_dict()).to_dict()
    assert back["ops"] == rr.to_dict()["ops"] and back["kernels"] == rr.to_dict()["kernels"]


@pytest.mark.parametrize("pair", PAIRS)
def test_timeline_equals_tracelens_gpu_timeline(pair: str) -> None:
    """The merge moves no device event: busy, idle and the span are TraceLens's."""
    folder = _pair(pair)
    s = merged_report(folder)["summary"]
    with (folder / "tracelens_reference" / "gpu_timeline.csv").open() as f:
        ref = {r["type"]: float(r["time ms"]) * 1e3 for r in csv.DictReader(f)}
    assert s["device_busy_us"] == pytest.approx(ref["busy_time"], rel=0.01)
    assert s["device_idle_us"] == pytest.approx(ref["idle_time"], rel=0.01)
    assert s["device_span_us"] == pytest.approx(ref["total_time"], rel=0.01)
    assert s["memcpy_us"] == pytest.approx(ref["total_memcpy_time"], rel=0.01)


@pytest.mark.parametrize("pair", PAIRS)
def test_the_explorer_chain_of_a_replayed_kernel_goes_through_its_captured_op(pair: str) -> None:
    """Every replayed kernel chains op -> graph launch -> kernel with its captured op first,
    and its op chains to the same launch and kernels: the chain agrees with the op table."""
    from opscope.service import Workspace

    folder = _pair(pair)
    trace = attribute(
        load(folder / "graph_execution.json.gz"), capture_paths(folder / "capture_traces")
    )
    ws = Workspace()
    ws.add(trace, path=str(folder / "graph_execution.json.gz"))
    idx = trace.index
    view = ws.get(None).index  # the explorer's viewport of it
    doc = analyze(trace).to_dict()
    top = doc["ops"][0]
    assert top["graph_replayed"]
    kernels = [
        r
        for r in range(idx.n)
        if view.group[r] == 2 and idx.op[r] >= 0 and idx.name[idx.op[r]] == top["name"]
    ]
    assert kernels
    hops = ws.chain(int(idx.ids[kernels[0]]))["paths"][0]
    assert [h["name"] for h in hops[:2]] == [top["name"], "hipGraphLaunch"]
    # the copies of the top op, one per captured call, hold its kernels between them
    copies = sorted({int(idx.op[r]) for r in kernels})
    got = sum(ws.chain(int(idx.ids[c]))["device_ns"] for c in copies)
    assert got / 1e3 == pytest.approx(top["device_total_us"], rel=1e-6)
