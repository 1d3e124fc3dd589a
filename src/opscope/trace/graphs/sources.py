"""Which capture traces to read for an execution trace.

``--graph-capture PATH`` names a capture trace or a folder of them (every trace file in it);
without it, a ``capture_traces/`` folder beside the execution trace (or inside its run folder)
is used, the layout TraceLens's inference workflow writes.  A folder may hold
``execution_details.json``, TraceLens's list of ``{"file", "batch_size", "mode"}``: it gives
each capture file its batch size (the analysis then pairs a replay with a capture of the
batch size the replay ran at, rounded up to a captured one, as vLLM pads its batches).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from opscope.errors import UsageError
from opscope.trace.formats.capture_details import FILE_NAME as DETAILS_FILE

CAPTURE_FOLDER = "capture_traces"
_TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass(frozen=True)
class CaptureFile:
    """A capture trace to read, with what ``execution_details.json`` says of it."""

    path: Path
    batch_size: int | None = None
    mode: str | None = None


def default_capture_folder(trace_path: str | Path) -> Path | None:
    """The ``capture_traces/`` folder beside a trace file (or in a run folder), if any."""
    p = Path(trace_path)
    for folder in (p / CAPTURE_FOLDER, p.parent / CAPTURE_FOLDER):
        if folder.is_dir() and any(_is_trace(f) for f in folder.iterdir()):
            return folder
    return None


def _is_trace(p: Path) -> bool:
    return p.is_file() and p.name != DETAILS_FILE and p.name.endswith(_TRACE_SUFFIXES)


def _details(folder: Path) -> dict[str, tuple[int | None, str | None]]:
    """``execution_details.json`` of a folder: file name -> (batch size, mode)."""
    f = folder / DETAILS_FILE
    if not f.is_file():
        return {}
    try:
        entries = orjson.loads(f.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{f}: not readable JSON ({exc})") from None
    out: dict[str, tuple[int | None, str | None]] = {}
    if not isinstance(entries, list):
        raise UsageError(f"{f}: expected a list of {{file, batch_size, mode}} objects")
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("file"), str):
            continue
        bs = e.get("batch_size")
        mode = e.get("mode")
        out[e["file"]] = (
            bs if isinstance(bs, int) and not isinstance(bs, bool) else None,
            mode if isinstance(mode, str) else None,
        )
    return out


def capture_paths(path: str | Path) -> list[CaptureFile]:
    """The capture traces ``path`` names: the file itself, or every trace file of the folder
    (in name order), each with its batch size and mode from the folder's
    ``execution_details.json`` (that file named itself stands for its folder).  A path that
    is neither, or a folder without a trace file, is a :class:`UsageError`."""
    p = Path(path)
    if p.is_file() and p.name == DETAILS_FILE:
        p = p.parent
    if p.is_file():
        details = _details(p.parent)
        bs, mode = details.get(p.name, (None, None))
        return [CaptureFile(p, bs, mode)]
    if not p.is_dir():
        raise UsageError(f"--graph-capture {path}: no such file or folder")
    files = sorted(f for f in p.iterdir() if _is_trace(f))
    if not files:
        raise UsageError(
            f"--graph-capture {path}: the folder holds no trace file (.json, .json.gz)"
        )
    details = _details(p)
    return [CaptureFile(f, *details.get(f.name, (None, None))) for f in files]


__all__ = ["CAPTURE_FOLDER", "CaptureFile", "capture_paths", "default_capture_folder"]
