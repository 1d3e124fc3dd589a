"""The tables of one rank (or of a job, summed over its ranks): ops per name and per (name,
input shapes), kernels, profiler steps, and the timeline's figures.  Times in microseconds
(``_us``), instants in nanoseconds on the trace's clock (``_ns``)."""

from opscope.documents._typing import NotRequired, TypedDict


class _OpTimes(TypedDict):
    name: str
    calls: int
    """Times the op was called in the window (torch.profiler's ``count``); the device work
    those calls launched is ``device_calls``."""
    cpu_self_us: float
    """CPU time without the op's children."""
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
    """Device executions (kernels, copies, sets) the op launched directly: TraceLens's
    ``Count``; more than ``calls`` where one call launches several, fewer where some calls
    launched none."""
    launching_calls: int
    """Calls that launched device work directly (at most ``calls``)."""


class OpModule(TypedDict):
    """One ``nn.Module`` a graph-replayed op ran in during capture."""

    module: str | None
    """``nn.Module: X`` (instance number dropped); None: no module frame recorded."""
    calls: int
    device_self_us: float


class _Replayed(TypedDict):
    graph_replayed: NotRequired[bool]
    """(CUDA/HIP graphs, with a capture trace) True: some of the op's calls ran in graph
    replays (their device time came from them; their CPU time is none)."""
    replayed_calls: NotRequired[int]
    """Calls made by graph replays (a captured op once per replay)."""
    modules: NotRequired[list[OpModule]]
    """The modules the replayed calls ran in during capture, most device time first."""
    call_stack: NotRequired[list[str]]
    """The capture-time frames above the replayed call with most device time, outermost
    first."""


class OpRow(_OpTimes, _Replayed):
    """One op name (a row of ``ops``, like torch.profiler's key averages)."""

    flops: NotRequired[float | None]
    """(with the roofline) FLOPs over the window (None: not costed)."""
    bytes: NotRequired[float | None]
    """(with the roofline) Bytes moved over the window."""
    bound: NotRequired[str | None]
    """(with the roofline) ``compute``, ``memory`` or ``overhead``; None when unknown."""


class OpShapeRow(_OpTimes, _Replayed):
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


class GraphUnit(TypedDict):
    """A graph's replays, summed (a graph unit of ``kernels``)."""

    graph_id: int | None
    """The ``graph id`` its work records (CUDA); None where the trace records none."""
    replays: int
    kernels_per_replay: float
    device_us_per_replay: float
    span_us_per_replay: float
    """First start to last end of a replay's work."""
    launch_us_per_replay: float
    """The launch call on the host."""
    idle_between_us: float | None
    """Mean time from one replay's last end to the next one's first start (None: one
    replay)."""
    ordered_by: str
    """``graph_node_ids`` or ``start``: how a replay's work was put in order."""
    replays_listed: int
    """Entries of ``replays`` (at most 1000)."""


class ReplayLine(TypedDict):
    """One replay of a graph unit."""

    launch_id: int
    """The event id of its launch call."""
    start_ns: int
    end_ns: int
    device_us: float
    span_us: float
    kernels: int
    launch_us: float
    idle_before_us: float | None
    """From the previous replay of the graph (None: the first)."""


class UnitKernel(TypedDict):
    """One kernel name within a graph unit's replay."""

    name: str
    calls: int
    per_replay: float
    device_us: float
    mean_us: float
    min_us: float
    max_us: float


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
    graph: NotRequired[GraphUnit]
    """(a CUDA/HIP graph no capture attributed: this row is the graph's replays as one unit,
    named ``<launch call> #<n>``; its device time is that of the kernel rows it groups)"""
    replays: NotRequired[list[ReplayLine]]
    """(graph units) One entry per replay."""
    kernels: NotRequired[list[UnitKernel]]
    """(graph units) The graph's work grouped by name within the replay."""
    hint: NotRequired[str]
    """(graph units) How to record the capture trace that would attribute the kernels."""


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


__all__ = [
    "GraphUnit",
    "KernelRow",
    "OpModule",
    "OpRow",
    "OpShapeRow",
    "PerRankFigure",
    "ReplayLine",
    "StepRow",
    "Summary",
    "Timeline",
    "UnitKernel",
]
