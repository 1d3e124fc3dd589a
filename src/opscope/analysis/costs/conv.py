"""Convolutions (forward, transposed, backward) and pooling.

A convolution is ``N·Cout·prod(out)·(Cin/groups)·prod(kernel)`` multiply-adds (2 FLOPs each),
``torch.utils.flop_counter.conv_flop_count``; a transposed one the same count read from the
input side.  The bias adds ``N·Cout·prod(out)``.  The backward pass computes each requested
gradient (``output_mask``) with the forward's multiply-add count (input and weight gradients are
convolutions of the same size; torch's flop counter counts the weight gradient of a grouped
convolution ``groups`` times too high).  Bytes: each operand read once, each result written once.
"""

from __future__ import annotations

import math
import re

from opscope.analysis.costs._common import Call, Cost, CostError, Tensor, dtype_class

# Concrete-input positions (stride, padding, dilation, transposed, output_padding, groups) of
# each convolution op's schema (native_functions.yaml); None = not an argument of that op.
_Layout = tuple[int | None, int | None, int | None, int | None, int | None, int | None, int | None]
# (bias, stride, padding, dilation, transposed, output_padding, groups)
CONV_LAYOUTS: dict[str, _Layout] = {
    "convolution": (2, 3, 4, 5, 6, 7, 8),
    "_convolution": (2, 3, 4, 5, 6, 7, 8),
    "conv1d": (2, 3, 4, 5, None, None, 6),
    "conv2d": (2, 3, 4, 5, None, None, 6),
    "conv3d": (2, 3, 4, 5, None, None, 6),
    "conv_transpose1d": (2, 3, 4, 7, -1, 5, 6),
    "conv_transpose2d": (2, 3, 4, 7, -1, 5, 6),
    "conv_transpose3d": (2, 3, 4, 7, -1, 5, 6),
    "cudnn_convolution": (None, 3, 2, 4, None, None, 5),
    "cudnn_convolution_transpose": (None, 4, 2, 5, -1, 3, 6),
    "miopen_convolution": (2, 4, 3, 5, None, None, 6),
    "miopen_depthwise_convolution": (2, 4, 3, 5, None, None, 6),
    "miopen_convolution_transpose": (2, 5, 3, 6, -1, 4, 7),
    "mkldnn_convolution": (2, 4, 3, 5, None, None, 6),
}


def _out_size(size: int, k: int, s: int, p: int, d: int) -> int:
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _t_out_size(size: int, k: int, s: int, p: int, d: int, *, op: int) -> int:
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


def _geometry(
    x: Tensor, w: Tensor, call: Call, layout: _Layout
) -> tuple[int, tuple[int, ...], tuple[int, ...], bool, int, int]:
    """(batch, input spatial, output spatial, transposed, groups, output channels)."""
    _, i_stride, i_pad, i_dil, i_tr, i_opad, i_groups = layout
    nsp = len(w.shape) - 2
    if nsp < 1:
        raise CostError("convolution weight has no spatial dims")
    if len(x.shape) == nsp + 2:
        batch, spatial = x.shape[0], x.shape[2:]
    elif len(x.shape) == nsp + 1:  # unbatched input
        batch, spatial = 1, x.shape[1:]
    else:
        raise CostError("input and weight ranks disagree")
    kernel = w.shape[2:]
    stride = call.ints(i_stride, nsp, 1) if i_stride is not None else (1,) * nsp
    dil = call.ints(i_dil, nsp, 1) if i_dil is not None else (1,) * nsp
    pad_text = call.raw(i_pad).strip().strip("'\"") if i_pad is not None else ""
    transposed = True if i_tr == -1 else (call.bool_(i_tr, False) if i_tr is not None else False)
    groups = call.int_(i_groups, 1) if i_groups is not None else 1
    if pad_text == "same":
        if transposed:
            raise CostError("padding='same' with a transposed convolution")
        out = tuple(spatial)
    else:
        pad = (
            (0,) * nsp if pad_text == "valid" else call.ints(i_pad, nsp, 0) if i_pad else (0,) * nsp
        )
        if transposed:
            opad = call.ints(i_opad, nsp, 0) if i_opad is not None else (0,) * nsp
            out = tuple(
                _t_out_size(spatial[j], kernel[j], stride[j], pad[j], dil[j], op=opad[j])
                for j in range(nsp)
            )
        else:
            out = tuple(
                _out_size(spatial[j], kernel[j], stride[j], pad[j], dil[j]) for j in range(nsp)
            )
    if any(o <= 0 for o in out) or groups <= 0:
        raise CostError("empty convolution output")
    cout = w.shape[1] * groups if transposed else w.shape[0]
    return batch, tuple(spatial), out, transposed, groups, cout


def _macs(
    batch: int, spatial: tuple[int, ...], out: tuple[int, ...], transposed: bool, w: Tensor
) -> int:
    # forward: every output element sums Cin/g·prod(k) products; transposed: every input
    # element scatters into Cout/g·prod(k) outputs (w is (Cin, Cout/g, k...)).
    if transposed:
        return batch * math.prod(spatial) * math.prod(w.shape)
    return batch * math.prod(out) * math.prod(w.shape)


def convolution(op: str, call: Call) -> Cost:
    layout = CONV_LAYOUTS[op]
    x, w = call.tensor(0), call.tensor(1)
    bias = call.opt_tensor(layout[0]) if layout[0] is not None else None
    batch, spatial, out, transposed, _groups, cout = _geometry(x, w, call, layout)
    out_numel = batch * cout * math.prod(out)
    flops = 2 * _macs(batch, spatial, out, transposed, w)
    if bias is not None:
        flops += out_numel
    nbytes = x.nbytes + w.nbytes + (bias.nbytes if bias else 0) + out_numel * x.itemsize
    formula = "conv 2·N·Cout·out·Cin/g·k" + ("+bias" if bias is not None else "")
    if transposed:
        formula = "conv_transpose 2·N·Cin·in·Cout/g·k" + ("+bias" if bias is not None else "")
    return Cost(flops, nbytes, formula, dtype_class(x.dtype), matrix=True)


def convolution_backward(call: Call) -> Cost:
    """``convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    dilation, transposed, output_padding, groups, output_mask)``."""
    g, x, w = call.tensor(0), call.tensor(1), call.tensor(2)
    layout: _Layout = (None, 4, 5, 6, 7, 8, 9)
    batch, spatial, out, transposed, _groups, cout = _geometry(x, w, call, layout)
    mask_text = call.raw(10).lower()
    mask = [m.strip() == "true" for m in mask_text.strip("[] ").split(",")]
    if len(mask) != 3:
        mask = [True, True, False]
    macs = _macs(batch, spatial, out, transposed, w)
    flops = 2 * macs * (int(mask[0]) + int(mask[1]))
    if mask[2]:
        flops += g.numel  # the bias gradient sums grad_output
    nbytes = g.nbytes
    if mask[0]:
        nbytes += w.nbytes + x.numel * x.itemsize  # reads the weight, writes grad_input
    if mask[1]:
        nbytes += x.nbytes + w.numel * w.itemsize  # reads the input, writes grad_weight
    if mask[2]:
        nbytes += cout * g.itemsize
    return Cost(flops, nbytes, "conv_backward 2·MACs per gradient", dtype_class(x.dtype), True)


# --- pooling ------------------------------------------------------------------------------


def _pool_out(size: int, k: int, s: int, p: int, d: int, *, ceil: bool) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= size + p:  # the last window must start inside the input
        o -= 1
    return o


def pool(op: str, call: Call) -> Cost:
    """``max_poolNd(_with_indices)(self, kernel, stride, padding, dilation, ceil_mode)`` and
    ``avg_poolNd(self, kernel, stride, padding, ceil_mode, ...)``: one compare/add per window
    element of every output."""
    x = call.tensor(0)
    found = re.search(r"pool(\d)d", op)
    if found is None:
        raise CostError(f"not a pooling op: {op}")
    nsp = int(found.group(1))
    kernel = call.ints(1, nsp)
    stride = call.ints(2, nsp, 0)
    if all(s == 0 for s in stride):
        stride = kernel
    pad = call.ints(3, nsp, 0)
    is_max = op.startswith("max")
    dil = call.ints(4, nsp, 1) if is_max else (1,) * nsp
    ceil = call.bool_(5 if is_max else 4, False)
    lead, spatial = x.shape[: len(x.shape) - nsp], x.shape[len(x.shape) - nsp :]
    out = tuple(
        _pool_out(spatial[j], kernel[j], stride[j], pad[j], dil[j], ceil=ceil) for j in range(nsp)
    )
    out_numel = math.prod(lead) * math.prod(out)
    flops = out_numel * math.prod(kernel)
    nbytes = x.nbytes + out_numel * x.itemsize
    if op.endswith("with_indices"):
        nbytes += out_numel * 8
    return Cost(flops, nbytes, "pool out·prod(k)", dtype_class(x.dtype))


def adaptive_pool(call: Call) -> Cost:
    """``adaptive_{avg,max}_poolNd(self, output_size)``: every input element is read about
    once; one add/compare per input element."""
    x = call.tensor(0)
    size = call.ints(1)
    nsp = len(size)
    lead = x.shape[: len(x.shape) - nsp]
    out_numel = math.prod(lead) * math.prod(size)
    return Cost(
        x.numel, x.nbytes + out_numel * x.itemsize, "adaptive_pool in", dtype_class(x.dtype)
    )
