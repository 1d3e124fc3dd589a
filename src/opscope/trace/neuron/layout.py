"""What a path holds: Neuron Explorer Parquet folders, raw capture folders, framework traces,
legacy JSON (:func:`find_layout`), from file and folder names only."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from opscope.trace.neuron.schema import DEVICE_TABLES, SYSTEM_TABLE

TABLE_FILE = re.compile(r"^([A-Za-z][A-Za-z0-9]*?)(?:_(\d+))?\.parquet$")
_RAW_MARKERS = ("ntrace.pb", "trace_info.pb")
LEGACY_SYSTEM = "system_profile.json"
LEGACY_DEVICE = re.compile(r"^device_profile_model_(\d+)\.json$")
_FRAMEWORK_TRACES = re.compile(r"^(trace\.json(\.gz)?|neuron_framework_trace_rank_\d+\.json)$")
_MAX_DEPTH = 6


@dataclass
class Layout:
    """What a path holds: Parquet profile folders, raw capture folders, framework traces."""

    system: list[Path] = field(default_factory=list)  # folders with SystemProfileEvents
    device: list[Path] = field(default_factory=list)  # folders with device tables
    captures: list[Path] = field(default_factory=list)  # folders with .neff/.ntff/.pb files
    framework: list[Path] = field(default_factory=list)  # Kineto trace.json files
    legacy_system: list[Path] = field(default_factory=list)
    legacy_device: list[Path] = field(default_factory=list)

    @property
    def has_profile(self) -> bool:
        return bool(self.system or self.legacy_system)

    @property
    def empty(self) -> bool:
        return not (
            self.system
            or self.device
            or self.captures
            or self.framework
            or self.legacy_system
            or self.legacy_device
        )


def table_names(folder: Path) -> set[str]:
    out = set()
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            m = TABLE_FILE.match(p.name)
            if m and p.is_file():
                out.add(m.group(1))
    return out


def _walk(root: Path) -> list[Path]:
    """Folders under root (itself included), breadth first, at most _MAX_DEPTH deep."""
    out: list[Path] = []
    level = [root]
    for _ in range(_MAX_DEPTH):
        nxt: list[Path] = []
        for d in level:
            out.append(d)
            with contextlib.suppress(OSError):
                nxt.extend(sorted(p for p in d.iterdir() if p.is_dir() and not p.is_symlink()))
        level = nxt
        if not level:
            break
    return out


def find_layout(path: Path) -> Layout:
    """Scan ``path`` (a file or folder) for the Neuron pieces it holds."""
    lay = Layout()
    if path.is_file():
        if TABLE_FILE.match(path.name):
            path = path.parent
        elif path.name == LEGACY_SYSTEM:
            lay.legacy_system.append(path)
            return lay
        else:
            return lay
    for d in _walk(path):
        names = table_names(d)
        if SYSTEM_TABLE in names:
            lay.system.append(d)
        if names & set(DEVICE_TABLES):
            lay.device.append(d)
        try:
            files = sorted(p for p in d.iterdir() if p.is_file())
        except OSError:
            continue
        fnames = {p.name for p in files}
        if any(n.endswith((".neff", ".ntff")) for n in fnames) or fnames & set(_RAW_MARKERS):
            lay.captures.append(d)
        for p in files:
            if _FRAMEWORK_TRACES.match(p.name):
                lay.framework.append(p)
            elif p.name == LEGACY_SYSTEM:
                lay.legacy_system.append(p)
            elif LEGACY_DEVICE.match(p.name):
                lay.legacy_device.append(p)
    if (path / "run.json").is_file():
        # a run folder: its own trace.json.gz is the framework trace; the capture's copy in
        # neuron/<instance>_pid_<pid>/<timestamp>/ is the same file
        top = [p for p in (path / "trace.json.gz", path / "trace.json") if p.is_file()]
        if top:
            lay.framework = top[:1]
    return lay


def profile_layout(path: Path) -> Layout | None:
    """The layout a folder is read with as a Neuron profile: its own, or for a run folder (with
    ``run.json``) its ``neuron/`` folder's; None for a run folder without one, or a path that
    is not a folder."""
    if not path.is_dir():
        return None
    if (path / "run.json").is_file():
        sub = path / "neuron"
        return find_layout(sub) if sub.is_dir() else None
    return find_layout(path)


def is_neuron_path(path: Path) -> bool:
    """Whether :func:`opscope.trace.load` reads ``path`` as a Neuron profile (one of the Neuron
    formats of :mod:`opscope.trace.formats`).

    A Kineto file or a folder of Kineto traces is not; a folder is when it (or a folder under
    it, a few levels deep) holds Neuron Explorer Parquet tables, NEFF/NTFF/``ntrace.pb`` files
    or legacy ``system_profile.json``.  A run folder is when its ``neuron/`` folder holds any.
    """
    if path.is_file():
        return bool(TABLE_FILE.match(path.name)) or path.name == LEGACY_SYSTEM
    lay = profile_layout(path)
    return lay is not None and bool(lay.system or lay.device or lay.captures or lay.legacy_system)
