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
    """(job paths) A rank waiting inside a collective for the others to arrive."""


class PathStep(TypedDict):
    """The path of one profiler step."""

    step: int
    rank: int | None
    """The rank (rank paths); None on a job's path."""
    length_us: float
    wall_us: float
    """The step's span on the path's clock, µs."""
    bound_by_us: BoundBy
    by_rank_us: NotRequired[dict[str, float]]
    """(job paths) Path time spent on each rank, µs, by rank."""


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


class TopPiece(TypedDict):
    """The path's pieces summed per (label, name), biggest first."""

    label: str
    name: str | None
    dur_us: float
    pieces: int


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
    """The window's span on the path's clock, µs: ``wall_us - length_us`` is time no traced
    dependency explains."""
    bound_by_us: NotRequired[BoundBy]
    by_rank_us: NotRequired[dict[str, float]]
    """(job paths) Path time on each rank, µs, by rank."""
    steps: NotRequired[list[PathStep]]
    segments: NotRequired[list[Segment]]
    jumps: NotRequired[list[Jump]]
    top: NotRequired[list[TopPiece]]
    nodes: NotRequired[int]
    """Nodes of the dependency graph."""
    edges: NotRequired[int]
    method: NotRequired[str]
    notes: NotRequired[list[str]]
    warnings: NotRequired[list[str]]
    """(job paths) Why there is no job path."""


class PathLine(TypedDict):
    """A rank's critical path in short (the ``ranks`` section of a job report)."""

    length_us: float | None
    bound_by_us: BoundBy | None


__all__ = ["BoundBy", "CriticalPath", "Jump", "PathLine", "PathStep", "Segment", "TopPiece"]
