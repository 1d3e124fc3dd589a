"""Normalisations (layer, RMS, batch, group) and softmax, forward and backward.

FLOPs per element, after fvcore's estimates (``fvcore.nn.jit_handles.norm_flop_counter``,
``batchnorm_flop_jit``): layer/group norm and training-mode batch norm 5 with an affine
transform, 4 without; batch norm in eval mode 2 (affine) or 1; RMS norm one fewer than layer
norm (no mean to subtract).  Softmax 5 (max, subtract, exp, sum, divide), its backward 4.  A
backward normalisation counts twice its forward.  Bytes: input read and output written once,
the affine parameters read once, the per-row statistics (fp32) written once.
"""

from __future__ import annotations

import math

from opscope.analysis.costs._common import Call, Cost, CostError, Tensor, dtype_class

_STAT = 4  # bytes of one fp32 statistic (mean, rstd)


def _norm_size(call: Call, x: Tensor, shape_arg: int, weight: Tensor | None) -> int:
    try:
        return math.prod(call.ints(shape_arg))
    except (CostError, ValueError):
        if weight is not None:
            return weight.numel
        raise


def layer_norm(op: str, call: Call) -> Cost:
    """``layer_norm``/``native_layer_norm(input, normalized_shape, weight, bias, eps)`` and
    ``rms_norm``/``_fused_rms_norm(input, normalized_shape, weight, eps)``."""
    x = call.tensor(0)
    rms = "rms" in op
    weight = call.opt_tensor(2)
    bias = None if rms else call.opt_tensor(3)
    inner = _norm_size(call, x, 1, weight)
    if inner <= 0 or x.numel % inner:
        raise CostError("normalized_shape does not divide the input")
    rows = x.numel // inner
    per = (5 if weight is not None else 4) - (1 if rms else 0)
    stats = (1 if rms else 2) * rows * _STAT
    nbytes = 2 * x.numel * x.itemsize + stats
    nbytes += sum(t.nbytes for t in (weight, bias) if t is not None)
    name = "rms_norm" if rms else "layer_norm"
    return Cost(per * x.numel, nbytes, f"{name} {per}/elem", dtype_class(x.dtype))


def layer_norm_backward(op: str, call: Call) -> Cost:
    """``native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight,
    bias, output_mask)``; ``_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd,
    weight, output_mask)``."""
    g, x = call.tensor(0), call.tensor(1)
    rms = "rms" in op
    weight = call.opt_tensor(4 if rms else 5)
    per = 2 * ((5 if weight is not None else 4) - (1 if rms else 0))
    stat_args = (3,) if rms else (3, 4)
    stats = sum(t.nbytes for t in (call.opt_tensor(i) for i in stat_args) if t is not None)
    # reads grad_out, input, statistics and weight; writes grad_input and grad_weight/bias
    nbytes = g.nbytes + x.nbytes + x.numel * x.itemsize + stats
    if weight is not None:
        nbytes += (2 if rms else 3) * weight.nbytes
    name = "rms_norm" if rms else "layer_norm"
    return Cost(per * x.numel, nbytes, f"{name}_backward {per}/elem", dtype_class(x.dtype))


def batch_norm(op: str, call: Call) -> Cost:
    """``batch_norm``/``native_batch_norm``/``cudnn_batch_norm``/``miopen_batch_norm``/
    ``_batch_norm_impl_index`` ``(input, weight, bias, running_mean, running_var, training,
    ...)`` and ``_native_batch_norm_legit_no_training`` (eval)."""
    x = call.tensor(0)
    weight = call.opt_tensor(1)
    training = False if op.endswith("no_training") else call.bool_(5, False)
    affine = weight is not None
    per = (5 if affine else 4) if training else (2 if affine else 1)
    params = sum(t.nbytes for t in (call.opt_tensor(i) for i in range(1, 5)) if t)
    channels = x.shape[1] if len(x.shape) > 1 else 1
    nbytes = 2 * x.numel * x.itemsize + params + (2 * channels * _STAT if training else 0)
    mode = "train" if training else "eval"
    return Cost(per * x.numel, nbytes, f"batch_norm {mode} {per}/elem", dtype_class(x.dtype))


def batch_norm_backward(call: Call) -> Cost:
    """``native_batch_norm_backward(grad_out, input, weight, running_mean, running_var,
    save_mean, save_invstd, train, eps, output_mask)``."""
    g, x = call.tensor(0), call.tensor(1)
    weight = call.opt_tensor(2)
    per = 2 * (5 if weight is not None else 4)
    params = sum(t.nbytes for t in (call.opt_tensor(i) for i in range(2, 7)) if t)
    nbytes = g.nbytes + x.nbytes + x.numel * x.itemsize + params
    if weight is not None:
        nbytes += 2 * weight.nbytes
    return Cost(per * x.numel, nbytes, f"batch_norm_backward {per}/elem", dtype_class(x.dtype))


def group_norm(op: str, call: Call) -> Cost:
    """``group_norm(input, num_groups, weight, bias, eps)``; ``native_group_norm(input, weight,
    bias, N, C, HxW, group, eps)``."""
    x = call.tensor(0)
    native = op == "native_group_norm"
    weight = call.opt_tensor(1 if native else 2)
    bias = call.opt_tensor(2 if native else 3)
    groups = call.int_(6 if native else 1)
    per = 5 if weight is not None else 4
    batch = x.shape[0] if x.shape else 1
    nbytes = 2 * x.numel * x.itemsize + 2 * batch * groups * _STAT
    nbytes += sum(t.nbytes for t in (weight, bias) if t is not None)
    return Cost(per * x.numel, nbytes, f"group_norm {per}/elem", dtype_class(x.dtype))


def group_norm_backward(call: Call) -> Cost:
    """``native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
    output_mask)``."""
    g, x = call.tensor(0), call.tensor(1)
    weight = call.opt_tensor(4)
    per = 2 * (5 if weight is not None else 4)
    stats = sum(t.nbytes for t in (call.opt_tensor(2), call.opt_tensor(3)) if t)
    nbytes = g.nbytes + x.nbytes + x.numel * x.itemsize + stats
    if weight is not None:
        nbytes += 3 * weight.nbytes
    return Cost(per * x.numel, nbytes, f"group_norm_backward {per}/elem", dtype_class(x.dtype))


def softmax(op: str, call: Call) -> Cost:
    """``softmax``/``_softmax``/``log_softmax``/``_log_softmax(self, dim, half_to_float|dtype)``."""
    x = call.tensor(0)
    out_dtype = x.dtype
    if op.startswith("_") and call.bool_(2, False):
        out_dtype = "float"  # half_to_float
    elif not op.startswith("_"):
        out_dtype = call.dtype_code(2) or x.dtype
    nbytes = x.nbytes + x.numel * Tensor((), out_dtype).itemsize
    return Cost(5 * x.numel, nbytes, "softmax 5/elem", dtype_class(x.dtype))


def softmax_backward(call: Call) -> Cost:
    """``_softmax_backward_data``/``_log_softmax_backward_data(grad_output, output, dim,
    input_dtype)``."""
    g, y = call.tensor(0), call.tensor(1)
    out_dtype = call.dtype_code(3) or g.dtype
    nbytes = g.nbytes + y.nbytes + g.numel * Tensor((), out_dtype).itemsize
    return Cost(4 * g.numel, nbytes, "softmax_backward 4/elem", dtype_class(g.dtype))
