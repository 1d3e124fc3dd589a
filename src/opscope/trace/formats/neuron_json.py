"""Legacy Neuron JSON (``neuron-profile --output-format json``): ``system_profile.json`` (events,
memory and CPU use), with ``device_profile_model_<id>.json`` beside it (old device summaries and
instructions, kept as tables).

Read by the Neuron loader (:mod:`opscope.trace.neuron.loader`) together with every other Neuron
piece under the path.  ``device_profile_model_<id>.json`` files alone are not claimed.
"""

from __future__ import annotations

from pathlib import Path

from opscope.trace.model import Trace
from opscope.trace.neuron.layout import LEGACY_SYSTEM, profile_layout

NAME = "neuron-json"


def sniff(path: Path) -> bool:
    """A ``system_profile.json`` file, or a folder holding one a few levels down."""
    if path.is_file():
        return path.name == LEGACY_SYSTEM
    lay = profile_layout(path)
    return lay is not None and bool(lay.legacy_system)


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The Neuron profile under ``path``."""
    from opscope.trace.neuron.loader import load_neuron

    return load_neuron(path, max_bytes=max_bytes)
