"""A comparison of variants of a function (``opscope.compare/1``, ``opscope.compare(...)
.to_dict()``): identical inputs, numerics checked, interleaved steady-state timing, speedups
with 95 % intervals and a verdict."""

from typing import Literal

from opscope.documents._typing import TypedDict
from opscope.documents.devices import CaptureDevice


class Latency(TypedDict):
    """Steady-state time of one call, µs."""

    median: float
    iqr: float
    """Interquartile range, µs."""
    ci95: list[float]
    """95 % interval of the median, ``[low, high]``, µs."""


class Speedup(TypedDict):
    point: float
    """The reference's time over the variant's (median of the per-round ratios)."""
    ci95: list[float | None]
    """95 % bootstrap interval, ``[low, high]``."""


class CompareVariant(TypedDict):
    name: str
    numerics_ok: bool
    """The output matches the reference's within tolerance."""
    max_abs_err: float | None
    """Against the reference's output (null: not compared; a mismatch of shape or dtype is
    infinite, written as null)."""
    max_rel_err: float | None
    numerics_reason: str | None
    """Why the numerics do not match."""
    compile_s: float | None
    """The first call's time when it compiled anything, s (None: nothing compiled)."""
    recompiled_during_measurement: bool
    latency_us: Latency | None
    device_ops: int | None
    """Device executions per call, from the variant's profile."""
    device_us: float | None
    """Device time per call, from the profile, µs."""
    cpu_us: float | None
    speedup: Speedup | None
    verdict: str | None
    """``reference``, ``faster``, ``slower``, ``same``, ``unstable`` (recompiled while
    measured), ``differs`` (numerics) or ``error``."""
    run_dir: str | None
    """The run folder of the variant's profile."""
    error: str | None


class Compare(TypedDict):
    """Variants of a function compared honestly (``opscope.compare/1``)."""

    schema: Literal["opscope.compare/1"]
    device: CaptureDevice
    reference: str
    """The variant the others are compared with."""
    noise_floor: float
    """No speedup is claimed below this relative change."""
    variants: list[CompareVariant]
    notes: list[str]
    """About the measurement itself."""


__all__ = ["Compare", "CompareVariant", "Latency", "Speedup"]
