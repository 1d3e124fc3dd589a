"""Devices: the device a trace ran on (a report's ``device``) and the device a profiling run
resolved (``device`` of ``run.json``, of a comparison and of the demo)."""

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.peaks import KnownPeaks


class Device(TypedDict):
    """The device as the trace names it (a job: the first rank's, ``count`` summed)."""

    kind: str
    """``cuda``, ``rocm``, ``xpu``, ``mtia``, ``neuron``, ``cpu``..."""
    name: str
    count: int
    """Devices (a job: over its ranks)."""
    peaks: NotRequired[KnownPeaks]
    """(reports) The peaks the roofline used; an empty object when unknown."""
    note: NotRequired[str]
    """E.g. that a CPU-only trace's device is the CPU, or that a job's ranks ran on different
    devices."""


class CaptureDevice(TypedDict):
    """The device opscope profiled on."""

    kind: str
    torch_device: str
    """As torch names it: ``cpu``, ``cuda:0``..."""
    name: str
    index: int | None
    activities: list[str]
    """The profiler activities: ``CPU``, ``CUDA``, ``XPU``, ``MTIA``, ``PrivateUse1``..."""
    backend: str | None
    """The torch module that synchronises it (``cuda``, ``xpu``...)."""
    notes: list[str]


__all__ = ["CaptureDevice", "Device"]
