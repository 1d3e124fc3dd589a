"""TraceLens's ``execution_details.json`` (refused): the list of ``{"file", "batch_size",
"mode"}`` that sits beside CUDA/HIP graph capture traces and says which batch size and mode each
capture file was recorded at.  It holds no events, so it is no trace: given on its own it is
refused with what to pass instead; in a folder of traces it is left out by name
(:mod:`.kineto`); ``--graph-capture`` reads it for its folder
(:mod:`opscope.trace.graphs.sources`).

:func:`sniff` decodes the whole file when it fits in :data:`HEAD_BYTES` (decompressed): a
non-empty JSON array whose every item is an object with a string ``"file"`` and no ``"ph"``
(no trace event has a ``file`` and lacks a phase).  Any name: a renamed copy is refused too.
"""

from __future__ import annotations

from pathlib import Path

from opscope.errors import TraceError
from opscope.trace.jsondecode import loads
from opscope.trace.model import Trace
from opscope.trace.readers import head

NAME = "capture_details"
FILE_NAME = "execution_details.json"
HEAD_BYTES = 64 << 10
_BOM = b"\xef\xbb\xbf"
REFUSAL = (
    "TraceLens's capture details (each graph capture file's batch size and mode), not a "
    "trace; report the execution trace beside its folder, which finds it, or pass the folder "
    "to --graph-capture"
)


def is_details(doc: object) -> bool:
    """Whether a decoded JSON document is an ``execution_details.json`` list."""
    return (
        isinstance(doc, list)
        and bool(doc)
        and all(
            isinstance(e, dict) and isinstance(e.get("file"), str) and "ph" not in e for e in doc
        )
    )


def sniff(path: Path) -> bool:
    """Whether ``path`` is a file holding an ``execution_details.json`` list (see the module
    docstring)."""
    if not path.is_file():
        return False
    try:
        data, whole = head(path, HEAD_BYTES)
    except (TraceError, OSError):
        return False
    data = data[len(_BOM) :] if data.startswith(_BOM) else data
    if not whole or not data.lstrip().startswith(b"["):
        return False
    try:
        return is_details(loads(data))
    except ValueError:
        return False


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """Refuse: the capture details hold no events."""
    raise TraceError(f"{path}: {REFUSAL}")


__all__ = ["FILE_NAME", "NAME", "REFUSAL", "is_details", "load", "sniff"]
