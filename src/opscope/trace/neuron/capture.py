"""Raw capture folders: NEFF/NTFF pairing (:func:`check_capture`), the ``neuron-explorer view``
command that turns a capture into Parquet tables (:func:`explorer_command`), where it writes
them (:func:`explorer_target`) and which runs a path still needs (:func:`conversions`).

Nothing here runs the command: loading reads what it wrote, and the step that runs it is
:mod:`opscope.capture.neuron_explorer`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.trace.neuron.layout import Layout, find_layout, profile_layout

EXPLORER_ENV = "OPSCOPE_NEURON_EXPLORER"  # path of the neuron-explorer binary (default: PATH)
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


def explorer_executable() -> str:
    """``$OPSCOPE_NEURON_EXPLORER``, else ``neuron-explorer`` (found on PATH)."""
    return os.environ.get(EXPLORER_ENV) or "neuron-explorer"


def explorer_on_path() -> bool:
    """Whether :func:`explorer_executable` names a program that can be found (nothing is run)."""
    return shutil.which(explorer_executable()) is not None


def explorer_command(capture: Path, out: Path) -> list[str]:
    """The ``neuron-explorer view`` command that turns a capture folder into Parquet tables."""
    exe = explorer_executable()
    return [exe, "view", "-d", str(capture), "--ingest-only", "--data-path", str(out)]


def capture_root(folder: Path) -> Path:
    """The ``<instance>_pid_<pid>`` folder above a session folder, else the folder itself:
    neuron-explorer finds the framework trace next to the runtime files there."""
    return folder.parent if _PID_FOLDER.match(folder.parent.name) else folder


def capture_roots(lay: Layout) -> list[Path]:
    """The capture roots (:func:`capture_root`) of a layout's capture folders, sorted."""
    return sorted({capture_root(c) for c in lay.captures})


def explorer_target(capture: Path) -> Path:
    """Where ``neuron-explorer view`` writes for a capture: ``explorer/`` beside the
    ``<instance>_pid_<pid>`` folders (``$OPSCOPE_CACHE_DIR`` when that is not writable)."""
    root = capture_root(capture)
    target = root.parent / "explorer"
    if os.access(root.parent, os.W_OK):
        return target
    from opscope.trace.cache import cache_dir

    return cache_dir().parent / "neuron" / root.name / "explorer"


def shell_text(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


def converted(target: Path) -> Layout | None:
    """The Parquet profiles ``neuron-explorer view`` wrote into ``target``, or None when it
    holds none (not run yet, or failed)."""
    if not target.is_dir():
        return None
    lay = find_layout(target)
    return lay if lay.system or lay.device else None


@dataclass(frozen=True)
class Conversion:
    """One ``neuron-explorer view`` run a raw capture needs: the capture root (an
    ``<instance>_pid_<pid>`` folder) and where the tables go."""

    capture: Path
    target: Path

    @property
    def command(self) -> list[str]:
        return explorer_command(self.capture, self.target)


def pending(lay: Layout) -> list[Conversion]:
    """The runs a layout's raw captures need: one per capture root when the layout holds no
    system profile (Parquet or legacy JSON), all writing where the first capture's tables go
    (:func:`explorer_target`); none once that holds tables."""
    if not lay.captures or lay.has_profile:
        return []
    target = explorer_target(lay.captures[0])
    if converted(target) is not None:
        return []
    return [Conversion(root, target) for root in capture_roots(lay)]


def conversions(path: Path) -> list[Conversion]:
    """The ``neuron-explorer view`` runs ``path`` needs before its Neuron tables can be read
    (see :func:`pending`); none for a path that is not a raw Neuron capture."""
    lay = profile_layout(path)
    return pending(lay) if lay is not None else []
