"""opscope diff: per-step comparison and its warnings, and a text output that shows wall and
step times, what only one side has, the kernels and the timeline deltas within 100 columns."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opscope.analysis.diff import _step_comparison, diff_reports
from opscope.analysis.pipeline import analyze
from opscope.render.diff import render_text


def _side(*walls: float) -> dict[str, Any]:
    return {"steps": [{"step": i, "wall_us": w} for i, w in enumerate(walls)]}


def test_one_step_on_a_side_is_a_warning() -> None:
    got = _step_comparison(_side(1_700_000.0), _side(800_000.0, 810_000.0, 790_000.0))
    assert any(w.startswith("A has one profiler step") for w in got["warnings"])
    assert not any(w.startswith("B") for w in got["warnings"])


def test_an_outlier_step_is_named_and_left_out_of_the_median() -> None:
    got = _step_comparison(_side(100.0, 102.0, 1700.0, 98.0), _side(100.0, 101.0, 99.0))
    assert got["median_step_us"]["a"] == 101.0
    assert got["delta_median_step_us"] == -1.0
    (warning,) = got["warnings"]
    assert warning.startswith("A's step 2 is an outlier")


def test_steady_steps_give_no_warning() -> None:
    got = _step_comparison(_side(100.0, 105.0, 98.0), _side(90.0, 92.0))
    assert got["warnings"] == []
    assert got["delta_median_step_us"] == -9.0


def test_text_shows_steps_one_side_only_kernels_and_timeline(
    shared: Callable[[str], Path],
) -> None:
    a = analyze(shared("cuda/diff_pair/control_a100.json.gz"))
    b = analyze(shared("cuda/diff_pair/test_v100.json.gz"))
    data = diff_reports(a, b)
    assert len(data["a"]["steps"]) == 6
    text = render_text(data, top=10)
    assert "A: wall 465.27 ms, 6 steps" in text
    assert "median step 76.83 ms → 114.69 ms" in text
    assert "only in A (ops) (72):" in text
    assert "Kernels by |Δ device time|" in text
    assert "only in B (kernels)" in text
    assert "timeline Δ (B - A): wall +280.07 ms" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_single_step_runs_warn_in_the_text(shared: Callable[[str], Path], tmp_path: Path) -> None:
    path = shared("cuda/triton_example.json.gz")
    report = analyze(path)
    text = render_text(diff_reports(report, report))
    assert "warning: A has one profiler step" in text
    assert "warning: B has one profiler step" in text


def test_a_cut_gpu_trace_is_not_a_cpu_trace(shared: Callable[[str], Path], tmp_path: Path) -> None:
    # the first 300 kB hold the device properties and host events only
    head = gzip.decompress(shared("cuda/a100_nccl_rank0_of2.json.gz").read_bytes())[:300_000]
    cut = tmp_path / "cut.json"
    cut.write_bytes(head)
    report = analyze(cut)
    assert report.to_dict()["device"]["kind"] == "cuda"
    titles = [f["title"] for f in report.to_dict()["findings"]]
    (title,) = [t for t in titles if t.startswith("Trace truncated")]
    assert title.endswith("…") and not title[:-1].endswith(("afte", "th"))
