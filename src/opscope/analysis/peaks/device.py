"""The peaks of one device (:class:`DevicePeaks`): the type the peaks table and the CPU
measurement both produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A dtype without its own peak uses the next one that exists (a V100 runs bf16 at fp32 speed).
_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp8": ("fp16", "bf16", "fp32"),
    "bf16": ("fp32",),
    "fp16": ("fp32",),
    "tf32": ("fp32",),
    "fp64": ("fp32",),
}


@dataclass(frozen=True)
class DevicePeaks:
    """Peak rates of one device: ``flops`` in FLOP/s per dtype class (``fp32``, ``tf32``,
    ``bf16``, ``fp16``, ``fp8``, ``fp64``; ``vector`` for non-matrix FP32 work), ``bandwidth``
    in bytes/s, the ``source`` of the numbers, and whether they were ``measured`` here."""

    key: str
    name: str
    flops: dict[str, float]
    bandwidth: float
    source: str
    note: str | None = None
    measured: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def peak_flops(self, dtype: str | None, matrix: bool = True) -> float | None:
        """The FLOP/s ceiling of work in ``dtype`` on matrix units (``matrix``) or not.

        Non-matrix work (elementwise, reductions, normalisation) computes in fp32 - PyTorch's
        ``opmath`` type for half types - so its ceiling is the ``vector`` peak, else ``fp32``.
        """
        if not matrix:
            if dtype == "fp64" and "fp64" in self.flops and "vector" not in self.flops:
                return self.flops["fp64"]
            return self.flops.get("vector") or self.flops.get("fp32")
        key = dtype or "fp32"
        for k in (key, *_FALLBACK.get(key, ("fp32",))):
            if k in self.flops:
                return self.flops[k]
        return None

    def ridge(self, dtype: str | None = None, matrix: bool = True) -> float | None:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory to compute."""
        peak = self.peak_flops(dtype, matrix)
        return peak / self.bandwidth if peak and self.bandwidth > 0 else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "key": self.key,
            "name": self.name,
            "flops": dict(self.flops),
            "bandwidth": self.bandwidth,
            "source": self.source,
            "measured": self.measured,
        }
        if self.note:
            d["note"] = self.note
        d.update(self.extra)
        return d
