"""compile: recompiles (shape-driven), graph breaks, compile time and guard cost."""

from __future__ import annotations

from typing import Any

from test_findings_kit import Doc, run_rule, shared


def _doc(recompiled: bool, lookup_us: float = 1.0, compile_us: float = 0.0) -> Doc:
    d = Doc(gpu=False)
    for i in range(4):
        t0 = i * 1000.0
        d.step(i, t0, 900)
        if compile_us and i == 0:
            d.op("_compile.compile_inner (dynamo_timed)", t0 + 1, compile_us, cat="user_annotation")
        d.op("TorchDynamo Cache Lookup", t0 + 5, lookup_us)
        region = f"Torch-Compiled Region: 0/{1 if recompiled and i >= 2 else 0}"
        d.op(region, t0 + 10 + lookup_us, 500, cat="user_annotation")
        d.op("aten::mm", t0 + 20 + lookup_us, 400)
    return d


RUN_INFO: dict[str, Any] = {
    "compile": [
        {
            "wall_s": 3.2,
            "frames_compiled": 2,
            "recompiles": 1,
            "recompile_reasons": [
                "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"
            ],
            "graph_breaks": 2,
            "graph_break_reasons": {"Tensor.item": 2},
        }
    ],
    "compiled_in_window": [],
}


def test_shape_driven_recompile_and_graph_breaks_from_run_json() -> None:
    found = run_rule("compile", _doc(recompiled=True).trace(), RUN_INFO)
    titles = " | ".join(f.title for f in found)
    rec = [f for f in found if "recompilation" in f.title]
    assert rec, titles
    assert "shape-driven" in rec[0].title
    assert "mark_dynamic" in rec[0].recommendation and "bucket" in rec[0].recommendation
    assert rec[0].details["recompiled_regions_in_trace"] == ["0/1"]
    breaks = [f for f in found if "graph break" in f.title]
    assert breaks and breaks[0].details["graph_breaks"] == 2


def test_recompile_seen_in_the_trace_alone() -> None:
    found = run_rule("compile", _doc(recompiled=True).trace())
    assert any("recompilation" in f.title for f in found)


def test_compile_in_window_and_guard_cost() -> None:
    found = run_rule("compile", _doc(False, lookup_us=60, compile_us=300).trace())
    kinds = {f.title.split(":")[0] for f in found}
    assert any("compiled inside the measured window" in k for k in kinds), kinds
    guard = [f for f in found if "guard" in f.title]
    assert guard and guard[0].details["lookups"] == 4
    assert guard[0].time_at_stake_us == 240


def test_steady_compiled_run_does_not_fire() -> None:
    assert run_rule("compile", _doc(recompiled=False).trace()) == []


def test_shared_compiled_trace_without_recompiles_does_not_fire() -> None:
    assert run_rule("compile", shared("rocm/torch_compile_triton.json.gz")) == []
