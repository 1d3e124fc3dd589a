"""Findings: ranked, evidenced statements about where time goes (``findings`` of a report; see
docs/findings.md for the rules)."""

from typing import Any

from opscope.documents._typing import NotRequired, TypedDict


class Evidence(TypedDict):
    """Something to jump to: events (by id) and/or a time range."""

    event_ids: list[int]
    """Ids of events in the report's event table."""
    start_ns: NotRequired[int]
    end_ns: NotRequired[int | None]
    note: NotRequired[str]
    t0: NotRequired[int]
    """(explorer) ``start_ns`` relative to the timeline's origin, ns."""
    t1: NotRequired[int]
    """(explorer) ``end_ns`` relative to the timeline's origin, ns."""


class DispatchBoundOp(TypedDict):
    """An op whose CPU time exceeds its device time (``launch_bound``)."""

    op: str
    calls: int
    cpu_total_us: float
    device_total_us: float


class NeuronProblem(TypedDict, total=False):
    """A problem with a Neuron capture folder (``profile_quality``)."""

    code: str
    """E.g. ``NOT_PROCESSED``, ``EMPTY_NTFF``, ``NO_NEFF``, ``ERROR_PROCESS_INCOMPLETE``."""
    message: str
    files: list[str]
    command: str
    """The command that would fix it (``neuron-explorer view ...``)."""
    folder: str


class NeuronWarning(TypedDict):
    """A data-quality warning of Neuron Explorer's ``Warning`` table (``profile_quality``)."""

    profile: str | None
    message: str
    category: str


class GraphHostOp(TypedDict):
    """What the launching thread ran while the device waited between graph replays
    (``graph_host_gaps``)."""

    op: str
    overlap_us: float


class GraphCopies(TypedDict):
    """One graph whose every replay is preceded by copies (``graph_input_copies``)."""

    graph: str
    """The graph unit's name (``hipGraphLaunch #1``)."""
    op: str | None
    """The op around its launches."""
    replays: int
    copies: int
    copies_per_replay: float
    device_us: float
    host_us: float
    bytes: int


class GraphCaptureWindow(TypedDict):
    """One graph capture in the window (``graph_recapture``)."""

    start_ns: int
    end_ns: int
    host_us: float
    """From the begin call to the end call, µs."""
    nodes: int
    label: str | None
    """The annotation around the capture (``capture_32_DECODE``)."""
    again: bool
    """A replay came before it, or an earlier capture made the same nodes."""
    begin_id: int
    """The event id of its begin call (``StreamBeginCapture``)."""


class ReinstantiatedGraph(TypedDict):
    """A node sequence whose replays carry several ``graph id`` (``graph_recapture``)."""

    kernels: int
    graph_ids: list[int]


class FindingDetails(TypedDict, total=False):
    """The figures behind a finding; which keys a finding has depends on its rule (``kind``),
    noted in brackets.  Rules may add keys."""

    # hotspots
    op: str
    """[hotspots, h2d_copies, compile] The op concerned."""
    character: str
    """[hotspots] ``one expensive kernel``, ``many small executions`` or ``repeated
    executions``."""
    calls: int
    """[hotspots] The op's calls in the window (the op table's ``calls``)."""
    device_self_us: float
    device_share: float
    """[hotspots, dtype] Share of the window's device time, 0..1."""
    mean_us: float
    max_us: float
    cpu_total_us: float
    what_if: str
    """[hotspots] The ``--what-if`` spec of the finding's fix (``NAME=0``, or ``NAME@self=0``
    for the op's own work only): ``step_savings_us`` is its saving on the critical path."""
    evidence: dict[str, Any]
    """[straggler, load_imbalance] The test the claim passed against the job's own noise:
    ``test`` in words; a straggler's ``late_instances``, ``noise_us``; an imbalance's
    ``steps``, ``steps_above_noise``, ``noise_us``, ``median_excess_us``."""
    cause_kind: str | None
    """[straggler] What the cause suggests: ``data_loading``, ``compute``, ``host_sync``,
    ``region`` or ``untraced`` (the advice follows it)."""
    cause_op: str | None
    """[straggler] The op the rank spends longer in than the median rank."""
    worst: dict[str, Any] | None
    """[straggler] Its latest arrival (``distributed.stragglers[].worst``): the collective,
    ``late_us``, ``t0``/``t1`` and every rank's record's ``event_ids``."""
    # idle_gaps
    cause: str | None
    """[idle_gaps] ``host``, ``kernel-to-kernel`` or ``other``; [straggler] why the rank is
    late, as far as the reports tell."""
    gaps: int
    idle_us: float
    mean_gap_us: float
    max_gap_us: float
    min_gap_us_counted: float
    """[idle_gaps] Gaps shorter than this are not counted, µs."""
    host_activity: dict[str, float]
    """[idle_gaps] What the host ran during the gaps: top-level op name -> µs."""
    # launch_bound
    bubbles: int
    bubble_us: float
    max_bubble_us_counted: float
    kernels_with_launch: int
    short_kernel_fraction: float
    """[launch_bound] Of the launched kernels, the fraction shorter than their launch call."""
    median_kernel_us: float
    median_launch_us: float
    dispatch_bound_ops: list[DispatchBoundOp]
    # sync_stalls
    call: str
    """[sync_stalls] The runtime call that synchronised (``cudaStreamSynchronize``)."""
    issued_by: str | None
    """[sync_stalls, h2d_copies] The op chain that issued it (``aten::item <
    aten::_local_scalar_dense``)."""
    count: int
    host_wait_us: float
    device_idle_after_us: float
    time_at_stake_rule: str
    below_threshold: bool
    """[sync_stalls, h2d_copies] Reported although under the threshold: it recurs in every
    step."""
    # h2d_copies
    scope: str | None
    """[h2d_copies, fusion] The enclosing annotation (``## forward ##``)."""
    copies: int
    pageable: int
    """[h2d_copies] Copies from pageable (not pinned) host memory."""
    mean_bytes: float | None
    total_bytes: int | None
    device_us: float
    single_step_window: bool
    # fusion
    pattern: str
    """[fusion] ``attention``, ``bias``, ``norm``, ``run``...; [comm_exposed] ``ddp``,
    ``fsdp``, ``small_messages`` or ``serial``."""
    ops: list[str] | dict[str, float]
    """[fusion, dtype fp32 matmul] op names (a list); [dtype float64, compile Neuron] op name ->
    device µs or NEFF count (an object)."""
    occurrences: int
    launches_saved: int
    intermediate_bytes: int | None
    builtin: str | None
    """[fusion] The fused built-in that replaces the chain."""
    # dtype
    format: str
    """[dtype] ``float64`` or ``float32 matmul``."""
    executions: int
    """[dtype, hotspots] Device executions counted (hotspots: of the work the op launched
    directly, the op table's ``device_calls``)."""
    kernels: int
    assumed_speedup_share: float
    computed_as: str
    compute_capability_major: int | None
    # compile
    compile_us: float
    spans: int
    steps: list[int]
    """[compile] Profiled steps during which torch.compile compiled."""
    graph_breaks: int
    reasons: list[str] | dict[str, int]
    """[compile] Recompilation reasons (a list) or graph-break reasons -> count (an
    object)."""
    compiled_frames_in_window: int
    lookups: int
    lookup_us: float
    neffs: list[str]
    shapes: int
    load_us: float
    recompiles: int
    shape_driven: int
    recompiled_regions_in_trace: list[str]
    # profile_quality
    launches: int
    run_device: str | None
    events: int
    categories: list[str]
    window_steps: list[int] | None
    warnings: list[str | NeuronWarning]
    """[profile_quality] Reader warnings (text) or Neuron Explorer warnings (objects)."""
    skipped: dict[str, int]
    """[profile_quality] Malformed events skipped while reading: reason -> count."""
    overhead_us: float
    captures: list[NeuronProblem]
    problems: list[NeuronProblem]
    last_step: int
    last_step_device_ops: int
    median_device_ops: float
    # comm_exposed
    comm_us: float
    exposed_comm_us: float | None
    overlap_share: float | None
    collectives: int
    comm_runs: int
    median_collective_us: float | None
    wait_us: float
    """[comm_exposed, job] Of the exposed communication, time waiting for other ranks, µs."""
    # load_imbalance
    compute_us: dict[str, float]
    """[load_imbalance] Each rank's compute, µs, by rank."""
    median_us: float
    rank: int
    """[load_imbalance, straggler] The rank concerned."""
    # straggler
    times_last: int
    """[straggler] Collectives at which the rank arrived last."""
    caused_wait_us: float
    """[straggler] The others' time waiting for it, summed, µs."""
    own_wait_us: float
    world: int
    # comm_bandwidth
    collective: str
    pg: str
    busbw_gbps: float
    link_gbps: float
    link_share: float
    time_us: float
    median_bytes: float
    small_messages: bool
    from_matched_transfers: bool
    link_source: str | None
    # graph_host_gaps
    replays: int
    """[graph_host_gaps, graph_input_copies] Graph replays in the window (input copies: of
    the graphs whose every replay is preceded by copies)."""
    mean_launch_us: float
    """[graph_host_gaps] The graph launch call's mean host time, µs."""
    host_ops: list[GraphHostOp]
    # graph_input_copies
    graphs: list[GraphCopies]
    host_us: float
    """[graph_input_copies] Host time of the copy ops, µs."""
    bytes: int
    """[graph_input_copies] Bytes copied (where the copies record them)."""
    # graph_recapture
    windows: list[GraphCaptureWindow]
    again: int
    """[graph_recapture] Captures made again, and re-instantiated graphs."""
    capture_host_us: float
    instantiations: int
    instantiate_us: float
    reinstantiated_graphs: list[ReinstantiatedGraph]


class Finding(TypedDict):
    """One finding.  Ranked by ``step_savings_us`` where known, else ``time_at_stake_us``."""

    id: str
    """``F1``, ``F2``... in rank order (renumbered when a job's findings are merged)."""
    kind: str
    """The rule: ``hotspots``, ``idle_gaps``, ``launch_bound``, ``sync_stalls``,
    ``h2d_copies``, ``fusion``, ``dtype``, ``compile``, ``profile_quality``, ``comm_exposed``,
    ``comm_bandwidth``, ``graph_host_gaps``, ``graph_input_copies``, ``graph_recapture``; a
    job's own: ``load_imbalance``, ``straggler``."""
    severity: str
    """``high``, ``medium``, ``low`` or ``info``."""
    title: str
    time_at_stake_us: float
    """The most the fix could save in the window, µs."""
    share: float
    """``time_at_stake_us`` over the window's wall time, 0..1."""
    evidence: list[Evidence]
    recommendation: str
    confidence: str
    """``high``, ``medium`` or ``low``."""
    details: FindingDetails
    step_savings_us: NotRequired[float | None]
    """What the fix shortens the window's critical path by, µs: the what-if of the change the
    finding proposes, over every occurrence (``details.what_if`` where a spec says it), at
    most ``time_at_stake_us``; for a job's own findings, the job path's (null where the fix
    cannot be expressed)."""
    rank: NotRequired[int | None]
    """(job reports) The rank the finding is about; None for the job's own findings."""
    rank_finding_id: NotRequired[str | None]
    """(job reports) The finding's ``id`` in its rank's report."""


__all__ = [
    "DispatchBoundOp",
    "Evidence",
    "Finding",
    "FindingDetails",
    "GraphCaptureWindow",
    "GraphCopies",
    "GraphHostOp",
    "NeuronProblem",
    "NeuronWarning",
    "ReinstantiatedGraph",
]
