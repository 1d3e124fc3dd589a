"""Run folders: one folder per profiling run, named ``<YYYYmmdd-HHMMSS>-<label>``.

Contract: :func:`new_run_dir` creates a folder that did not exist before (two runs started in
the same second get ``…-<label>-2``, ``…-3``: ``mkdir`` without ``exist_ok`` is the lock, so
concurrent processes cannot share a folder).  :func:`write_json` replaces a file atomically (a
reader never sees half a ``run.json``).  :func:`read_run_json` reads ``run.json`` back, from the
file or its folder, and checks the schema.

Layout (see docs/capture.md)::

    <out>/<YYYYmmdd-HHMMSS>-<label>/
      run.json                what ran (schema RUN_SCHEMA)
      trace.json.gz           Kineto trace of the first active window
      trace.cycle<N>.json.gz  later windows when the schedule repeats (N = 2, 3, …)
      neuron/                 Neuron runtime/device outputs when captured

A run with several ranks (one process each) shares one folder, which every rank opens with
:func:`open_run_dir`; each rank writes its own files, so no two processes write one file::

      run.json                what ran, written by rank 0 (with the world size)
      ranks/rank<N>.json      each rank's own run document (same schema)
      traces/rank<N>.json.gz  rank N's trace of the first active window
      traces/cycle<K>/rank<N>.json.gz   later windows (the trace reader reads ``traces/*`` only)
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from opscope.errors import OpscopeError

RUN_SCHEMA = "opscope.run/1"
RUN_JSON = "run.json"
TRACE_NAME = "trace.json.gz"
NEURON_DIR = "neuron"
TRACES_DIR = "traces"
RANKS_DIR = "ranks"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def trace_name(cycle: int) -> str:
    """File name of the trace of active window ``cycle`` (1-based)."""
    return TRACE_NAME if cycle <= 1 else f"trace.cycle{cycle}.json.gz"


def rank_trace_name(rank: int, cycle: int) -> str:
    """Path, relative to the run folder, of rank ``rank``'s trace of window ``cycle`` (1-based).

    Later windows go one folder down, so that ``traces/`` holds exactly one file per rank (the
    trace reader loads every ``traces/*.json.gz`` as a rank of one window).
    """
    if rank < 0:
        raise ValueError(f"rank must be >= 0, got {rank}")
    base = f"rank{rank}.json.gz"
    return f"{TRACES_DIR}/{base}" if cycle <= 1 else f"{TRACES_DIR}/cycle{cycle}/{base}"


def rank_run_json(rank: int) -> str:
    """Path, relative to the run folder, of rank ``rank``'s own run document."""
    return f"{RANKS_DIR}/rank{rank}.json"


def safe_label(label: str | None) -> str:
    """``label`` reduced to characters safe in a folder name (``run`` when empty)."""
    text = _UNSAFE.sub("-", label or "").strip("-.")
    return text[:80] or "run"


def new_run_dir(out: str | os.PathLike[str], label: str | None = None) -> Path:
    """Create and return a fresh ``out/<YYYYmmdd-HHMMSS>-<label>`` folder."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{safe_label(label)}"
    for n in range(1, 10_000):
        candidate = root / (stem if n == 1 else f"{stem}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise OpscopeError(f"{root}: could not create a new run folder named {stem}-<n>")


def open_run_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` if needed and return it: a run folder that several ranks share.

    Unlike :func:`new_run_dir` this does not insist on a fresh folder: the ranks of one run
    agree on its name beforehand (see :mod:`opscope.capture.distributed`) and all open it.
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as indented JSON to ``path`` atomically (temp file + rename).

    Values JSON cannot hold (paths, enums, …) are written as their ``str()``.
    """
    target = Path(path)
    text = json.dumps(obj, indent=2, sort_keys=False, default=str, ensure_ascii=False)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the file private (0600); the file is readable as the traces beside it
        # are: the mode open() would give it under the process's umask
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read_run_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``run.json`` from a run folder (or the file itself); check its schema."""
    p = Path(path)
    if p.is_dir():
        p = p / RUN_JSON
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise OpscopeError(f"{p}: no such file (not a run folder?)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OpscopeError(f"{p}: cannot read run.json: {exc}") from None
    if not isinstance(data, dict):
        raise OpscopeError(f"{p}: run.json is not a JSON object")
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith("opscope.run/"):
        raise OpscopeError(f"{p}: not an opscope run.json (schema {schema!r})")
    return data


def run_environment() -> dict[str, Any]:
    """What ``run.json`` says of the process that ran: ``command``, ``cwd``, ``hostname``,
    ``pid``, ``platform``, ``python`` and ``torch`` (its version, CUDA's and HIP's)."""
    import torch

    return {
        "command": list(sys.argv),
        "cwd": os.getcwd(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": {
            "version": str(torch.__version__),
            "cuda": getattr(torch.version, "cuda", None),
            "hip": getattr(torch.version, "hip", None),
        },
    }
