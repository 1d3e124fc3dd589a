"""What a profiling run did (``opscope.run/1``): ``run.json`` of a run folder, and each rank's
``ranks/rank<N>.json`` of a multi-rank run (see docs/capture.md)."""

from typing import Any, Literal

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.devices import CaptureDevice


class TorchVersions(TypedDict):
    version: str
    cuda: str | None
    hip: str | None


class RunSchedule(TypedDict):
    """The profiler schedule (torch.profiler's)."""

    wait: int
    warmup: int
    active: int
    repeat: int
    skip_first: int
    steps_needed: int
    """Steps the schedule needs to record every window."""
    until_stop: NotRequired[bool]
    """(open-ended captures) The active window lasted until the capture was stopped."""


class RunSteps(TypedDict):
    needed: int
    run: int
    """Steps the program ran under the profiler."""
    first_window: int
    """Steps up to the end of the first active window."""
    active: list[int]
    """The recorded steps (0-based, as the profiler counts)."""


class ProfilerOptions(TypedDict):
    record_shapes: bool
    with_stack: bool
    profile_memory: bool
    with_flops: bool
    activities: list[str]
    sync: bool
    """The device was synchronised at the end of each step."""
    sync_annotation: str | None
    """The name of the annotation around that synchronisation (None: none recorded)."""


class CompileEntry(TypedDict, total=False):
    """Compile work recorded during the run (``watch_compile``; ``record_compile`` may give a
    partial entry)."""

    label: str | None
    wall_s: float
    compile_ids: list[str]
    """Dynamo's compile ids (``0/0``, ``0/1``...)."""
    frames_compiled: int
    frames_seen: int
    unique_graphs: int
    recompiles: int
    recompile_reasons: list[str]
    graph_breaks: int
    graph_break_reasons: dict[str, int]
    """Graph-break reason -> count."""
    fail_reasons: list[str]
    phase_s: dict[str, float]
    """Time per compile phase, s."""
    frames: list[dict[str, Any]]
    """Per compiled frame: Dynamo's compilation metrics (names, counts, times)."""
    sources: list[str]
    errors: list[str]


class CaptureWindow(TypedDict):
    kind: str | None
    delay_s: float | None
    duration_s: float | None


class ProgramRef(TypedDict):
    kind: str
    """``script`` or ``module``."""
    target: str


class CaptureInfo(TypedDict):
    """(``opscope profile``) How the capture was made."""

    tool: str
    command: list[str]
    program: ProgramRef
    argv: list[str]
    trigger: str
    """``schedule``, ``signal``, ``delay`` or ``time``."""
    index: int
    """The capture's number within the program's run, from 1."""
    first_program_step: int
    window: CaptureWindow
    step_fn: str | None


class ProgramInfo(TypedDict):
    """(``opscope profile``) How the program ended."""

    exit_code: int | None
    exception: str | None
    steps_marked: int
    step_source: str | None
    """What marked the steps: ``optimizer``, ``step_fn``..."""
    ignored_marks: dict[str, int]
    wall_s: float


class DistributedRun(TypedDict):
    """(multi-rank runs) The launcher's world and torch.distributed's."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int | None
    run_id: str | None
    master_addr: str | None
    master_port: str | None
    torch_distributed: dict[str, Any] | None
    """``backend``, ``rank``, ``world_size``, ``pg_count``, ``process_groups`` as torch
    reports them (None: not initialised; ``{"error"}``: initialised but unreadable, and why)."""


class Run(TypedDict):
    """What ran (``opscope.run/1``)."""

    schema: Literal["opscope.run/1"]
    label: str | None
    run_dir: str | None
    """The run folder's name."""
    created: str
    """ISO 8601 local time."""
    finished: str | None
    wall_s: float | None
    status: str
    """``running``, ``ok`` or ``error``."""
    error: str | None
    command: list[str]
    cwd: str
    hostname: str
    pid: int
    platform: str
    python: str
    torch: TorchVersions
    device: CaptureDevice
    schedule: RunSchedule
    steps: RunSteps
    profiler: ProfilerOptions
    traces: list[str]
    """Trace files, relative to the run folder."""
    compile: list[CompileEntry]
    compiled_in_window: list[int]
    """Steps during which torch.compile compiled (the window is not steady state)."""
    neuron: dict[str, Any] | None
    """(Neuron) How the Neuron profiler was set up (None: not a Neuron run)."""
    warnings: list[str]
    run_info: dict[str, Any]
    """The caller's own facts (``profile(run_info=...)``)."""
    rank: NotRequired[int]
    """(multi-rank runs) The rank that wrote the document."""
    capture: NotRequired[CaptureInfo]
    program: NotRequired[ProgramInfo]
    distributed: NotRequired[DistributedRun]


__all__ = [
    "CaptureInfo",
    "CompileEntry",
    "DistributedRun",
    "ProfilerOptions",
    "ProgramInfo",
    "Run",
    "RunSchedule",
    "RunSteps",
    "TorchVersions",
]
