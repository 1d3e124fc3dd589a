"""Communication across ranks: a rank's collective records and a report's ``distributed``
section (see docs/distributed.md)."""

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.peaks import Interconnect


class CollectiveRecord(TypedDict):
    """One collective call on a rank (``collectives`` of a rank report)."""

    rank: int
    name: str
    """The collective type: ``all_reduce``, ``all_gather``, ``reduce_scatter``,
    ``all_to_all``, ``broadcast``, ``send``, ``recv``, ``barrier``..."""
    raw_name: str
    """The name of the event the record is anchored at (``c10d::allreduce_``)."""
    pg: str
    """The process group."""
    pg_size: int | None
    seq: int | None
    """The process group's sequence number, where recorded."""
    index: int
    """0-based issue order within the process group (point-to-point counted apart)."""
    bytes: int | None
    dtype: str | None
    arrival_ns: int
    """When the rank was ready to communicate (its work started)."""
    end_ns: int
    dur_us: float
    """``end_ns - arrival_ns``, µs."""
    event_id: int | None
    """The anchor event's id."""
    work_event_ids: list[int]
    """The comm kernels or backend ranges the times come from (empty: the host call's)."""


class Clock(TypedDict):
    """Per-rank clock offsets estimated from the ends of matched collectives."""

    method: str
    """``collective_ends``, or ``none`` (one rank)."""
    reference_rank: NotRequired[int | None]
    offsets_us: dict[str, float]
    """Each rank's clock offset from the reference rank, µs, by rank."""
    residual_us: float | None
    """How far the estimate can be trusted, µs."""
    instances: NotRequired[int]
    applied: bool
    """Whether the offsets were applied to the cross-rank figures."""


class PerRankComm(TypedDict):
    """One rank's communication figures, µs."""

    rank: int
    wall_us: float
    compute_us: float
    """The compute union the overlap is measured against."""
    comm_us: float
    exposed_comm_us: float | None
    """Communication not hidden behind compute (None: no communication)."""
    overlap_share: float | None
    wait_us: float | None
    """Time waiting for the others inside matched collectives (None: not matched)."""
    idle_us: float


class CollectiveGroup(TypedDict):
    """Collective calls of every rank, per (type, process group)."""

    name: str
    pg: str
    count: int
    bytes: int
    dur_us: float
    algbw_gbps: float | None
    """Algorithmic bandwidth: bytes over duration, GB/s."""
    busbw_gbps: float | None
    """Bus bandwidth: ``algbw`` times NCCL's factor for the type and group size, GB/s."""
    group_size: int | None
    link_share: float | None
    """Bus bandwidth (the transfers' where known) over the link's peak."""
    instances: NotRequired[int]
    """(matched) Instances of the type across the ranks."""
    transfer_us: NotRequired[float]
    """(matched) The instances' transfer times summed (waits left out), µs."""
    transfer_busbw_gbps: NotRequired[float | None]


class Instance(TypedDict):
    """One collective of the job, matched across its ranks."""

    name: str
    pg: str
    seq: int
    """The sequence number (or index) the records were matched by."""
    ranks: list[int]
    last_rank: int
    """The rank that arrived last."""
    start_skew_us: float
    """Last arrival minus first arrival, µs."""
    end_skew_us: float
    wait_us: dict[str, float]
    """Each rank's wait for the last arrival, µs, by rank."""
    dur_us: float
    """The transfer time (the shortest rank's duration), µs."""
    bytes: int | None


class LatenessEvidence(TypedDict):
    """A straggler's lateness against the job's noise (opscope.analysis.lateness)."""

    instances: int
    """Matched collectives it is a member of."""
    times_last: int
    late_instances: int
    """Collectives where it arrived later than the latest other rank by over twice the noise."""
    noise_us: float
    """The job's noise: the median spread of the other ranks' arrivals (two ranks: the other
    rank's median lateness when it was last)."""
    median_late_us: float
    test: str
    """The test, in words."""


class WorstArrival(TypedDict):
    """A straggler's latest arrival at a collective it was last at."""

    name: str
    pg: str
    seq: int
    late_us: float
    """After the latest other rank."""
    t0: int
    """The others' first arrival, ns."""
    t1: int
    """Its arrival, ns."""
    event_ids: list[int]
    """Every member's record of that collective: its op and its work."""


class Straggler(TypedDict):
    """A rank the others wait for."""

    rank: int
    times_last: int
    caused_wait_us: float
    own_wait_us: float
    cause: str | None
    """Why it is late, as far as the rank reports tell."""
    cause_kind: NotRequired[str | None]
    """What the cause suggests: ``data_loading``, ``compute``, ``host_sync``, ``region`` (the
    program's own record_function range) or ``untraced`` (time no op shows)."""
    cause_op: NotRequired[str | None]
    """The op the rank spends longer in than the median rank, where one stands out."""
    evidence: NotRequired[LatenessEvidence]
    """The test its lateness passed: above the job's own noise, consistently."""
    worst: NotRequired[WorstArrival | None]
    """Its latest arrival: where the explorer's "show in timeline" zooms."""


class JobRole(TypedDict):
    """A rank reported alone (``--rank``): its part in the job (opscope.analysis.job_role)."""

    rank: int
    ranks: list[int]
    """The job's ranks."""
    straggler: bool
    """Whether the job names this rank a straggler."""
    stragglers: list[int]
    times_last: int
    caused_wait_us: float
    """The others' waits for it, summed."""
    others_wait_us_each: float
    wait_us: float
    """Its own waits for the others."""
    evidence: LatenessEvidence | None
    instances: int
    """The job's matched collective instances."""


class Distributed(TypedDict):
    """Ranks, communication per rank and collectives (a report with more than one rank or any
    communication)."""

    world_size: int
    ranks: list[int]
    rank_source: str
    """How the ranks were told apart: ``distributedInfo``, ``filename`` or ``order``."""
    rank_sources: dict[str, str]
    """The same per rank."""
    missing_ranks: list[int]
    """Ranks of the world size with no trace."""
    clock: Clock
    per_rank: list[PerRankComm]
    by_collective: list[CollectiveGroup]
    interconnect: Interconnect | None
    """The devices' link, where the peaks table knows it."""
    instances: list[Instance]
    stragglers: list[Straggler]
    warnings: list[str]
    job_role: NotRequired[JobRole]
    """A rank of a job reported alone (``--rank``): its role in the job."""


__all__ = [
    "Clock",
    "CollectiveGroup",
    "CollectiveRecord",
    "Distributed",
    "Instance",
    "PerRankComm",
    "Straggler",
]
