"""The report (``opscope.report/1``): everything the analysis says about one rank, or about a
job of several (``opscope report --format json``, ``Report.to_dict()``, ``report.json`` of a
demo's run folders, the explorer's report)."""

from typing import Literal

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.critical_path import CriticalPath, PathLine
from opscope.documents.demo import DemoVariant
from opscope.documents.devices import Device
from opscope.documents.distributed import Distributed
from opscope.documents.findings import Finding
from opscope.documents.head import Source, Window
from opscope.documents.neuron import NeuronEngines
from opscope.documents.roofline import Roofline
from opscope.documents.tables import KernelRow, OpRow, OpShapeRow, StepRow, Summary
from opscope.documents.what_if import WhatIf


class RankLine(TypedDict):
    """One rank of a job (the ``ranks`` section)."""

    rank: int
    paths: list[str]
    events: int
    summary: Summary
    steps: list[StepRow]
    findings: int
    """How many findings the rank has."""
    top_findings: list[str]
    """The titles of its first three."""
    top_ops: list[str]
    """Its first five ops by device self time (those with device time)."""
    collectives: int
    """Collective calls on the rank."""
    critical_path: PathLine | None


class StudyInfo(TypedDict):
    """(``report.json`` written by ``opscope demo``) Which variant of which shape the run
    folder profiled, and the shape's results."""

    variant: str
    shape: NotRequired[list[int]]
    dtype: NotRequired[str]
    variants: NotRequired[list[DemoVariant]]
    notes: NotRequired[list[str]]
    reading: NotRequired[list[str]]


class ExplorerInfo(TypedDict):
    """(the explorer's report, ``opscope.explorer/1``) How the explorer shows the report."""

    schema: Literal["opscope.explorer/1"]
    origin_ns: str
    """The timeline's origin, ns, as text (JavaScript numbers cannot hold it exactly);
    evidence ``t0``/``t1`` are relative to it."""
    compare: NotRequired[bool]
    """A second trace is open."""
    mode: NotRequired[str]
    """``server`` or ``static`` (a self-contained HTML page)."""


class Report(TypedDict):
    """The analysis of one rank, or the merge of a job's ranks (``ranks`` then lists them);
    ``opscope.report/1``.  Times in microseconds (``_us``), instants in nanoseconds on the
    trace's clock (``_ns``).  Keys may be added within the version; none is renamed or
    removed."""

    schema: Literal["opscope.report/1"]
    source: Source
    device: Device
    window: Window
    summary: Summary
    steps: list[StepRow]
    """The profiler steps in the window."""
    ops: list[OpRow]
    """Per op name, by device self time."""
    op_shapes: list[OpShapeRow]
    """Per (op name, input shapes)."""
    kernels: list[KernelRow]
    findings: list[Finding]
    """Ranked: most step time to save first."""
    ranks: NotRequired[list[RankLine]]
    """(job reports) One line per rank."""
    distributed: NotRequired[Distributed]
    """With more than one rank or any communication."""
    critical_path: NotRequired[CriticalPath]
    """The window's critical path (a job: its ranks joined; absent in documents of older
    versions)."""
    neuron: NotRequired[NeuronEngines]
    """(Neuron traces with device profiles) The engine view."""
    roofline: NotRequired[Roofline]
    """Unless the roofline was turned off."""
    what_if: NotRequired[WhatIf]
    """(``--what-if SPEC``, ``analyze(what_if=)``) The path recomputed with the spec's
    changes."""
    study: NotRequired[StudyInfo]
    explorer: NotRequired[ExplorerInfo]


__all__ = ["ExplorerInfo", "RankLine", "Report", "StudyInfo"]
