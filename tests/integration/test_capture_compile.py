"""Compile metrics from a real ``torch.compile``: compile ids, a recompile and a graph break.

This is the capture suite's only compile.  It uses ``backend="eager"``: every number
``watch_compile`` records (frames, compile ids, recompile reasons, graph breaks) comes from
Dynamo, which runs the same for every backend, while Inductor would add about 30 s of code
generation on a 2-core machine and nothing to check.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from opscope.capture.compile_metrics import CompileRecord, frames_compiled_so_far, watch_compile


@pytest.mark.slow
def test_watch_compile_records_a_real_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inductor (if it ever runs) writes a large precompiled header under $TMPDIR and a cache.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import torch
    import torch._dynamo

    torch._dynamo.reset()

    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.sin() + 1
        torch._dynamo.graph_break()
        return y.cos()

    compiled = torch.compile(f, backend="eager", dynamic=False)
    before = frames_compiled_so_far()
    with watch_compile(label="first") as first:
        compiled(torch.randn(8))
    with watch_compile(label="steady") as steady:
        compiled(torch.randn(8))
    with watch_compile(label="new shape") as again:
        compiled(torch.randn(16))

    assert frames_compiled_so_far() - before == 4  # f and its resume function, twice
    # first call: f up to the break, then the resume function after it
    assert first.frames_compiled == 2
    assert len(first.compile_ids) == 2
    assert first.graph_breaks >= 1
    assert any("graph_break" in r or "graph break" in r.lower() for r in first.graph_break_reasons)
    assert first.recompile_reasons == []
    assert first.wall_s > 0
    assert "compilation_metrics" in first.sources and first.errors == []
    assert {fr["co_name"] for fr in first.frames} >= {"f"}
    assert any(fr.get("graph_op_count") for fr in first.frames)

    # warm call: nothing compiled
    assert steady.frames_compiled == 0 and steady.compile_ids == [] and steady.graph_breaks == 0

    # a new shape with dynamic=False recompiles, and says why
    assert again.frames_compiled >= 1
    assert again.recompiles >= 1
    assert any("size mismatch" in r for r in again.recompile_reasons), again.recompile_reasons
    assert set(again.compile_ids).isdisjoint(first.compile_ids)
    d = again.to_dict()
    assert d["label"] == "new shape" and d["recompiles"] == again.recompiles


def test_nothing_compiled_without_dynamo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch._dynamo.utils", raising=False)
    with watch_compile() as rec:
        pass
    assert rec.frames_compiled == 0 and rec.sources == [] and rec.compile_ids == []
    assert frames_compiled_so_far() == 0


def test_diff_of_dynamo_bookkeeping(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what happened inside the block counts; unknown metric fields are tolerated."""
    from collections import Counter, defaultdict

    counters: defaultdict[str, Counter[str]] = defaultdict(Counter)
    counters["frames"].update({"ok": 3, "total": 3})
    counters["graph_break"]["old reason"] = 2
    metrics: list[Any] = [SimpleNamespace(compile_id="0/0", recompile_reason=None)]
    phases: dict[str, list[float]] = {"_compile.compile_inner": [5.0]}
    utils = SimpleNamespace(
        counters=counters,
        compilation_time_metrics=phases,
        get_compilation_metrics=lambda: list(metrics),
    )
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", utils)

    with watch_compile() as rec:
        counters["frames"].update({"ok": 1, "total": 2})
        counters["stats"]["unique_graphs"] += 1
        counters["graph_break"]["old reason"] += 1
        counters["graph_break"]["new reason"] += 1
        phases["_compile.compile_inner"].append(0.25)
        metrics.append(
            SimpleNamespace(
                compile_id="0/1",
                recompile_reason="0/0: tensor 'x' size mismatch",
                restart_reasons={"b", "a"},
                fail_reason=None,
            )
        )
    assert isinstance(rec, CompileRecord)
    assert (rec.frames_compiled, rec.frames_seen, rec.unique_graphs) == (1, 2, 1)
    assert rec.graph_breaks == 2
    assert rec.graph_break_reasons == {"old reason": 1, "new reason": 1}
    assert rec.compile_ids == ["0/1"]
    assert rec.recompile_reasons == ["0/0: tensor 'x' size mismatch"]
    assert rec.phase_s == {"_compile.compile_inner": 0.25}
    assert rec.frames == [
        {
            "compile_id": "0/1",
            "fail_reason": None,
            "recompile_reason": "0/0: tensor 'x' size mismatch",
            "restart_reasons": ["a", "b"],
        }
    ]
    assert rec.sources == ["counters", "compilation_time_metrics", "compilation_metrics"]
