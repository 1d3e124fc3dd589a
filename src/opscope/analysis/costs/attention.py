"""Scaled-dot-product attention: the fused kernels (flash, memory-efficient, cuDNN, CPU flash,
the overrideable one of other backends), forward and backward.

Forward FLOPs: ``2·B·Hq·Sq·Sk·Dqk`` for ``QKᵀ`` plus ``2·B·Hq·Sq·Sk·Dv`` for ``PV``
(``torch.utils.flop_counter.sdpa_flop_count``; softmax is ``O(1/D)`` of that and left out, as
TraceLens and FlashAttention's benchmarks do).  Grouped-query attention counts query heads:
every query head attends, however few key/value heads it shares.  A causal mask keeps the
fraction of (query, key) pairs under the diagonal (exactly 1/2 when ``Sq == Sk``; PyTorch's
``is_causal`` is aligned top-left, the efficient kernel's ``custom_mask_type=2`` bottom-right).

Backward FLOPs: four products of the forward's size each side (``dV = PᵀdO``, ``dP = dO·Vᵀ``,
``dQ = dS·K``, ``dK = dSᵀQ``: twice the forward) plus the fused kernels' recomputation of
``QKᵀ`` - 2.5× the forward when ``Dqk == Dv`` (TraceLens, FlashAttention's benchmark).

Bytes: Q, K, V (and a mask/bias tensor) read, O written; backward reads dO, Q, K, V, O and the
log-sum-exp, and writes dQ, dK, dV.
"""

from __future__ import annotations

from dataclasses import dataclass

from opscope.analysis.costs._common import Call, Cost, CostError, Tensor, dtype_class


@dataclass(frozen=True)
class Spec:
    """Where an attention op keeps its arguments."""

    layout: str  # "bhsd" (the _scaled_dot_product_* ops) or "bshd" (the raw kernels)
    backward: bool
    causal: int | None  # position of is_causal
    mask_type: int | None = None  # position of custom_mask_type (efficient kernels)
    bias: int | None = None  # position of an attention mask / bias tensor
    fused: bool = True  # recomputes QKᵀ in the backward pass


SPECS: dict[str, Spec] = {
    "scaled_dot_product_attention": Spec("bhsd", False, 5, bias=3, fused=False),
    "_scaled_dot_product_attention_math": Spec("bhsd", False, 5, bias=3, fused=False),
    "_scaled_dot_product_flash_attention": Spec("bhsd", False, 4),
    "_scaled_dot_product_flash_attention_for_cpu": Spec("bhsd", False, 4, bias=5),
    "_scaled_dot_product_efficient_attention": Spec("bhsd", False, 6, bias=3),
    "_scaled_dot_product_cudnn_attention": Spec("bhsd", False, 6, bias=3),
    "_scaled_dot_product_fused_attention_overrideable": Spec("bhsd", False, 5, bias=3),
    "_flash_attention_forward": Spec("bshd", False, 8),
    "_efficient_attention_forward": Spec("bshd", False, None, mask_type=9, bias=3),
    "_scaled_dot_product_flash_attention_backward": Spec("bhsd", True, 11),
    "_scaled_dot_product_flash_attention_for_cpu_backward": Spec("bhsd", True, 7),
    "_scaled_dot_product_efficient_attention_backward": Spec("bhsd", True, 11),
    "_scaled_dot_product_cudnn_attention_backward": Spec("bhsd", True, 14),
    "_flash_attention_backward": Spec("bshd", True, 11),
    "_efficient_attention_backward": Spec("bshd", True, None, mask_type=14),
}


def causal_fraction(sq: int, sk: int, bottom_right: bool = False) -> float:
    """Share of (query, key) pairs a causal mask keeps (the area under its diagonal)."""
    if sq <= 0 or sk <= 0:
        return 0.0
    if bottom_right:
        return 1 - sq / (2 * sk) if sq <= sk else sk / (2 * sq)
    return sq / (2 * sk) if sq <= sk else 1 - sk / (2 * sq)


def _bhsd(t: Tensor, layout: str) -> tuple[int, int, int, int]:
    s = t.shape
    if layout == "bhsd":
        if len(s) == 4:
            return s[0], s[1], s[2], s[3]
        if len(s) == 3:  # unbatched (H, S, D)
            return 1, s[0], s[1], s[2]
    elif len(s) == 4:
        return s[0], s[2], s[1], s[3]
    # a 3-D "bshd" tensor is a packed variable-length batch: lengths are not recorded
    raise CostError("attention tensors of unsupported rank (variable-length batch?)")


def attention(op: str, call: Call) -> Cost:
    spec = SPECS[op]
    first = 1 if spec.backward else 0
    q, k, v = call.tensor(first), call.tensor(first + 1), call.tensor(first + 2)
    b, hq, sq, dqk = _bhsd(q, spec.layout)
    bk, hk, sk, dk = _bhsd(k, spec.layout)
    _, hv, sv, dv = _bhsd(v, spec.layout)
    if bk != b or dk != dqk or sv != sk or hk != hv or hq % hk:
        raise CostError("query/key/value shapes do not fit attention")
    fraction = 1.0
    formula = "sdpa 4·B·H·Sq·Sk·D"
    if spec.mask_type is not None:
        mask_type = call.int_(spec.mask_type, 0)
        if mask_type in (1, 2):
            fraction = causal_fraction(sq, sk, bottom_right=mask_type == 2)
            formula += " causal"
    elif spec.causal is not None and call.bool_(spec.causal, False):
        fraction = causal_fraction(sq, sk)
        formula += " causal"
    fwd = 2 * b * hq * sq * sk * dqk + 2 * b * hq * sq * sk * dv
    size = q.itemsize
    out_numel = b * hq * sq * dv
    if not spec.backward:
        flops = fwd * fraction
        nbytes = q.nbytes + k.nbytes + v.nbytes + out_numel * size
        if spec.bias is not None and call.is_tensor(spec.bias):
            nbytes += call.tensor(spec.bias).nbytes
        return Cost(flops, nbytes, formula, dtype_class(q.dtype), matrix=True)
    recompute = 2 * b * hq * sq * sk * dqk if spec.fused else 0
    flops = (2 * fwd + recompute) * fraction
    grad_out = call.tensor(0)
    lse = b * hq * sq * 4  # the fp32 log-sum-exp saved by the forward pass
    nbytes = (
        grad_out.nbytes
        + 2 * (q.nbytes + k.nbytes + v.nbytes)  # read, and written as gradients
        + out_numel * size
        + lse
    )
    formula = formula.replace("4·", "10·" if spec.fused else "8·") + " backward"
    return Cost(flops, nbytes, formula, dtype_class(q.dtype), matrix=True)
