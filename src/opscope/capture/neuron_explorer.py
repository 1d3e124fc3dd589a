"""``neuron-explorer view``: a raw Neuron capture -> the Parquet tables opscope reads.

A step of its own, before loading: :func:`opscope.trace.load` never runs a program, it reads
the tables where this step writes them (``explorer/`` beside the ``<instance>_pid_<pid>``
folders; see :func:`opscope.trace.neuron.capture.explorer_target`).  The CLI commands that read
a trace (``report``, ``sql``, ``compare``, ``explore``, and the report ``profile`` prints) call
:func:`convert` first; from Python, call it before ``opscope.load``.

:func:`convert` runs the command once per capture root of a raw capture under a path that has
no processed tables yet (:func:`opscope.trace.neuron.capture.conversions`), when
``neuron-explorer`` is on PATH (``$OPSCOPE_NEURON_EXPLORER`` names another binary), with a
timeout.  Where it is not installed nothing runs, and loading warns with the command.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from opscope.trace.neuron.capture import Conversion, conversions, explorer_on_path, shell_text

EXPLORER_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Outcome:
    """One run: its command (shell text) and why it failed (None: it succeeded)."""

    command: str
    error: str | None = None


def run_explorer(job: Conversion, timeout_s: float = EXPLORER_TIMEOUT_S) -> str | None:
    """Run one ``neuron-explorer view``; None on success, else why not."""
    cmd = job.command
    try:
        job.target.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, check=False, stdin=None
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout_s:.0f} s"
    except OSError as exc:
        return f"could not run ({exc})"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()
        return f"exit code {proc.returncode}" + (f": {tail[-1][:200]}" if tail else "")
    return None


def convert(
    path: str | Path,
    *,
    timeout_s: float = EXPLORER_TIMEOUT_S,
    say: Callable[[str], None] | None = None,
) -> list[Outcome]:
    """Turn the raw Neuron captures under ``path`` into Parquet tables (see the module
    docstring); the runs made, none when there is nothing to convert or no
    ``neuron-explorer``.  ``say`` is told about each run before it starts and each failure."""
    jobs = conversions(Path(path))
    if not jobs or not explorer_on_path():
        return []
    out: list[Outcome] = []
    for job in jobs:
        text = shell_text(job.command)
        if say is not None:
            say(f"converting the Neuron capture {job.capture}: {text}")
        error = run_explorer(job, timeout_s)
        if error is not None and say is not None:
            say(f"warning: neuron-explorer view failed ({error}): {text}")
        out.append(Outcome(text, error))
    return out
