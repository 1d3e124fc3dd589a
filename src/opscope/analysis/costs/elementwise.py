"""Elementwise ops (unary, binary, ternary, with broadcasting), copies and casts, fills.

FLOPs: ``k`` per output element, ``k = 1`` for one arithmetic operation or one transcendental
function (TraceLens's unary/binary count; a ``gelu`` is more instructions than an ``add``, but
these ops are bounded by memory far below the point where that matters), ``k = 3`` for the
fused ``addcmul``/``addcdiv``/``lerp``.  Copies, casts and fills do no FLOPs.  Bytes: every
tensor operand read once at its storage size (a broadcast view is read once), the result written
once at its dtype (``bool`` for comparisons).
"""

from __future__ import annotations

import math

from opscope.analysis.costs._common import (
    Call,
    Cost,
    CostError,
    Tensor,
    broadcast,
    dtype_class,
    promote,
)

UNARY = frozenset(
    [
        "abs",
        "neg",
        "negative",
        "relu",
        "relu6",
        "gelu",
        "silu",
        "mish",
        "selu",
        "celu",
        "elu",
        "leaky_relu",
        "hardswish",
        "hardsigmoid",
        "hardtanh",
        "hardshrink",
        "softshrink",
        "tanhshrink",
        "softplus",
        "sigmoid",
        "log_sigmoid",
        "logit",
        "tanh",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "square",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "asinh",
        "acosh",
        "atanh",
        "erf",
        "erfc",
        "erfinv",
        "sign",
        "sgn",
        "floor",
        "ceil",
        "round",
        "trunc",
        "frac",
        "clamp",
        "clamp_min",
        "clamp_max",
        "clip",
        "threshold",
        "logical_not",
        "bitwise_not",
        "isnan",
        "isinf",
        "isfinite",
        "nan_to_num",
        "signbit",
        "digamma",
        "lgamma",
        "i0",
        "angle",
        "positive",
    ]
)
# comparisons and logical binary ops: binary elementwise ops with a bool result
_COMPARISONS = frozenset(
    [
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "greater",
        "less",
        "greater_equal",
        "less_equal",
        "not_equal",
        "equal",
        "logical_and",
        "logical_or",
        "logical_xor",
    ]
)
BINARY = (
    frozenset(
        [
            "add",
            "sub",
            "subtract",
            "rsub",
            "mul",
            "multiply",
            "div",
            "divide",
            "true_divide",
            "floor_divide",
            "remainder",
            "fmod",
            "pow",
            "float_power",
            "maximum",
            "minimum",
            "fmax",
            "fmin",
            "atan2",
            "arctan2",
            "hypot",
            "copysign",
            "xlogy",
            "bitwise_and",
            "bitwise_or",
            "bitwise_xor",
            "__and__",
            "__or__",
            "__xor__",
            "__lshift__",
            "__rshift__",
            "bitwise_left_shift",
            "bitwise_right_shift",
            "where",
            "masked_fill",
            "heaviside",
            "nextafter",
            "threshold_backward",
            "gelu_backward",
            "silu_backward",
            "sigmoid_backward",
            "tanh_backward",
            "hardswish_backward",
            "hardsigmoid_backward",
            "hardtanh_backward",
            "leaky_relu_backward",
            "elu_backward",
            "softplus_backward",
            "mish_backward",
            "logit_backward",
        ]
    )
    | _COMPARISONS
)
# several operations per element
_FLOPS_PER_ELEMENT = {"addcmul": 3, "addcdiv": 3, "lerp": 3, "mse_loss_backward": 3}
TERNARY = frozenset(_FLOPS_PER_ELEMENT)
_BOOL_RESULT = (_COMPARISONS - {"equal"}) | {"logical_not", "isnan", "isinf", "isfinite", "signbit"}
# torch.autograd nodes whose backward is one elementwise pass over the gradient and a saved
# tensor of the same shape (Kineto records only the incoming gradient's shape for a node)
AUTOGRAD_ELEMENTWISE = frozenset(
    f"{n}Backward{v}"
    for n in [
        "Relu",
        "Gelu",
        "Silu",
        "Sigmoid",
        "Tanh",
        "Exp",
        "Log",
        "Sqrt",
        "Rsqrt",
        "Neg",
        "Abs",
        "Hardswish",
        "Hardsigmoid",
        "Hardtanh",
        "LeakyRelu",
        "Elu",
        "Softplus",
        "Threshold",
        "Mish",
        "Erf",
        "Sin",
        "Cos",
        "Reciprocal",
        "Pow",
        "Clamp",
        "ClampMin",
        "ClampMax",
    ]
    for v in (0, 1)
)


def elementwise(op: str, call: Call) -> Cost:
    tensors = call.tensors()
    if not tensors:
        raise CostError("no tensor operand")
    out_shape = broadcast(*(t.shape for t in tensors))
    out_numel = math.prod(out_shape)
    if op.endswith("_") and not op.endswith("__"):
        out_dtype = tensors[0].dtype  # in place: the result keeps self's dtype
    elif op.rstrip("_") in _BOOL_RESULT:
        out_dtype = "bool"
    else:
        out_dtype = promote(*(t.dtype for t in tensors))
    k = _FLOPS_PER_ELEMENT.get(op.rstrip("_"), 1)
    nbytes = sum(t.nbytes for t in tensors) + out_numel * Tensor((), out_dtype).itemsize
    arity = {1: "unary", 2: "binary"}.get(len(tensors), "n-ary")
    return Cost(
        k * out_numel,
        nbytes,
        f"{arity} elementwise {k}/elem",
        dtype_class(out_dtype) or dtype_class(tensors[0].dtype),
    )


def autograd_elementwise(call: Call) -> Cost:
    """An elementwise autograd node: reads the gradient and one saved tensor of its shape,
    writes the input gradient."""
    g = call.tensor(0)
    return Cost(
        g.numel, 3 * g.numel * g.itemsize, "elementwise backward 1/elem", dtype_class(g.dtype)
    )


def dropout(call: Call) -> Cost:
    """``native_dropout(input, p, train)``: a random draw and a scale per element; writes the
    result and a bool mask."""
    x = call.tensor(0)
    if not call.bool_(2, True):
        raise CostError("dropout in eval mode is a no-op")
    return Cost(
        2 * x.numel, x.nbytes + x.numel * (x.itemsize + 1), "dropout 2/elem", dtype_class(x.dtype)
    )


def copy(op: str, call: Call) -> Cost:
    """``copy_(self, src)``, ``_to_copy(self, dtype, ...)``, ``to(self, dtype, ...)``,
    ``clone(self)``: read the source, write the destination; no FLOPs."""
    if op == "copy_":
        dst, src = call.tensor(0), call.tensor(1)
        nbytes = src.nbytes + dst.numel * dst.itemsize
        return Cost(0, nbytes, "copy src+dst", dtype_class(dst.dtype))
    src = call.tensor(0)
    out_dtype = src.dtype
    if op in ("_to_copy", "to"):
        out_dtype = call.dtype_code(1) or src.dtype
    nbytes = src.nbytes + src.numel * Tensor((), out_dtype).itemsize
    return Cost(0, nbytes, "copy src+dst", dtype_class(out_dtype))


def fill(call: Call) -> Cost:
    """``fill_``/``zero_``/``normal_``/``uniform_``...: write every element once."""
    x = call.tensor(0)
    return Cost(0, x.numel * x.itemsize, "fill dst", dtype_class(x.dtype))
