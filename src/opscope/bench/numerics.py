"""Numerics of a variant against a reference, with a dtype-appropriate tolerance.

``|out - ref| <= atol + rtol * |ref|`` element-wise, computed in float64.  Tolerances are those
of ``torch.testing.assert_close`` for float16/bfloat16, widened for float32/float64 because the
variants compared here are different algorithms (a fused kernel reduces in another order), not
the same computation run twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# dtype name -> (rtol, atol)
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1e-5),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1e-2),
}
DEFAULT_TOLERANCE = (1e-5, 1e-5)


@dataclass(frozen=True)
class Numerics:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    rtol: float
    atol: float
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "rtol": self.rtol,
            "atol": self.atol,
            "reason": self.reason,
        }


def tolerance_for(dtype_name: str) -> tuple[float, float]:
    return TOLERANCES.get(dtype_name.replace("torch.", ""), DEFAULT_TOLERANCE)


def compare_outputs(
    out: Any, ref: Any, *, rtol: float | None = None, atol: float | None = None
) -> Numerics:
    """Compare two tensors (any device); a shape or dtype mismatch is a failure, never a crash."""
    import torch

    def mismatch(reason: str, rtol: float, atol: float) -> Numerics:
        return Numerics(False, float("inf"), float("inf"), rtol, atol, reason)

    if not isinstance(out, torch.Tensor) or not isinstance(ref, torch.Tensor):
        return mismatch("output is not a tensor", 0.0, 0.0)
    d_rtol, d_atol = tolerance_for(str(ref.dtype))
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    if out.shape != ref.shape:
        shapes = f"shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}"
        return mismatch(shapes, rtol, atol)
    if out.dtype != ref.dtype:
        return mismatch(f"dtype {out.dtype} differs from the reference's {ref.dtype}", rtol, atol)
    a = out.detach().to("cpu", torch.float64)
    b = ref.detach().to("cpu", torch.float64)
    diff = (a - b).abs()
    finite = torch.isfinite(a) == torch.isfinite(b)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / b.abs().clamp_min(1e-30)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    within = bool(((diff <= atol + rtol * b.abs()) | (a == b)).all()) and bool(finite.all())
    reason = (
        None
        if within
        else f"max abs error {max_abs:.3g} exceeds atol {atol:g} + rtol {rtol:g}·|ref|"
    )
    return Numerics(within, max_abs, max_rel, rtol, atol, reason)
