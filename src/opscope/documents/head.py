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


class Source(_SourceBase):
    """Where a report's events came from."""

    ranks: list[int]
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


__all__ = ["Engine", "RankSource", "Source", "Unreadable", "Window"]
