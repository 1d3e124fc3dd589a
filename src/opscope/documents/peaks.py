"""Device peaks: the ``opscope.peaks/1`` table (shipped as ``analysis/peaks/peaks.json``; a
user file given by ``$OPSCOPE_PEAKS`` or ``--peaks`` has the same layout) and the peaks of one
device as reports carry them."""

from typing import Literal

from opscope.documents._typing import NotRequired, TypedDict


class Interconnect(TypedDict):
    """A device's GPU-to-GPU link."""

    name: str
    """The link, e.g. ``NVLink 3 (12 links)``."""
    gbs: float
    """Peak bandwidth per direction over all of the device's links, GB/s (1e9 bytes/s)."""
    source: str
    """Where the figure comes from (a datasheet)."""


class MatchProps(TypedDict, total=False):
    """Conditions on a trace's ``deviceProperties`` that identify a device (all given must
    hold)."""

    name: str
    """Regular expression on the lower-cased device name."""
    compute: str
    """``computeMajor.computeMinor``, e.g. ``8.0``."""
    cus: int
    """Number of SMs / compute units (``numSms`` or ``multiProcessorCount``)."""
    memory_gb_min: float
    """Least device memory (``totalGlobalMem``), GB."""
    memory_gb_max: float
    """Most device memory, GB."""


class PeakEntry(TypedDict, total=False):
    """One device of the peaks table.  Every entry of the shipped table has ``name``,
    ``match``, ``tflops``, ``bandwidth_gbs`` and ``source``; an entry of a user file that
    updates a shipped one (same key) may give only what it changes (``tflops`` merged per
    dtype)."""

    name: str
    """The device's full name."""
    match: list[str]
    """Regular expressions on the lower-cased device name (tried after ``match_props``)."""
    match_props: list[MatchProps]
    """``deviceProperties`` conditions, tried first."""
    tflops: dict[str, float]
    """Dense peak TFLOP/s (1e12) per dtype class: ``fp32``, ``tf32``, ``bf16``, ``fp16``,
    ``fp8``, ``fp64`` (matrix units where the device has them) and ``vector`` (non-matrix FP32
    arithmetic)."""
    bandwidth_gbs: float
    """Device memory bandwidth, GB/s (1e9 bytes/s)."""
    source: str
    """Where the figures come from."""
    note: str
    """A caveat about the figures."""
    interconnect: Interconnect
    """The device's GPU-to-GPU link, where known."""
    neuron_cores: int
    """NeuronCores the figures are divided over (Neuron devices)."""


class Peaks(TypedDict):
    """The peaks table (``opscope.peaks/1``): dense FLOP/s per dtype and memory bandwidth per
    device, for rooflines."""

    schema: Literal["opscope.peaks/1"]
    about: NotRequired[str]
    """What the table holds and how entries are matched."""
    devices: dict[str, PeakEntry]
    """Entries by key, tried in order."""
    use: NotRequired[str]
    """(user files) The key of the entry to use for every trace, whatever its device."""


class DevicePeaks(TypedDict):
    """The peaks of one device as a report uses them (FLOP/s and bytes/s, not the table's
    TFLOP/s and GB/s)."""

    key: str
    """The peaks table's entry (``cpu`` for a measured CPU)."""
    name: str
    flops: dict[str, float]
    """Peak FLOP/s per dtype class (``fp32``, ``tf32``, ``bf16``, ``fp16``, ``fp8``, ``fp64``,
    ``vector``)."""
    bandwidth: float
    """Memory bandwidth, bytes/s."""
    source: str
    measured: bool
    """Measured on this machine (the CPU), not from a datasheet."""
    note: NotRequired[str]
    neuron_cores: NotRequired[int]


class KnownPeaks(TypedDict, total=False):
    """:class:`DevicePeaks` where the device's peaks are known, else an empty object (the
    report's ``device.peaks``; the roofline's ``peaks`` is null instead)."""

    key: str
    name: str
    flops: dict[str, float]
    """Peak FLOP/s per dtype class."""
    bandwidth: float
    """Memory bandwidth, bytes/s."""
    source: str
    measured: bool
    note: str
    neuron_cores: int


__all__ = ["DevicePeaks", "Interconnect", "KnownPeaks", "MatchProps", "PeakEntry", "Peaks"]
