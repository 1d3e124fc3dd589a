"""The documents opscope writes, as types, and their JSON Schemas.

Each document is a ``TypedDict`` (keys that are sometimes absent are ``NotRequired``, values
that may be null are ``X | None``), one module per document or section:

* ``opscope.report/1`` - :class:`Report` (:mod:`.report`; its tables in :mod:`.tables`, its
  head in :mod:`.head` and :mod:`.devices`, its sections in :mod:`.findings`,
  :mod:`.roofline`, :mod:`.critical_path`, :mod:`.distributed`, :mod:`.neuron`,
  :mod:`.what_if`);
* ``opscope.rank_report/1`` - :class:`RankReport`; ``opscope.diff/1`` - :class:`Diff`;
  ``opscope.roofline/1`` - :class:`Roofline`; ``opscope.compare/1`` - :class:`Compare`;
  ``opscope.demo/1`` - :class:`Demo`; ``opscope.optimize/1`` - :class:`Optimize`;
  ``opscope.run/1`` - :class:`Run`; ``opscope.peaks/1`` - :class:`Peaks`;
* the answer of ``opscope.analysis.chain.dependency_chain`` - :class:`Chain`.

:func:`json_schema` gives a document's JSON Schema by name (:data:`DOCUMENTS`),
:func:`schema_of` the self-contained schema of any of these types.  Keys may be added to a
document within its version; none is renamed or removed (docs/schemas.md).

This package is a leaf: it imports nothing of opscope but :mod:`opscope.errors`.
"""

from opscope.documents.chain import Chain, EventRecord, Hop
from opscope.documents.compare import Compare, CompareVariant
from opscope.documents.critical_path import BoundBy, CriticalPath, PathStep, Segment
from opscope.documents.demo import Demo
from opscope.documents.devices import CaptureDevice, Device
from opscope.documents.diff import Diff
from opscope.documents.distributed import CollectiveRecord, Distributed, Instance, Straggler
from opscope.documents.findings import Evidence, Finding, FindingDetails
from opscope.documents.head import Engine, RankSource, Source, Unreadable, Window
from opscope.documents.neuron import NeuronEngines
from opscope.documents.optimize import Optimize, OptimizeCandidate
from opscope.documents.peaks import DevicePeaks, Peaks
from opscope.documents.rank_report import RankReport
from opscope.documents.report import RankLine, Report
from opscope.documents.roofline import Roofline, RooflineRow
from opscope.documents.run import Run
from opscope.documents.schema import (
    DOCUMENTS,
    SUMMARIES,
    UnknownDocumentError,
    document_id,
    json_schema,
    schema_of,
)
from opscope.documents.tables import KernelRow, OpRow, OpShapeRow, StepRow, Summary, Timeline
from opscope.documents.what_if import WhatIf

__all__ = [
    "DOCUMENTS",
    "SUMMARIES",
    "BoundBy",
    "CaptureDevice",
    "Chain",
    "CollectiveRecord",
    "Compare",
    "CompareVariant",
    "CriticalPath",
    "Demo",
    "Device",
    "DevicePeaks",
    "Diff",
    "Distributed",
    "Engine",
    "EventRecord",
    "Evidence",
    "Finding",
    "FindingDetails",
    "Hop",
    "Instance",
    "KernelRow",
    "NeuronEngines",
    "OpRow",
    "OpShapeRow",
    "Optimize",
    "OptimizeCandidate",
    "PathStep",
    "Peaks",
    "RankLine",
    "RankReport",
    "RankSource",
    "Report",
    "Roofline",
    "RooflineRow",
    "Run",
    "Segment",
    "Source",
    "StepRow",
    "Straggler",
    "Summary",
    "Timeline",
    "UnknownDocumentError",
    "Unreadable",
    "WhatIf",
    "Window",
    "document_id",
    "json_schema",
    "schema_of",
]
