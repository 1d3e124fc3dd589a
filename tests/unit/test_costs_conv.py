"""Convolution formulas: output size, groups, stride/padding/dilation, transposed, backward,
argument layouts of the backend ops, pooling."""

from __future__ import annotations

from opscope.analysis.costs import op_cost

BF = "c10::BFloat16"
CONV_TYPES = [
    BF,
    BF,
    BF,
    "ScalarList",
    "ScalarList",
    "ScalarList",
    "Scalar",
    "ScalarList",
    "Scalar",
]


def _conv(x: list[int], w: list[int], bias: list[int], concrete: list[str]) -> float | None:
    dims = [x, w, bias, [], [], [], [], [], []]
    types = list(CONV_TYPES) if bias else [BF, BF, "", *CONV_TYPES[3:]]
    c = op_cost("aten::convolution", dims, types, None, ["", "", "", *concrete])
    return None if c is None else c.flops


def test_patch_embedding_conv_matches_hand_count() -> None:
    # ViT patchify: 16x16 stride 16 on 224x224 -> 14x14 outputs
    flops = _conv(
        [4, 3, 224, 224],
        [768, 3, 16, 16],
        [],
        ["[16, 16]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"],
    )
    assert flops == 2 * 4 * 768 * 14 * 14 * 3 * 16 * 16


def test_bias_adds_one_flop_per_output() -> None:
    args = ["[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    no_bias = _conv([2, 8, 10, 10], [16, 8, 3, 3], [], args)
    bias = _conv([2, 8, 10, 10], [16, 8, 3, 3], [16], args)
    assert no_bias is not None and bias is not None
    assert no_bias == 2 * 2 * 16 * 10 * 10 * 8 * 9
    assert bias - no_bias == 2 * 16 * 10 * 10


def test_groups_stride_dilation_padding() -> None:
    # depthwise 3x3, stride 2, padding 2, dilation 2 on 15x15: out = (15+4-4-1)//2+1 = 8
    flops = _conv(
        [1, 32, 15, 15], [32, 1, 3, 3], [], ["[2, 2]", "[2, 2]", "[2, 2]", "False", "[0, 0]", "32"]
    )
    assert flops == 2 * 1 * 32 * 8 * 8 * 1 * 9


def test_transposed_conv_counts_from_the_input_side() -> None:
    # weight (Cin, Cout/g, k, k); out = (8-1)*2 - 2*1 + 1*(3-1) + 1 + 1 = 16
    c = op_cost(
        "aten::convolution",
        [[1, 4, 8, 8], [4, 6, 3, 3], [], [], [], [], [], [], []],
        [BF, BF, "", *CONV_TYPES[3:]],
        None,
        ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"],
    )
    assert c is not None
    assert c.flops == 2 * 1 * 8 * 8 * 4 * 6 * 9
    assert c.bytes == (4 * 64 + 4 * 6 * 9 + 6 * 16 * 16) * 2


def test_backend_ops_read_their_own_argument_order() -> None:
    # miopen_convolution(input, weight, bias, padding, stride, dilation, groups, ...)
    m = op_cost(
        "aten::miopen_convolution",
        [[4, 3, 224, 224], [768, 3, 16, 16], [768], [], [], [], [], [], []],
        [BF, BF, BF, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar"],
        None,
        ["", "", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False"],
    )
    # cudnn_convolution(input, weight, padding, stride, dilation, groups, ...): no bias
    c = op_cost(
        "aten::cudnn_convolution",
        [[4, 3, 224, 224], [768, 3, 16, 16], [], [], [], [], [], []],
        [BF, BF, "ScalarList", "ScalarList", "ScalarList", "Scalar", "Scalar", "Scalar"],
        None,
        ["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False"],
    )
    base = 2 * 4 * 768 * 14 * 14 * 3 * 256
    assert c is not None and c.flops == base
    assert m is not None and m.flops == base + 4 * 768 * 14 * 14


def test_convolution_backward_respects_output_mask() -> None:
    dims = [[10, 512, 7, 7], [10, 512, 7, 7], [512, 512, 3, 3], [], [], [], [], [], [], [], []]
    types = [
        BF,
        BF,
        BF,
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "ScalarList",
        "Scalar",
        "ScalarList",
        "Scalar",
        "ScalarList",
    ]
    conc = ["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    macs = 10 * 512 * 7 * 7 * 512 * 9
    both = op_cost("aten::convolution_backward", dims, types, None, [*conc, "[True, True, False]"])
    weight_only = op_cost(
        "aten::convolution_backward", dims, types, None, [*conc, "[False, True, False]"]
    )
    assert both is not None and both.flops == 4 * macs
    assert weight_only is not None and weight_only.flops == 2 * macs
    assert weight_only.bytes < both.bytes


def test_pooling() -> None:
    c = op_cost(
        "aten::max_pool2d_with_indices",
        [[10, 64, 112, 112], [], [], [], [], []],
        [BF, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        None,
        ["", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False"],
    )
    assert c is not None and c.flops == 10 * 64 * 56 * 56 * 9
    assert c.bytes == (10 * 64 * 112 * 112 + 10 * 64 * 56 * 56) * 2 + 10 * 64 * 56 * 56 * 8


def test_missing_concrete_inputs_give_none() -> None:
    assert op_cost("aten::convolution", [[1, 3, 8, 8], [4, 3, 3, 3]], [BF, BF]) is not None
    # a string padding that is not 'same'/'valid' cannot be read
    assert (
        op_cost(
            "aten::conv2d",
            [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []],
            [BF, BF, "", "ScalarList", "", "ScalarList", "Scalar"],
            None,
            ["", "", "", "[1, 1]", "'full'", "[1, 1]", "1"],
        )
        is None
    )
