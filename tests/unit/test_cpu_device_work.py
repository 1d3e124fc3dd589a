"""Device work on a CPU trace: each op's own (self) time where it computes - non-leaf ops
included, views, allocation, dispatch wrappers and dynamo's guards excluded, a compiled
graph's generated code included unless its kernels are profiled as ops of their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.optable import op_table
from opscope.analysis.pipeline import analyze
from opscope.trace import load
from trace_checks import X


def _table(tmp_path: Path, events: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return {r.name: r for r in op_table(load(path, cache=False)).rows}


def test_non_leaf_ops_carry_their_self_time(tmp_path: Path) -> None:
    rows = _table(
        tmp_path,
        [
            X("aten::linear", 0, 1000),
            X("aten::t", 1, 4),
            X("aten::addmm", 10, 900),  # 900 - 100 of copy_ inside: 800 of its own
            X("aten::copy_", 20, 100),
            X("aten::resolve_conj", 950, 1),
        ],
    )
    assert rows["aten::addmm"].device_self_us == pytest.approx(800.0)
    assert rows["aten::copy_"].device_self_us == pytest.approx(100.0)
    assert rows["aten::linear"].device_self_us == 0  # a dispatch wrapper
    assert rows["aten::linear"].device_total_us == pytest.approx(900.0)
    assert rows["aten::t"].device_self_us == 0 and rows["aten::resolve_conj"].device_self_us == 0


def test_compiled_graph_code_is_device_work(tmp_path: Path) -> None:
    region = "## Call CompiledFxGraph fabc123 ##"
    rows = _table(
        tmp_path,
        [
            X("Torch-Compiled Region: 0/0", 0, 1000, "user_annotation"),
            X(region, 50, 900, "user_annotation"),
            X("aten::mm", 100, 300),  # an extern kernel inside the generated code
        ],
    )
    assert rows[region].device_self_us == pytest.approx(600.0)
    assert rows["aten::mm"].device_self_us == pytest.approx(300.0)
    assert rows["Torch-Compiled Region: 0/0"].device_self_us == 0  # guards and dispatch


def test_profiled_inductor_kernels_carry_the_graphs_time(tmp_path: Path) -> None:
    region = "## Call CompiledFxGraph fabc123 ##"
    rows = _table(
        tmp_path,
        [
            X(region, 0, 1000, "user_annotation"),
            X("graph_0_cpp_fused_add_mean_mul_0", 10, 950),
        ],
    )
    assert rows["graph_0_cpp_fused_add_mean_mul_0"].device_self_us == pytest.approx(950.0)
    assert rows[region].device_self_us == 0


def test_report_and_findings_use_it(tmp_path: Path) -> None:
    path = tmp_path / "cpu.json"
    events = [X("ProfilerStep#1", 0, 2000, "user_annotation")]
    events += [X("aten::addmm", 10 + 200 * i, 150) for i in range(5)]
    events += [X("aten::copy_", 20 + 200 * i, 10) for i in range(5)]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    d = analyze(path, roofline=False).to_dict()
    assert d["ops"][0]["name"] == "aten::addmm"
    assert d["ops"][0]["device_self_us"] == pytest.approx(5 * 140.0)
    (step,) = d["steps"]
    assert step["device_ops"] == 10 and step["device_us"] == pytest.approx(750.0)
