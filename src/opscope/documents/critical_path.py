"""The critical path: the longest chain of dependent work through the window (the report's
``critical_path``; see docs/critical-path.md)."""

from opscope.documents._typing import NotRequired, TypedDict


class BoundBy(TypedDict):
    """Time on the path per label, µs (every label present, 0 when none)."""

    cpu: float
    """Host work (framework ops, Python)."""
    data_loading: float
    launch_overhead: float
    """Launch calls and the queueing delay before the device starts the work."""
    gpu_compute: float
    gpu_comm: float
    """Device communication (collective kernels)."""
    kernel_kernel_gap: float
    """Device idle between executions with work already queued."""
    sync: float
    """Host waiting in a synchronisation."""
    wait_for_peer: float
    """A rank waiting inside a collective for the others to arrive (on a job's path the
    path follows the rank that arrived last instead)."""
    untraced: float
    """Time that no traced work explains: a thread's host time between top-level events or
    directly under a step marker (untraced Python, I/O, a sleep), and device work that waited
    for something the trace does not record.  Each such piece names the events on either
    side (:class:`GapEvidence`)."""


class PathStep(TypedDict):
    """The path of one profiler step."""

    step: int
    rank: int | None
    """The rank (rank paths); None on a job's path."""
    length_us: float
    """The step's path: its wall, every µs of it labelled (``untraced`` where no traced work
    explains it)."""
    wall_us: float
    """The step's wall, µs: its step marker's span (the report's ``steps[].wall_us``); on
    a job's path, the step's span on the path's clocks."""
    explained_share: NotRequired[float | None]
    """The share of the wall that traced work explains: (length - untraced) / wall."""
    bound_by_us: BoundBy
    by_rank_us: NotRequired[dict[str, float]]
    """(job paths) Path time spent on each rank, µs, by rank."""


class GapEvidence(TypedDict):
    """Where an ``untraced`` piece lies: the thread (or device stream) and the events on
    either side of it (None: none there)."""

    thread: str
    before_event_id: int | None
    after_event_id: int | None


class Segment(TypedDict):
    """One piece of the path, in path order."""

    rank: int
    label: str
    """One of :class:`BoundBy`'s labels."""
    name: str | None
    """The event the piece is attributed to (None: no event, e.g. a gap)."""
    event_id: int | None
    start_ns: int
    dur_us: float
    evidence: NotRequired[GapEvidence]
    """(``untraced`` pieces) The thread and the events on either side."""


class TopPiece(TypedDict):
    """The path's pieces summed per (label, name), biggest first."""

    label: str
    name: str | None
    dur_us: float
    pieces: int


class LoaderWorkerShare(TypedDict):
    """One DataLoader worker's trace and its share of the path's ``data_loading``."""

    path: str
    pids: list[str]
    events: int
    """Its top-level events (the roots of its op tree)."""
    busy_us: float
    """The time those events cover in its whole trace."""
    on_path_us: float
    """Its share of the path's data_loading, µs."""


class LoaderName(TypedDict):
    """A worker event name's share of the path's ``data_loading``."""

    name: str
    us: float
    share: float
    """Of the path's data_loading."""


class DataLoading(TypedDict):
    """The path's ``data_loading`` broken down by the DataLoader workers' own traces (each
    instant shared equally among the worker events running then)."""

    on_path_us: float
    in_workers_us: float
    not_in_workers_us: float
    """While no worker event ran (queues, IPC, pinning memory)."""
    workers: list[LoaderWorkerShare]
    top: list[LoaderName]
    method: str


class Jump(TypedDict):
    """(job paths) Where the path crosses from one rank to another, at a matched collective."""

    collective: str | None
    pg: str | None
    """The process group."""
    seq: int | None
    """The collective's sequence number (or index) in its process group."""
    from_rank: int
    to_rank: int
    last_rank: int | None
    """The rank that arrived last at the collective."""


class CriticalPath(TypedDict):
    """The critical path of one rank (``scope`` ``rank``) or of a job's ranks joined at their
    collectives (``scope`` ``job``).  A job whose collectives do not line up has only
    ``scope``, ``length_us`` (None) and ``warnings``."""

    scope: str
    """``rank`` or ``job``."""
    rank: NotRequired[int]
    """(rank paths) The rank."""
    ranks: NotRequired[list[int]]
    """(job paths) The ranks joined."""
    length_us: float | None
    """The window's path length, µs (None: no job path)."""
    wall_us: NotRequired[float]
    """The window's span on the path's clock, µs (from the path's first point to its
    last)."""
    explained_share: NotRequired[float | None]
    """The share of ``wall_us`` that traced work explains: (length - untraced) / wall."""
    bound_by_us: NotRequired[BoundBy]
    by_rank_us: NotRequired[dict[str, float]]
    """(job paths) Path time on each rank, µs, by rank."""
    steps: NotRequired[list[PathStep]]
    segments: NotRequired[list[Segment]]
    segments_total: NotRequired[int]
    """(the explorer's ``/api/report``, critical-path answers that keep the longest) The
    path's segments in all, where ``segments`` holds fewer or none."""
    jumps: NotRequired[list[Jump]]
    top: NotRequired[list[TopPiece]]
    nodes: NotRequired[int]
    """Nodes of the dependency graph."""
    edges: NotRequired[int]
    method: NotRequired[str]
    notes: NotRequired[list[str]]
    warnings: NotRequired[list[str]]
    """(job paths) Why there is no job path."""
    data_loading: NotRequired[DataLoading]
    """(with the DataLoader workers' traces) The path's data_loading, by the workers' events."""


class PathLine(TypedDict):
    """A rank's critical path in short (the ``ranks`` section of a job report)."""

    length_us: float | None
    bound_by_us: BoundBy | None


__all__ = [
    "BoundBy",
    "CriticalPath",
    "DataLoading",
    "GapEvidence",
    "Jump",
    "LoaderName",
    "LoaderWorkerShare",
    "PathLine",
    "PathStep",
    "Segment",
    "TopPiece",
]
