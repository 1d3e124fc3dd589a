"""The sections every report starts with: where its events came from and the time window."""

from opscope.documents._typing import NotRequired, TypedDict


class _SourceBase(TypedDict):
    paths: list[str]
    """The files read."""
    format: str
    """``kineto``, ``neuron``..., ``a+b`` for a job of several formats."""
    events: int
    """Events in the event table."""
    warnings: list[str]
    """What ingestion noticed (a truncated file repaired, ...)."""
    skipped: dict[str, int]
    """Events left out while reading: reason -> count."""


class Unreadable(TypedDict):
    """A file of a job that could not be read: left out, the job's report goes on."""

    path: str
    rank: int | None
    """Its rank, from the file name (None: the name does not say; the world size then names
    the missing ranks)."""
    reason: str
    """Why it cannot be read (the one-line error)."""


class Engine(TypedDict):
    """What ran the per-rank analysis of a job on a cluster."""

    name: str
    """``dask``."""
    workers: int
    """The cluster's workers when the job started."""
    scheduler: str
    """The scheduler's address (``local:N``: a cluster started for the run)."""


class GraphCapture(TypedDict):
    """How the trace's CUDA/HIP graph replays were attributed to the captured ops."""

    files: list[str]
    """The capture traces read (the execution trace itself where it recorded captures)."""
    method: str
    """``graph_node_ids`` (replayed kernels ordered by the node ids they record) or
    ``kernel_sequence`` (by start time on their streams)."""
    matched_kernels: int
    """Replayed device executions paired with the launch that made their node."""
    unmatched_kernels: int
    """Replayed device executions left on their graph launch's op."""
    replays: int
    matched_replays: int
    captures: int
    """Capture windows read."""
    pairings: dict[str, int]
    """How replays were paired with their capture: ``positional``, ``streams``, ``by_name``,
    ``forward_scan`` -> replays."""
    kernels_without_op: int
    """Paired executions whose launch ran outside any captured op."""
    notes: NotRequired[list[str]]


class Source(_SourceBase):
    """Where a report's events came from."""

    ranks: list[int]
    graph_capture: NotRequired[GraphCapture]
    """(CUDA/HIP graph replays attributed by a capture trace)"""
    unreadable: NotRequired[list[Unreadable]]
    """(jobs) The files left out because they cannot be read (each also a warning)."""
    engine: NotRequired[Engine]
    """(cluster runs) What ran the per-rank analysis; absent: this process."""


class RankSource(_SourceBase):
    """Where a rank's events came from (``rank_source`` and ``world_size`` are absent when the
    rank's events were not kept)."""

    rank_source: NotRequired[str]
    """How the rank was told apart: ``distributedInfo``, ``file name`` or ``order``."""
    world_size: NotRequired[int | None]
    """The world size the trace records (``distributedInfo``)."""


class Window(TypedDict):
    """The analysed time window."""

    start_ns: int
    """First timed event, ns (the trace's clock)."""
    end_ns: int
    steps: list[int]
    """The profiler steps in the window."""
    selection: list[int] | None
    """``[first, last]`` step asked for (``--steps``), or None: the whole trace."""


__all__ = ["Engine", "GraphCapture", "RankSource", "Source", "Unreadable", "Window"]
