"""The rank report (``opscope.rank_report/1``, ``RankReport.to_dict()``): the analysis of one
rank, with no events, as a worker sends it back when ranks are analysed elsewhere;
``RankReport.from_dict`` reads it back exactly."""

from typing import Literal

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.critical_path import CriticalPath
from opscope.documents.devices import Device
from opscope.documents.distributed import CollectiveRecord
from opscope.documents.findings import Finding
from opscope.documents.head import RankSource, Window
from opscope.documents.neuron import NeuronEngines
from opscope.documents.roofline import Roofline
from opscope.documents.tables import KernelRow, OpRow, OpShapeRow, StepRow, Timeline


class RankExtra(TypedDict):
    """The rank's further sections, as in a report (its ``distributed`` section is built when
    the ranks are merged)."""

    critical_path: NotRequired[CriticalPath]
    neuron: NotRequired[NeuronEngines]


class RankReport(TypedDict):
    """The analysis of one rank (``opscope.rank_report/1``)."""

    schema: Literal["opscope.rank_report/1"]
    rank: int
    source: RankSource
    device: Device
    """The device as the trace names it (its peaks are in the roofline)."""
    window: Window
    device_is_host: bool
    device_time_us: float
    """All device time in the window."""
    ops: list[OpRow]
    """Per op name (without the roofline's columns)."""
    op_shapes: list[OpShapeRow]
    """Per (op name, input shapes) (without the roofline's columns)."""
    kernels: list[KernelRow]
    timeline: Timeline
    steps: list[StepRow]
    findings: list[Finding]
    roofline: Roofline | None
    collectives: list[CollectiveRecord]
    """The rank's collective calls, in issue order."""
    extra: RankExtra
    step_compute_us: NotRequired[dict[str, float]]
    """Each step's compute, communication left out, µs (the job's load-imbalance test)."""


__all__ = ["RankExtra", "RankReport"]
