"""The diff of two analysed traces (``opscope.diff/1``, ``opscope diff A B --format json``):
per op, per kernel, the timeline and the findings.  B is the changed run; deltas are B - A."""

from typing import Literal

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.devices import Device
from opscope.documents.findings import Finding
from opscope.documents.tables import Summary


class DiffStep(TypedDict):
    step: int
    wall_us: float
    """The step's span (in a job: the slowest rank's)."""


class MedianSteps(TypedDict):
    a: float | None
    b: float | None


class StepComparison(TypedDict):
    """Per step: the median step time of each side (null without steps), and why the
    comparison may not hold (a side with one step, or an outlier step over twice the median of
    its other steps)."""

    median_step_us: MedianSteps
    delta_median_step_us: float | None
    warnings: list[str]


class DiffSide(TypedDict):
    """One of the two traces."""

    paths: list[str]
    device: Device
    events: int
    summary: Summary
    steps: list[DiffStep]
    """The profiler steps of the analysed window, by step number."""
    device_total_us: float
    """Sum of the op table's device self time."""
    cpu_total_us: float
    """Sum of the op table's CPU self time."""


class DiffTotals(TypedDict):
    delta_device_us: float
    delta_cpu_us: float


class Names(TypedDict):
    """A pair matched across vendors, spelled differently on each side."""

    a: str
    b: str


class OpSide(TypedDict):
    calls: int
    device_self_us: float
    cpu_self_us: float
    device_total_us: float


class OpDelta(TypedDict):
    """One op in A and B (null on the side it is missing from)."""

    name: str
    """As recorded (``x / y`` when matched across spellings)."""
    names: NotRequired[Names]
    a: OpSide | None
    b: OpSide | None
    delta_device_us: float
    delta_cpu_us: float
    delta_calls: int


class KernelSide(TypedDict):
    calls: int
    device_us: float


class KernelDelta(TypedDict):
    name: str
    names: NotRequired[Names]
    a: KernelSide | None
    b: KernelSide | None
    delta_device_us: float


class FindingBrief(TypedDict):
    id: str | None
    title: str | None
    severity: str | None
    time_at_stake_us: float | None
    share: float | None


class MatchedFinding(TypedDict):
    """A finding present in both."""

    kind: str | None
    title: str
    """B's title, runtime names A spells differently shown both ways."""
    renamed: bool
    """The title shows two spellings."""
    a: FindingBrief
    b: FindingBrief
    delta_time_at_stake_us: float


class FindingChanges(TypedDict):
    resolved: list[Finding]
    """In A only."""
    new: list[Finding]
    """In B only."""
    persisting: list[Finding]
    """In both (B's)."""
    matched: list[MatchedFinding]


class Diff(TypedDict):
    """Trace B against trace A (``opscope.diff/1``)."""

    schema: Literal["opscope.diff/1"]
    a: DiffSide
    b: DiffSide
    cross_device: bool
    """The traces ran on different devices (kind or name)."""
    totals: DiffTotals
    timeline_delta: dict[str, float]
    """B - A of each numeric ``summary`` figure known on both sides (not ``start_ns``,
    ``end_ns``)."""
    steps: StepComparison
    ops: list[OpDelta]
    """By the size of the device time delta."""
    only_in_a: list[str]
    only_in_b: list[str]
    kernels: list[KernelDelta]
    findings: FindingChanges


__all__ = [
    "Diff",
    "DiffSide",
    "DiffStep",
    "DiffTotals",
    "FindingBrief",
    "FindingChanges",
    "KernelDelta",
    "KernelSide",
    "MatchedFinding",
    "MedianSteps",
    "Names",
    "OpDelta",
    "OpSide",
    "StepComparison",
]
