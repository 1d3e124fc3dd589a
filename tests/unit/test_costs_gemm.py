"""GEMM formulas: 2MNK (+MN for an addend), batch, broadcasting matmul, linear; bytes."""

from __future__ import annotations

import pytest

from opscope.analysis.costs import op_cost

BF = "c10::BFloat16"


def test_mm_flops_and_bytes() -> None:
    c = op_cost("aten::mm", [[8, 16], [16, 32]], [BF, BF])
    assert c is not None
    assert c.flops == 2 * 8 * 16 * 32
    assert c.bytes == (8 * 16 + 16 * 32 + 8 * 32) * 2
    assert c.matrix and c.dtype == "bf16" and c.formula == "gemm 2MNK"


def test_addmm_counts_the_bias_and_its_real_shape() -> None:
    c = op_cost("aten::addmm", [[32], [8, 16], [16, 32], [], []], [BF, BF, BF, "Scalar", "Scalar"])
    assert c is not None
    assert c.flops == 2 * 8 * 16 * 32 + 8 * 32
    assert c.bytes == (32 + 8 * 16 + 16 * 32 + 8 * 32) * 2
    # a full (M, N) addend is read in full
    c2 = op_cost("aten::addmm", [[8, 32], [8, 16], [16, 32]], [BF, BF, BF])
    assert c2 is not None and c2.bytes == c.bytes + (8 * 32 - 32) * 2


def test_bmm_and_baddbmm() -> None:
    c = op_cost("aten::bmm", [[4, 8, 16], [4, 16, 32]], ["float", "float"])
    assert c is not None and c.flops == 2 * 4 * 8 * 16 * 32 and c.dtype == "fp32"
    assert c.bytes == 4 * (4 * 8 * 16 + 4 * 16 * 32 + 4 * 8 * 32)
    d = op_cost("aten::baddbmm", [[4, 8, 32], [4, 8, 16], [4, 16, 32]], ["float"] * 3)
    assert d is not None and d.flops == c.flops + 4 * 8 * 32


@pytest.mark.parametrize(
    ("a", "b", "flops"),
    [
        ([16], [16], 2 * 16),
        ([8, 16], [16], 2 * 8 * 16),
        ([16], [16, 4], 2 * 16 * 4),
        ([3, 8, 16], [16, 4], 2 * 3 * 8 * 16 * 4),
        ([2, 1, 8, 16], [5, 16, 4], 2 * 10 * 8 * 16 * 4),  # batch dims broadcast
    ],
)
def test_matmul_follows_torch_semantics(a: list[int], b: list[int], flops: int) -> None:
    c = op_cost("aten::matmul", [a, b], ["float", "float"])
    assert c is not None and c.flops == flops


def test_linear_with_and_without_bias() -> None:
    with_bias = op_cost("aten::linear", [[2, 5, 16], [32, 16], [32]], [BF, BF, BF])
    without = op_cost("aten::linear", [[2, 5, 16], [32, 16], []], [BF, BF, ""])
    assert with_bias is not None and without is not None
    assert without.flops == 2 * 10 * 32 * 16
    assert with_bias.flops == without.flops + 10 * 32
    assert with_bias.bytes - without.bytes == 32 * 2


def test_gemm_shape_mismatch_gives_none() -> None:
    assert op_cost("aten::mm", [[8, 16], [15, 32]], ["float", "float"]) is None
    assert op_cost("aten::bmm", [[8, 16], [16, 32]], ["float", "float"]) is None


def test_scaled_mm_uses_recorded_out_dtype() -> None:
    f8 = "c10::Float8_e4m3fn"
    dims = [[64, 128], [128, 256], [], [], [], [], [], []]
    types = [f8, f8, "float", "float", "", "", "Scalar", "Scalar"]
    c = op_cost("aten::_scaled_mm", dims, types, None, ["", "", "", "", "", "", "15", "False"])
    assert c is not None and c.dtype == "fp8" and c.flops == 2 * 64 * 128 * 256
    # fp8 operands, two fp32 scale scalars, a bf16 result (ScalarType 15)
    assert c.bytes == 64 * 128 + 128 * 256 + 2 * 4 + 64 * 256 * 2
