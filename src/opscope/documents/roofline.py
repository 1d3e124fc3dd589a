"""The roofline (``opscope.roofline/1``): FLOPs, bytes and bound of every op, per name and per
(op, input shapes); the report's ``roofline`` section and ``opscope report --roofline``."""

from typing import Literal

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.peaks import DevicePeaks


class RooflineRow(TypedDict):
    """One op name (``ops``) or one (op, input shapes) row (``op_shapes``, which carry
    ``input_dims`` and ``input_types``).  Times are device self times (on a CPU-only trace the
    CPU self time of the ops that computed)."""

    name: str
    input_dims: NotRequired[str | None]
    """(shape rows) The recorded ``Input Dims``, as JSON text."""
    input_types: NotRequired[str | None]
    """(shape rows) The recorded ``Input type``, as JSON text."""
    calls: int
    costed_calls: int
    """Calls the cost model could cost (known shapes and dtype)."""
    device_self_us: float
    costed_us: float
    """Device self time of the costed calls, µs: the rates' denominator."""
    flops: float | None
    """FLOPs over the costed calls in the window (None: not costed)."""
    bytes: float | None
    """Bytes moved over the costed calls (None: not costed)."""
    flops_per_call: float | None
    bytes_per_call: float | None
    intensity: float | None
    """Arithmetic intensity, FLOP/byte."""
    achieved_flops: float | None
    """FLOP/s over the costed device time."""
    achieved_bandwidth: float | None
    """Bytes/s over the costed device time."""
    compute_us: float | None
    """FLOPs over the dtype's peak, µs."""
    memory_us: float | None
    """Bytes over the memory bandwidth, µs."""
    roofline_us: float | None
    """``max(compute_us, memory_us)``: the time the roofline allows."""
    roofline_share: float | None
    """``roofline_us`` over the costed device time (1.0: on the roofline)."""
    bound: str | None
    """``compute``, ``memory`` or ``overhead`` (device time over 10x the roofline time);
    None when unknown."""
    dtype: str | None
    """The dtype class whose peak applies (``fp32``, ``bf16``...)."""
    matrix: bool
    """Runs on matrix units (matmuls, convolutions), else vector units."""
    formula: str | None
    """The cost model's formula for the op."""


class RooflineDevice(TypedDict):
    kind: str
    name: str


class RooflineTotals(TypedDict):
    """Sums over the shape rows."""

    flops: float
    bytes: float
    device_self_us: float
    """Device self time of every shape row, µs."""
    costed_device_self_us: float
    """Device self time of the costed shape rows, µs."""
    coverage: float | None
    """``costed_device_self_us`` over ``device_self_us`` (None: no device time)."""


class Roofline(TypedDict):
    """FLOPs, bytes, arithmetic intensity and roofline position of every op
    (``opscope.roofline/1``)."""

    schema: Literal["opscope.roofline/1"]
    device: RooflineDevice
    peaks: DevicePeaks | None
    """The device's peaks (None: unknown, so no bound)."""
    overhead_factor: float
    """Device time over this many times the roofline time is ``overhead``."""
    totals: RooflineTotals
    ops: list[RooflineRow]
    op_shapes: list[RooflineRow]
    notes: list[str]


__all__ = ["Roofline", "RooflineDevice", "RooflineRow", "RooflineTotals"]
