"""Neuron Explorer Parquet output (``neuron-explorer view``, profile schema 7.4.0): a
``<Table>.parquet`` file, a processed-profile folder (``<name>@latest/``), an ``explorer/``
folder, or any folder (a run folder's ``neuron/``) holding them a few levels down.

Read by the Neuron loader (:mod:`opscope.trace.neuron.loader`) together with every other Neuron
piece under the path (a capture's framework trace, device profiles, legacy JSON).
"""

from __future__ import annotations

from pathlib import Path

from opscope.trace.model import Trace
from opscope.trace.neuron.layout import TABLE_FILE, profile_layout

NAME = "neuron-explorer"


def sniff(path: Path) -> bool:
    """A Parquet table file, or a folder holding a system or device profile's tables."""
    if path.is_file():
        return bool(TABLE_FILE.match(path.name))
    lay = profile_layout(path)
    return lay is not None and bool(lay.system or lay.device)


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The Neuron profile under ``path`` (tables not cached: they are read in place)."""
    from opscope.trace.neuron.loader import load_neuron

    return load_neuron(path, max_bytes=max_bytes)
