"""The reference study of ``opscope demo`` (``opscope.demo/1``): RMSNorm naive, built in and
compiled, per shape."""

from typing import Literal

from opscope.documents._typing import TypedDict
from opscope.documents.compare import Latency
from opscope.documents.devices import CaptureDevice


class DemoVariant(TypedDict):
    name: str
    """``naive``, ``builtin`` or ``compiled``."""
    device_ops: int | None
    """Device executions per call, from the variant's profile."""
    device_us: float | None
    cpu_us: float | None
    latency_us: Latency | None
    compile_s: float | None
    numerics_ok: bool
    max_abs_err: float | None
    max_rel_err: float | None
    speedup_vs_naive: float | None
    speedup_ci95: list[float] | None
    verdict: str | None
    """As in ``opscope.compare/1``."""
    run_dir: str | None
    error: str | None


class DemoShape(TypedDict):
    shape: list[int]
    dtype: str
    """``float32``, ``bfloat16``..."""
    variants: list[DemoVariant]
    notes: list[str]


class DemoSchedule(TypedDict):
    """The profiler schedule of each variant's profile."""

    wait: int
    warmup: int
    active: int


class Demo(TypedDict):
    """The RMSNorm study (``opscope.demo/1``)."""

    schema: Literal["opscope.demo/1"]
    device: CaptureDevice
    schedule: DemoSchedule
    shapes: list[DemoShape]
    reading: list[str]
    """A plain-language reading, one sentence per shape."""
    notes: list[str]
    run_dirs: list[str]


__all__ = ["Demo", "DemoSchedule", "DemoShape", "DemoVariant"]
