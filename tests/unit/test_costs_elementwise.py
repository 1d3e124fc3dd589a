"""Elementwise (broadcasting, strides, dtypes), reductions, norms, softmax, embedding, copies,
name handling and unknown ops."""

from __future__ import annotations

import pytest

from opscope.analysis.costs import normalize_name, op_cost

BF = "c10::BFloat16"


def test_unary_and_in_place() -> None:
    c = op_cost("aten::gelu", [[4, 1024]], [BF])
    assert c is not None and c.flops == 4096 and c.bytes == 2 * 4096 * 2 and not c.matrix
    inplace = op_cost("aten::relu_", [[4, 1024]], [BF])
    assert inplace is not None and inplace.bytes == c.bytes


def test_binary_broadcasting_reads_each_operand_once() -> None:
    c = op_cost("aten::mul", [[16, 559, 1024], [1024]], [BF, BF])
    assert c is not None
    assert c.flops == 16 * 559 * 1024
    assert c.bytes == (16 * 559 * 1024 * 2 + 1024) * 2


def test_expanded_operand_counts_its_storage() -> None:
    # an expand()-ed operand has stride 0 along the broadcast dim: one row in memory
    c = op_cost("aten::add", [[64, 128], [64, 128]], ["float", "float"], [[128, 1], [0, 1]])
    assert c is not None and c.bytes == (64 * 128 + 128 + 64 * 128) * 4


def test_scalar_operand_and_promotion_and_comparisons() -> None:
    c = op_cost("aten::mul", [[1000], [], [1000]], [BF, "double", BF])
    assert c is not None and c.flops == 1000
    mixed = op_cost("aten::add", [[10], [10]], [BF, "float"])
    assert mixed is not None and mixed.bytes == 10 * 2 + 10 * 4 + 10 * 4  # result is fp32
    cmp = op_cost("aten::lt", [[10], [10]], ["float", "float"])
    assert cmp is not None and cmp.bytes == 10 * 4 * 2 + 10  # bool result


def test_shapes_that_do_not_broadcast_give_none() -> None:
    assert op_cost("aten::add", [[3, 4], [5]], ["float", "float"]) is None


def test_reductions() -> None:
    s = op_cost(
        "aten::sum",
        [[5, 128], [], [], []],
        ["float", "ScalarList", "Scalar", ""],
        None,
        ["", "[0]", "True", ""],
    )
    assert s is not None and s.flops == 640 and s.bytes == (640 + 128) * 4
    full = op_cost(
        "aten::mean",
        [[5, 128], [], [], [], []],
        ["float", "ScalarList", "Scalar", "", "float"],
        None,
        ["", "[]", "False", "", ""],
    )
    assert full is not None and full.bytes == (640 + 1) * 4
    var = op_cost(
        "aten::var", [[8, 64], [], [], []], ["float"] * 4, None, ["", "[1]", "1", "False"]
    )
    assert var is not None and var.flops == 3 * 512
    # binary max is elementwise, not a reduction
    mx = op_cost("aten::max", [[8], [8]], ["float", "float"])
    assert mx is not None and mx.formula.startswith("binary")


def test_layer_norm_and_rms_norm() -> None:
    dims = [[4, 197, 768], [], [768], [768], []]
    types = [BF, "ScalarList", BF, BF, "Scalar"]
    ln = op_cost("aten::native_layer_norm", dims, types, None, ["", "[768]", "", "", "1e-05"])
    rows = 4 * 197
    assert ln is not None and ln.flops == 5 * rows * 768
    assert ln.bytes == 2 * rows * 768 * 2 + 2 * 768 * 2 + 2 * rows * 4
    rms = op_cost(
        "aten::_fused_rms_norm",
        [[4, 512], [], [512], []],
        [BF, "ScalarList", BF, "Scalar"],
        None,
        ["", "[512]", "", "1e-06"],
    )
    assert rms is not None and rms.flops == 4 * 4 * 512
    assert rms.bytes == 2 * 4 * 512 * 2 + 512 * 2 + 4 * 4


def test_batch_norm_train_and_eval() -> None:
    dims = [[10, 512, 7, 7], [512], [512], [512], [512], [], [], []]
    types = [BF] * 5 + ["Scalar"] * 3
    train = op_cost(
        "aten::native_batch_norm", dims, types, None, ["", "", "", "", "", "True", "0.1", "1e-05"]
    )
    evalm = op_cost(
        "aten::native_batch_norm", dims, types, None, ["", "", "", "", "", "False", "0.1", "1e-05"]
    )
    assert train is not None and evalm is not None
    assert train.flops == 5 * 10 * 512 * 49 and evalm.flops == 2 * 10 * 512 * 49


def test_softmax_and_backward() -> None:
    s = op_cost(
        "aten::_softmax",
        [[8, 128, 128], [], []],
        [BF, "Scalar", "Scalar"],
        None,
        ["", "-1", "True"],
    )
    n = 8 * 128 * 128
    assert s is not None and s.flops == 5 * n and s.bytes == n * 2 + n * 4  # half_to_float
    b = op_cost(
        "aten::_softmax_backward_data",
        [[8, 128], [8, 128], [], []],
        ["float", "float", "Scalar", "Scalar"],
        None,
        ["", "", "-1", "6"],
    )
    assert b is not None and b.flops == 4 * 1024 and b.bytes == 3 * 1024 * 4


def test_embedding_and_copies() -> None:
    e = op_cost(
        "aten::embedding",
        [[30522, 512], [1, 141], [], [], []],
        [BF, "long int", "Scalar", "Scalar", "Scalar"],
    )
    assert e is not None and e.flops == 0 and e.bytes == 141 * 8 + 2 * 141 * 512 * 2
    cp = op_cost("aten::copy_", [[5, 128], [5, 128], []], [BF, "float", "Scalar"])
    assert cp is not None and cp.flops == 0 and cp.bytes == 640 * 4 + 640 * 2
    cast = op_cost(
        "aten::_to_copy",
        [[5, 128], [], [], [], [], [], []],
        ["float", "Scalar", "Scalar", "", "", "Scalar", ""],
        None,
        ["", "15", "0", "", "", "False", ""],
    )
    assert cast is not None and cast.bytes == 640 * 4 + 640 * 2


def test_autograd_nodes_where_the_forward_formula_applies() -> None:
    node = op_cost("autograd::engine::evaluate_function: ReluBackward0", [[5, 128]], ["float"])
    plain = op_cost("ReluBackward0", [[5, 128]], ["float"])
    assert node is not None and node == plain and node.bytes == 3 * 640 * 4
    # a GEMM's backward node records only the incoming gradient: K is unknown, no guess
    assert op_cost("AddmmBackward0", [[5, 128]], ["float"]) is None


@pytest.mark.parametrize(
    "name",
    [
        "aten::frobnicate",
        "c10d::allreduce_",
        "torch::autograd::AccumulateGrad",
        "ProfilerStep#3",
        "aten::cat",
        "aten::empty",
    ],
)
def test_unknown_ops_get_no_numbers(name: str) -> None:
    assert op_cost(name, [[4, 4]], ["float"]) is None


@pytest.mark.parametrize(
    ("dims", "types"),
    [(None, None), ([[4, "x"]], ["float"]), ([[4, 4]], ["mystery"]), ([], []), ([[4, 4]], [])],
)
def test_malformed_arguments_give_none(dims: object, types: object) -> None:
    assert op_cost("aten::relu", dims, types) is None  # type: ignore[arg-type]


def test_name_normalisation() -> None:
    assert normalize_name("aten::add.Tensor") == "add"
    assert normalize_name("aten::add_") == "add_"
    assert normalize_name("autograd::engine::evaluate_function: GeluBackward0") == "GeluBackward0"
    assert normalize_name("mylib::add") is None
