"""PyTorch execution traces (``ExecutionTraceObserver``: a ``schema`` and ``nodes``, a graph of
ops without timings): refused, with the reason and what to pass instead.

:func:`sniff` reads the first :data:`HEAD_BYTES` of a file (decompressed): a JSON object with
``"schema"`` and ``"nodes": [`` and no ``"traceEvents"`` there.  A file that fits in them must
also decode as such an object, so that a cut-short or odd small file gets the JSON reader's own
error.  An execution trace met inside a folder of per-rank traces is refused by the Kineto
reader (:mod:`opscope.trace.jsonstream`) with the same message.
"""

from __future__ import annotations

import re
from pathlib import Path

from opscope.errors import TraceError
from opscope.trace.jsondecode import loads
from opscope.trace.jsonstream import EXECUTION_TRACE_REFUSAL
from opscope.trace.model import Trace
from opscope.trace.readers import head

NAME = "execution_trace"
HEAD_BYTES = 64 << 10
_BOM = b"\xef\xbb\xbf"
_NODES = re.compile(rb'"nodes"\s*:\s*\[')
_SCHEMA = re.compile(rb'"schema"\s*:')


def _head(path: Path) -> tuple[bytes, bool] | None:
    """The first :data:`HEAD_BYTES` decompressed bytes of a file and whether that is all of
    it; None when it cannot be read as a trace file at all."""
    try:
        return head(path, HEAD_BYTES)
    except (TraceError, OSError):
        return None


def sniff(path: Path) -> bool:
    """Whether ``path`` is a file that opens like an execution trace (see the module docstring)."""
    if not path.is_file():
        return False
    got = _head(path)
    if got is None:
        return False
    head, whole = got
    data = head[len(_BOM) :] if head.startswith(_BOM) else head
    if not data.lstrip().startswith(b"{") or b'"traceEvents"' in data:
        return False
    if _NODES.search(data) is None or _SCHEMA.search(data) is None:
        return False
    if not whole:
        return True
    try:
        doc = loads(data)
    except ValueError:
        return False
    return isinstance(doc, dict) and "nodes" in doc and "schema" in doc and "traceEvents" not in doc


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """Refuse: an execution trace holds no timed events."""
    raise TraceError(f"{path}: {EXECUTION_TRACE_REFUSAL}")
