"""Matrix products: ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear`` and friends.

FLOPs: ``2·M·N·K`` per product (a multiply-add is 2), plus ``M·N`` for the added bias/addend
(``addmm``, ``baddbmm``, ``linear`` with bias) - TraceLens's GEMM formula; torch's flop counter
leaves the addend out (a ``1/(2K)`` difference).  Bytes: each operand read once and the result
written once, at the recorded dtypes.
"""

from __future__ import annotations

import math

from opscope.analysis.costs._common import Call, Cost, CostError, Tensor, broadcast, dtype_class


def _cost(
    flops: float,
    operands: list[Tensor],
    out_numel: int,
    out_itemsize: int,
    *,
    formula: str,
    dtype: str,
) -> Cost:
    nbytes = sum(t.nbytes for t in operands) + out_numel * out_itemsize
    return Cost(flops, nbytes, formula, dtype_class(dtype), matrix=True)


def mm(call: Call) -> Cost:
    a, b = call.tensor(0), call.tensor(1)
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise CostError("mm needs (M,K) x (K,N)")
    m, k = a.shape
    n = b.shape[1]
    return _cost(2 * m * n * k, [a, b], m * n, a.itemsize, formula="gemm 2MNK", dtype=a.dtype)


def addmm(call: Call) -> Cost:
    c, a, b = call.tensor(0), call.tensor(1), call.tensor(2)
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise CostError("addmm needs (M,K) x (K,N)")
    m, k = a.shape
    n = b.shape[1]
    return _cost(
        2 * m * n * k + m * n, [c, a, b], m * n, a.itemsize, formula="gemm 2MNK+MN", dtype=a.dtype
    )


def addmm_activation(call: Call) -> Cost:
    base = addmm(call)
    m, n = call.tensor(1).shape[0], call.tensor(2).shape[1]
    return Cost(base.flops + m * n, base.bytes, "gemm 2MNK+2MN", base.dtype, True)


def bmm(call: Call) -> Cost:
    a, b = call.tensor(0), call.tensor(1)
    if len(a.shape) != 3 or len(b.shape) != 3 or a.shape[2] != b.shape[1]:
        raise CostError("bmm needs (B,M,K) x (B,K,N)")
    bs, m, k = a.shape
    n = b.shape[2]
    return _cost(
        2 * bs * m * n * k, [a, b], bs * m * n, a.itemsize, formula="gemm 2BMNK", dtype=a.dtype
    )


def baddbmm(call: Call) -> Cost:
    c, a, b = call.tensor(0), call.tensor(1), call.tensor(2)
    if len(a.shape) != 3 or len(b.shape) != 3 or a.shape[2] != b.shape[1]:
        raise CostError("baddbmm needs (B,M,K) x (B,K,N)")
    bs, m, k = a.shape
    n = b.shape[2]
    flops = 2 * bs * m * n * k + bs * m * n
    return _cost(flops, [c, a, b], bs * m * n, a.itemsize, formula="gemm 2BMNK+BMN", dtype=a.dtype)


def addbmm(call: Call) -> Cost:
    c, a, b = call.tensor(0), call.tensor(1), call.tensor(2)
    if len(a.shape) != 3 or len(b.shape) != 3 or a.shape[2] != b.shape[1]:
        raise CostError("addbmm needs (B,M,K) x (B,K,N)")
    bs, m, k = a.shape
    n = b.shape[2]
    # the batch is summed into one (M, N) result: B·M·N adds plus the addend
    flops = 2 * bs * m * n * k + m * n
    return _cost(flops, [c, a, b], m * n, a.itemsize, formula="gemm 2BMNK+MN", dtype=a.dtype)


def matmul(call: Call) -> Cost:
    """``torch.matmul`` semantics: 1-D operands are vectors, leading dims broadcast."""
    a, b = call.tensor(0), call.tensor(1)
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        raise CostError("matmul of a 0-d tensor")
    if len(sa) == 1 and len(sb) == 1:
        if sa[0] != sb[0]:
            raise CostError("dot of different lengths")
        return _cost(2 * sa[0], [a, b], 1, a.itemsize, formula="dot 2K", dtype=a.dtype)
    m = 1 if len(sa) == 1 else sa[-2]
    k = sa[-1]
    n = 1 if len(sb) == 1 else sb[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if k != kb:
        raise CostError("matmul inner dimensions differ")
    batch = broadcast(sa[:-2] if len(sa) > 2 else (), sb[:-2] if len(sb) > 2 else ())
    nb = math.prod(batch)
    return _cost(
        2 * nb * m * n * k, [a, b], nb * m * n, a.itemsize, formula="gemm 2BMNK", dtype=a.dtype
    )


def linear(call: Call) -> Cost:
    x, w = call.tensor(0), call.tensor(1)
    bias = call.opt_tensor(2)
    if len(w.shape) != 2 or not x.shape or x.shape[-1] != w.shape[1]:
        raise CostError("linear needs x(..., K) and W(N, K)")
    k = x.shape[-1]
    n = w.shape[0]
    m = math.prod(x.shape[:-1])
    flops = 2 * m * n * k + (m * n if bias is not None else 0)
    operands = [x, w] + ([bias] if bias is not None else [])
    formula = "gemm 2MNK+MN" if bias is not None else "gemm 2MNK"
    return _cost(flops, operands, m * n, x.itemsize, formula=formula, dtype=x.dtype)


def mv(call: Call) -> Cost:
    a, x = call.tensor(0), call.tensor(1)
    if len(a.shape) != 2 or len(x.shape) != 1 or a.shape[1] != x.shape[0]:
        raise CostError("mv needs (M,K) x (K)")
    m, k = a.shape
    return _cost(2 * m * k, [a, x], m, a.itemsize, formula="gemv 2MK", dtype=a.dtype)


def addmv(call: Call) -> Cost:
    c, a, x = call.tensor(0), call.tensor(1), call.tensor(2)
    if len(a.shape) != 2 or len(x.shape) != 1 or a.shape[1] != x.shape[0]:
        raise CostError("addmv needs (M,K) x (K)")
    m, k = a.shape
    return _cost(2 * m * k + m, [c, a, x], m, a.itemsize, formula="gemv 2MK+M", dtype=a.dtype)


def dot(call: Call) -> Cost:
    a, b = call.tensor(0), call.tensor(1)
    if len(a.shape) != 1 or a.shape != b.shape:
        raise CostError("dot needs two vectors of one length")
    return _cost(2 * a.shape[0], [a, b], 1, a.itemsize, formula="dot 2K", dtype=a.dtype)


def scaled_mm(call: Call) -> Cost:
    """``_scaled_mm(A, B, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)``:
    an fp8 GEMM; the result dtype is the recorded ``out_dtype`` (else A's)."""
    a, b = call.tensor(0), call.tensor(1)
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise CostError("_scaled_mm needs (M,K) x (K,N)")
    m, k = a.shape
    n = b.shape[1]
    bias = call.opt_tensor(4)
    out_dtype = call.dtype_code(6) or a.dtype
    operands = [a, b] + [t for t in (call.opt_tensor(2), call.opt_tensor(3), bias) if t]
    out_size = Tensor((1,), out_dtype).itemsize
    flops = 2 * m * n * k + (m * n if bias is not None else 0)
    return _cost(flops, operands, m * n, out_size, formula="gemm 2MNK (scaled)", dtype=a.dtype)
