"""The tables of one rank (or of a job, summed over its ranks): ops per name and per (name,
input shapes), kernels, profiler steps, and the timeline's figures.  Times in microseconds
(``_us``), instants in nanoseconds on the trace's clock (``_ns``)."""

from opscope.documents._typing import NotRequired, TypedDict


class _OpTimes(TypedDict):
    name: str
    calls: int
    cpu_self_us: float
    cpu_total_us: float
    """CPU time with the op's children."""
    device_self_us: float
    """Device time of the work the op launched directly (on a CPU-only trace: the CPU self
    time of the ops that computed)."""
    device_total_us: float
    """Device time with the launches of the op's children."""
    device_share: float
    """``device_self_us`` over all device time in the window, 0..1."""
    device_calls: int
    """Device executions the op launched directly."""
    launching_calls: int
    """Calls that launched device work directly."""


class OpRow(_OpTimes):
    """One op name (a row of ``ops``, like torch.profiler's key averages)."""

    flops: NotRequired[float | None]
    """(with the roofline) FLOPs over the window (None: not costed)."""
    bytes: NotRequired[float | None]
    """(with the roofline) Bytes moved over the window."""
    bound: NotRequired[str | None]
    """(with the roofline) ``compute``, ``memory`` or ``overhead``; None when unknown."""


class OpShapeRow(_OpTimes):
    """One (op name, input shapes) row of ``op_shapes``."""

    input_dims: NotRequired[str | None]
    """The recorded ``Input Dims`` as JSON text (absent, with ``input_types``, when the trace
    recorded no shapes)."""
    input_types: NotRequired[str | None]
    """The recorded ``Input type`` as JSON text."""
    flops_per_call: NotRequired[float | None]
    """(with the roofline) FLOPs per costed call (None: not costed)."""
    bytes_per_call: NotRequired[float | None]
    """(with the roofline) Bytes per costed call."""
    intensity: NotRequired[float | None]
    """(with the roofline) FLOP/byte."""
    bound: NotRequired[str | None]
    """(with the roofline) ``compute``, ``memory`` or ``overhead``; None when unknown."""


class KernelRow(TypedDict):
    """One device execution name (a row of ``kernels``; on Neuron, the NEFF it ran)."""

    name: str
    calls: int
    device_us: float
    mean_us: float
    min_us: float
    max_us: float
    op: str | None
    """The first op that launched it."""
    ops: list[str]
    """Every op that launched it."""


class StepRow(TypedDict):
    """One profiler step (a job: one row per rank and step)."""

    step: int
    wall_us: float
    cpu_us: float
    """CPU time of the step's top-level ops."""
    device_us: float
    device_ops: int
    """Device executions in the step."""
    rank: NotRequired[int]
    """(job reports) Whose step."""


class Timeline(TypedDict):
    """The window's span and its device's busy, idle and per-class times (a job: the wall
    span from the first to the last event of any rank, device figures summed over the
    ranks)."""

    wall_us: float
    """First to last timed event of any kind."""
    device_span_us: float
    """First start to last end of device work."""
    device_busy_us: float
    """Union of the device work intervals."""
    device_idle_us: float
    """``device_span_us - device_busy_us``."""
    compute_us: float
    comm_us: float
    memcpy_us: float
    memset_us: float
    start_ns: int
    end_ns: int
    device_is_host: bool
    """A CPU-only trace: the device is the CPU."""
    pre_window_device_us: float
    """Device work launched before the profiler started, left out of the window."""
    exposed_comm_us: NotRequired[float | None]
    """Communication not hidden behind compute (None: no communication; absent in documents
    of older versions)."""
    overlap_share: NotRequired[float | None]
    """Share of the communication that compute hides, 0..1."""
    compute_work_us: NotRequired[float | None]
    """The compute union the overlap is measured against."""


class PerRankFigure(TypedDict):
    """One figure of a job over its ranks."""

    max: float
    median: float
    max_rank: int
    """The rank of the max."""


class Summary(Timeline):
    """A report's ``summary``: the timeline with the op table's totals."""

    device_time_us: float
    """All device time in the window (the op table's ``device_share`` denominator)."""
    cpu_busy_us: float
    """CPU self time of every op."""
    per_rank: NotRequired[dict[str, PerRankFigure]]
    """A job's: each of wall, device span, busy, idle, communication and exposed
    communication over the ranks (the other figures of a job's summary are sums over its
    ranks' devices; these are what its header shows)."""


__all__ = ["KernelRow", "OpRow", "OpShapeRow", "PerRankFigure", "StepRow", "Summary", "Timeline"]
