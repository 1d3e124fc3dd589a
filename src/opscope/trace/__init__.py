"""Trace engine: any PyTorch/Kineto trace -> one columnar event table (Arrow) with SQL.

Never imports torch: an analyst may read traces without it.
"""

from opscope.trace.device import DeviceInfo
from opscope.trace.formats.kineto import find_trace_files
from opscope.trace.ingest import load, load_document
from opscope.trace.model import Trace, TraceMeta

__all__ = ["DeviceInfo", "Trace", "TraceMeta", "find_trace_files", "load", "load_document"]
