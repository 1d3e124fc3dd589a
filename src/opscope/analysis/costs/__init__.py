"""The cost model: FLOPs and bytes moved by one call of an op, from what the profiler recorded.

``op_cost(name, input_dims, input_types, input_strides, concrete)`` returns a
:class:`Cost` (``flops``, ``bytes``, ``formula``, ``dtype``, ``matrix``) or None.  None means
the op is unknown to the model or its recorded arguments do not determine the work (a
variable-length attention batch, a tensor list without dtypes): the model never guesses.

Names are matched after dropping ``aten::``, an overload suffix (``.Tensor``) and the
``autograd::engine::evaluate_function:`` wrapper; an in-place ``op_`` uses the ``op`` formula.
Every formula and its source is in docs/cost-model.md.  Pure Python: no torch, no numpy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from opscope.analysis.costs import attention, conv, elementwise, gemm, memory, norm, reduction
from opscope.analysis.costs._common import Call, Cost, CostError, dtype_class, itemsize
from opscope.analysis.opsets import REDUCTIONS

__all__ = ["Cost", "dtype_class", "itemsize", "normalize_name", "op_cost"]

_Formula = Callable[[str, Call], Cost]


def _plain(fn: Callable[[Call], Cost]) -> _Formula:
    return lambda _op, call: fn(call)


def _registry() -> dict[str, _Formula]:
    r: dict[str, _Formula] = {
        "mm": _plain(gemm.mm),
        "addmm": _plain(gemm.addmm),
        "_addmm_activation": _plain(gemm.addmm_activation),
        "bmm": _plain(gemm.bmm),
        "baddbmm": _plain(gemm.baddbmm),
        "addbmm": _plain(gemm.addbmm),
        "matmul": _plain(gemm.matmul),
        "linear": _plain(gemm.linear),
        "mv": _plain(gemm.mv),
        "addmv": _plain(gemm.addmv),
        "dot": _plain(gemm.dot),
        "vdot": _plain(gemm.dot),
        "_scaled_mm": _plain(gemm.scaled_mm),
        "convolution_backward": _plain(conv.convolution_backward),
        "embedding": _plain(memory.embedding),
        "embedding_dense_backward": _plain(memory.embedding_backward),
        "index_select": _plain(memory.index_select),
        "gather": _plain(memory.gather),
        "native_dropout": _plain(elementwise.dropout),
        "copy_": elementwise.copy,
        "_to_copy": elementwise.copy,
        "to": elementwise.copy,
        "clone": elementwise.copy,
        "fill_": _plain(elementwise.fill),
        "zero_": _plain(elementwise.fill),
        "normal_": _plain(elementwise.fill),
        "uniform_": _plain(elementwise.fill),
        "native_layer_norm_backward": norm.layer_norm_backward,
        "_fused_rms_norm_backward": norm.layer_norm_backward,
        "native_batch_norm_backward": _plain(norm.batch_norm_backward),
        "native_group_norm_backward": _plain(norm.group_norm_backward),
        "_softmax_backward_data": _plain(norm.softmax_backward),
        "_log_softmax_backward_data": _plain(norm.softmax_backward),
        "adaptive_avg_pool1d": _plain(conv.adaptive_pool),
        "adaptive_avg_pool2d": _plain(conv.adaptive_pool),
        "adaptive_avg_pool3d": _plain(conv.adaptive_pool),
        "_adaptive_avg_pool2d": _plain(conv.adaptive_pool),
        "_adaptive_avg_pool3d": _plain(conv.adaptive_pool),
        "adaptive_max_pool2d": _plain(conv.adaptive_pool),
    }
    for op in conv.CONV_LAYOUTS:
        r[op] = conv.convolution
    for op in attention.SPECS:
        r[op] = attention.attention
    for nd in (1, 2, 3):
        for op in (f"max_pool{nd}d", f"max_pool{nd}d_with_indices", f"avg_pool{nd}d"):
            r[op] = conv.pool
    for op in ("layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm"):
        r[op] = norm.layer_norm
    for op in (
        "batch_norm",
        "native_batch_norm",
        "_batch_norm_impl_index",
        "cudnn_batch_norm",
        "miopen_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
    ):
        r[op] = norm.batch_norm
    for op in ("group_norm", "native_group_norm"):
        r[op] = norm.group_norm
    for op in ("softmax", "_softmax", "log_softmax", "_log_softmax", "special_softmax"):
        r[op] = norm.softmax
    for op in REDUCTIONS:
        r[op] = reduction.reduction
    for op in ("max", "min"):  # max(a, b) is elementwise, max(a[, dim]) a reduction
        r[op] = _max_min
    for op in elementwise.UNARY | elementwise.BINARY | elementwise.TERNARY:
        r.setdefault(op, elementwise.elementwise)
    for op in elementwise.AUTOGRAD_ELEMENTWISE:
        r[op] = _plain(elementwise.autograd_elementwise)
    return r


def _max_min(op: str, call: Call) -> Cost:
    if call.is_tensor(1):
        return elementwise.elementwise(op, call)
    return reduction.reduction(op, call)


FORMULAS: dict[str, _Formula] = _registry()
_AUTOGRAD_PREFIX = "autograd::engine::evaluate_function: "


@functools.lru_cache(maxsize=8192)
def normalize_name(name: str) -> str | None:
    """The registry key of a recorded op name, or None when the model does not know it."""
    n = name.strip()
    if n.startswith(_AUTOGRAD_PREFIX):
        n = n[len(_AUTOGRAD_PREFIX) :].strip()
    if n.startswith("aten::"):
        n = n[6:]
    elif "::" in n:
        return None  # another namespace (c10d::, torch::autograd::, a custom op)
    n = n.split(".", 1)[0]
    if n in FORMULAS:
        return n
    if n.endswith("_") and not n.endswith("__") and n[:-1] in FORMULAS:
        return n  # in place: the formula of the out-of-place op, keyed by the in-place name
    return None


def op_cost(
    name: str,
    input_dims: Sequence[Any],
    input_types: Sequence[Any],
    input_strides: Sequence[Any] | None = None,
    concrete: Sequence[Any] | None = None,
) -> Cost | None:
    """FLOPs and bytes of one call of ``name`` with these recorded arguments, or None.

    Never raises on malformed or unexpected arguments: they give None.
    """
    key = normalize_name(name)
    if key is None or input_dims is None or input_types is None:
        return None
    formula = FORMULAS.get(key) or FORMULAS[key[:-1]]
    try:
        cost = formula(key, Call(input_dims, input_types, input_strides, concrete))
    except (CostError, ValueError, TypeError, IndexError, KeyError, ZeroDivisionError):
        return None
    if cost.flops < 0 or cost.bytes < 0:
        return None
    return cost
