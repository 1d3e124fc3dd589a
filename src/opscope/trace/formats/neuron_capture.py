"""A raw Neuron capture folder (``<instance>_pid_<pid>/<timestamp>/`` with ``*.neff``,
``*.ntff``, ``ntrace.pb``, ``trace_info.pb`` and the framework ``trace.json``), before
``neuron-explorer view`` has turned it into Parquet tables.

Read by the Neuron loader (:mod:`opscope.trace.neuron.loader`): the NEFF/NTFF pairing is
checked, the framework trace is read, and the Parquet tables are read where
``neuron-explorer view`` writes them (:func:`opscope.trace.neuron.capture.explorer_target`).
Loading never runs that program.
"""

from __future__ import annotations

from pathlib import Path

from opscope.trace.model import Trace
from opscope.trace.neuron.layout import profile_layout

NAME = "neuron-capture"


def sniff(path: Path) -> bool:
    """A folder holding NEFF, NTFF or Neuron runtime protobuf files a few levels down."""
    lay = profile_layout(path)
    return lay is not None and bool(lay.captures)


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The Neuron profile under ``path``."""
    from opscope.trace.neuron.loader import load_neuron

    return load_neuron(path, max_bytes=max_bytes)
