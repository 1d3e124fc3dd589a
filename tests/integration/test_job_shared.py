"""A real two-rank job (HTA's sampled 128-rank traces): the merge of rank reports gives the
same op and kernel tables as aggregating the whole event table at once."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from opscope.analysis.kernels import kernel_table
from opscope.analysis.optable import op_table
from opscope.analysis.pipeline import analyze
from opscope.trace import load

JOB = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "cuda" / "sampled_world128"
pytestmark = pytest.mark.skipif(
    not JOB.is_dir(), reason="../shared/traces not present (a user's clone)"
)

TIMES = ("cpu_self_us", "cpu_total_us", "device_self_us", "device_total_us", "device_share")


def test_merge_equals_the_whole_tables_aggregation() -> None:
    trace = load(JOB)
    report = analyze(trace)
    assert [r.rank for r in report.ranks] == [0, 1]
    for merged, whole in (
        (report.ops.rows, op_table(trace).rows),
        (report.ops.by_shape, op_table(trace).by_shape),
    ):
        assert len(merged) == len(whole)
        want = {(r.name, r.input_dims, r.input_types): r for r in whole}
        for r in merged:
            w = want[(r.name, r.input_dims, r.input_types)]
            assert (r.calls, r.device_calls, r.launching_calls) == (
                w.calls,
                w.device_calls,
                w.launching_calls,
            )
            for f in TIMES:
                assert math.isclose(getattr(r, f), getattr(w, f), rel_tol=1e-9, abs_tol=1e-9), (
                    r.name,
                    f,
                )
    whole_k = {k.name: k for k in kernel_table(trace)}
    assert {k.name for k in report.kernels} == set(whole_k)
    for k in report.kernels:
        w = whole_k[k.name]
        assert (k.calls, k.min_us, k.max_us, k.ops) == (w.calls, w.min_us, w.max_us, w.ops)
        assert math.isclose(k.device_us, w.device_us, rel_tol=1e-9)
    d = report.to_dict()
    per_rank = sum(r["summary"]["device_busy_us"] for r in d["ranks"])
    assert d["summary"]["device_busy_us"] == pytest.approx(per_rank)
    assert {f["rank"] for f in d["findings"]} <= {0, 1, None}  # None: the job's own
    job_kinds = {f["kind"] for f in d["findings"] if f["rank"] is None}
    assert job_kinds <= {"load_imbalance", "straggler"}
