"""Attention formulas: 4·B·H·Sq·Sk·D, causal halving, grouped-query heads, layouts, backward."""

from __future__ import annotations

import pytest

from opscope.analysis.costs import op_cost
from opscope.analysis.costs.attention import causal_fraction

BF = "c10::BFloat16"


def _flash(q: list[int], k: list[int], causal: bool) -> float:
    c = op_cost(
        "aten::_scaled_dot_product_flash_attention",
        [q, k, k, [], [], [], []],
        [BF, BF, BF, "Scalar", "Scalar", "Scalar", "Scalar"],
        None,
        ["", "", "", "0.", str(causal), "False", "0.125"],
    )
    assert c is not None
    return c.flops


def test_forward_and_causal() -> None:
    full = _flash([2, 8, 128, 64], [2, 8, 128, 64], False)
    assert full == 4 * 2 * 8 * 128 * 128 * 64
    assert _flash([2, 8, 128, 64], [2, 8, 128, 64], True) == full / 2


def test_grouped_query_attention_counts_query_heads() -> None:
    gqa = _flash([1, 32, 64, 128], [1, 8, 64, 128], False)
    assert gqa == 4 * 1 * 32 * 64 * 64 * 128
    c = op_cost(
        "aten::_scaled_dot_product_flash_attention",
        [[1, 32, 64, 128], [1, 8, 64, 128], [1, 8, 64, 128]],
        [BF, BF, BF],
    )
    assert c is not None
    assert c.bytes == (32 + 8 + 8 + 32) * 64 * 128 * 2  # K and V are a quarter of Q


def test_raw_kernels_use_batch_seq_head_layout() -> None:
    # _flash_attention_forward(q, k, v, cum_q, cum_k, max_q, max_k, dropout, is_causal, ...)
    c = op_cost(
        "aten::_flash_attention_forward",
        [[2, 128, 8, 64], [2, 128, 8, 64], [2, 128, 8, 64], [], [], [], [], [], [], []],
        [BF, BF, BF, "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"],
        None,
        ["", "", "", "", "", "128", "128", "0.", "True", "False"],
    )
    assert c is not None and c.flops == 4 * 2 * 8 * 128 * 128 * 64 / 2
    # a packed variable-length batch (3-D) does not record its lengths: no guess
    assert op_cost("aten::_flash_attention_forward", [[300, 8, 64]] * 3, [BF, BF, BF]) is None


def test_efficient_attention_mask_types() -> None:
    dims = [[1, 64, 4, 32], [1, 256, 4, 32], [1, 256, 4, 32], [], [], [], [], [], [], [], []]
    types = [BF, BF, BF, "", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"]

    def flops(mask_type: str) -> float:
        conc = ["", "", "", "", "", "", "64", "256", "0.", mask_type, "False"]
        c = op_cost("aten::_efficient_attention_forward", dims, types, None, conc)
        assert c is not None
        return c.flops

    full = 4 * 1 * 4 * 64 * 256 * 32
    assert flops("0") == full
    assert flops("1") == pytest.approx(full * 64 / (2 * 256))  # top-left
    assert flops("2") == pytest.approx(full * (1 - 64 / (2 * 256)))  # bottom-right


def test_causal_fraction() -> None:
    assert causal_fraction(100, 100) == 0.5
    assert causal_fraction(1, 100, bottom_right=True) == pytest.approx(0.995)
    assert causal_fraction(200, 100) == 0.75


def test_backward_is_two_and_a_half_forwards_for_fused_kernels() -> None:
    q = [2, 8, 128, 64]
    dims = [q, q, q, q, q, [2, 8, 128], [], [], [], [], [], [], [], [], []]
    types = (
        [BF] * 5 + ["float"] + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "", "", "Scalar"]
    )
    conc = [""] * 8 + ["128", "128", "0.", "False", "", "", "0.125"]
    c = op_cost("aten::_scaled_dot_product_flash_attention_backward", dims, types, None, conc)
    assert c is not None and c.flops == 2.5 * 4 * 2 * 8 * 128 * 128 * 64
    conc[11] = "True"
    causal = op_cost("aten::_scaled_dot_product_flash_attention_backward", dims, types, None, conc)
    assert causal is not None and causal.flops == c.flops / 2
