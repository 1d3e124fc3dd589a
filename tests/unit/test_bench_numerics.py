"""Numerics checks: tolerances by dtype, shape and dtype mismatches reported, never raised."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from opscope.bench.numerics import compare_outputs, tolerance_for  # noqa: E402


def test_identical_outputs_pass_with_zero_error() -> None:
    x = torch.randn(4, 8)
    n = compare_outputs(x, x.clone())
    assert n.ok and n.max_abs_err == 0.0 and n.reason is None


def test_bf16_rounding_passes_but_a_real_error_fails() -> None:
    ref = torch.randn(64, 64, dtype=torch.bfloat16)
    one_ulp = (ref.float() * (1 + 2**-8)).to(torch.bfloat16)
    assert compare_outputs(one_ulp, ref).ok
    wrong = ref.clone()
    wrong[3, 5] += 1.0
    n = compare_outputs(wrong, ref)
    assert not n.ok
    assert n.max_abs_err >= 0.9
    assert "exceeds" in (n.reason or "")


def test_fp32_tolerance_is_tight() -> None:
    ref = torch.ones(10)
    assert compare_outputs(ref + 5e-6, ref).ok
    assert not compare_outputs(ref + 1e-3, ref).ok
    assert tolerance_for("torch.float32") == (1e-5, 1e-5)
    assert tolerance_for("bfloat16")[0] > tolerance_for("float16")[0]


def test_shape_and_dtype_mismatch_are_failures_with_the_shapes() -> None:
    n = compare_outputs(torch.ones(2, 3), torch.ones(3, 2))
    assert not n.ok and "(2, 3)" in (n.reason or "") and "(3, 2)" in (n.reason or "")
    n = compare_outputs(torch.ones(2, dtype=torch.float16), torch.ones(2))
    assert not n.ok and "float16" in (n.reason or "")
    n = compare_outputs("not a tensor", torch.ones(2))
    assert not n.ok


def test_nan_where_reference_is_finite_fails() -> None:
    ref = torch.ones(4)
    out = ref.clone()
    out[1] = float("nan")
    assert not compare_outputs(out, ref).ok
