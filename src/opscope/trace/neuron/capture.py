"""Raw capture folders: NEFF/NTFF pairing (:func:`check_capture`) and the ``neuron-explorer
view`` command that turns a capture into Parquet tables (:func:`explorer_command`), with where
it writes them (:func:`explorer_target`) and a run of it (:func:`run_explorer`)."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXPLORER_ENV = "OPSCOPE_NEURON_EXPLORER"  # path of the neuron-explorer binary (default: PATH)
EXPLORER_TIMEOUT_S = 600.0
_NEFF = re.compile(r"^neff_(\d+)(?:_vnc_\d+)?\.neff$")
_NTFF_MODEL = re.compile(r"^(\d+)_instid_\d+_vnc_\d+\.ntff$")
_PID_FOLDER = re.compile(r"^(?P<instance>.+)_pid_(?P<pid>\d+)$")


@dataclass
class CaptureCheck:
    """What a raw capture folder holds and what is wrong with it."""

    folder: Path
    neffs: list[str] = field(default_factory=list)
    ntffs: list[str] = field(default_factory=list)
    protobufs: list[str] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)


def check_capture(folder: Path) -> CaptureCheck:
    """Pair NEFF and NTFF files by their numeric id (both naming schemes of NEURON.md).

    Model mode: ``neff_<id>[_vnc_<v>].neff`` <-> ``<id>_instid_<i>_vnc_<v>.ntff``.  Session mode
    (``profile_nc_<n>_session_<s>.ntff`` and other ``profile*.ntff``) has one NTFF per core for
    many NEFFs, so only model-mode NTFFs need a NEFF of their id.  Problems (each a dict with
    ``code``, ``message`` and the ``files``): a model-mode NTFF without its NEFF or a NEFF
    without an NTFF (``ERROR_PROCESS_INCOMPLETE``, Neuron's name for an incomplete pair), an
    empty NTFF (nothing executed), NTFFs without any NEFF, protobuf files only.
    """
    c = CaptureCheck(folder=folder)
    try:
        files = sorted(p for p in folder.iterdir() if p.is_file())
    except OSError:
        return c
    neff_ids: dict[str, str] = {}
    model_ntff: dict[str, str] = {}
    session_ntff: list[str] = []
    for p in files:
        if p.name.endswith(".neff"):
            c.neffs.append(p.name)
            m = _NEFF.match(p.name)
            if m:
                neff_ids[m.group(1)] = p.name
        elif p.name.endswith(".ntff"):
            c.ntffs.append(p.name)
            m = _NTFF_MODEL.match(p.name)
            if m:
                model_ntff[m.group(1)] = p.name
            else:
                session_ntff.append(p.name)
            with contextlib.suppress(OSError):
                if p.stat().st_size == 0:
                    c.problems.append(
                        {
                            "code": "EMPTY_NTFF",
                            "message": f"{p.name} is empty: nothing executed on that core, or "
                            "the process owned cores it never used",
                            "files": [p.name],
                        }
                    )
        elif p.name.endswith(".pb"):
            c.protobufs.append(p.name)
    orphan_ntff = sorted(v for k, v in model_ntff.items() if k not in neff_ids)
    if orphan_ntff and neff_ids:
        c.problems.append(
            {
                "code": "ERROR_PROCESS_INCOMPLETE",
                "message": f"{len(orphan_ntff)} NTFF file(s) without the NEFF of the same id "
                f"({', '.join(orphan_ntff[:3])}): the device trace cannot be decoded",
                "files": orphan_ntff,
            }
        )
    elif c.ntffs and not c.neffs:
        c.problems.append(
            {
                "code": "NO_NEFF",
                "message": "NTFF files but no .neff: the compiled graphs were not copied "
                "(set NeuronConfig(neff_cache_dir=...) or TORCH_NEURONX_NEFF_CACHE_DIR)",
                "files": c.ntffs[:20],
            }
        )
    if not session_ntff:
        orphan_neff = sorted(v for k, v in neff_ids.items() if k not in model_ntff)
        if orphan_neff:
            c.problems.append(
                {
                    "code": "ERROR_PROCESS_INCOMPLETE",
                    "message": f"{len(orphan_neff)} NEFF file(s) without an NTFF "
                    f"({', '.join(orphan_neff[:3])}): no device profile for them (capture with "
                    "ProfileMode.DEVICE, and synchronize before the profiler stops)",
                    "files": orphan_neff,
                }
            )
    if c.protobufs and not c.ntffs and not c.neffs:
        c.problems.append(
            {
                "code": "SYSTEM_ONLY",
                "message": "only runtime protobuf files (ntrace.pb/trace_info.pb): a system "
                "profile without device profiles; neuron-explorer view turns it into tables",
                "files": c.protobufs,
            }
        )
    return c


def explorer_command(capture: Path, out: Path) -> list[str]:
    """The ``neuron-explorer view`` command that turns a capture folder into Parquet tables."""
    exe = os.environ.get(EXPLORER_ENV) or "neuron-explorer"
    return [exe, "view", "-d", str(capture), "--ingest-only", "--data-path", str(out)]


def capture_root(folder: Path) -> Path:
    """The ``<instance>_pid_<pid>`` folder above a session folder, else the folder itself:
    neuron-explorer finds the framework trace next to the runtime files there."""
    return folder.parent if _PID_FOLDER.match(folder.parent.name) else folder


def explorer_target(capture: Path) -> Path:
    """Where ``neuron-explorer view`` writes for a capture: ``explorer/`` beside the
    ``<instance>_pid_<pid>`` folders (``$OPSCOPE_CACHE_DIR`` when that is not writable)."""
    root = capture_root(capture)
    target = root.parent / "explorer"
    if os.access(root.parent, os.W_OK):
        return target
    from opscope.trace.cache import cache_dir

    return cache_dir().parent / "neuron" / root.name / "explorer"


def run_explorer(capture: Path, out: Path, timeout_s: float = EXPLORER_TIMEOUT_S) -> str | None:
    """Run ``neuron-explorer view`` on a capture folder; None on success, else why not."""
    cmd = explorer_command(capture, out)
    if shutil.which(cmd[0]) is None:
        return "not found"
    try:
        out.mkdir(parents=True, exist_ok=True)
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


def shell_text(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)
