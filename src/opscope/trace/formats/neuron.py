"""A Neuron profile, in any of its shapes, read as one by the Neuron loader
(:mod:`opscope.trace.neuron.loader`, which reads every Neuron piece under the path together):

* Neuron Explorer Parquet output (``neuron-explorer view``, profile schema 7.4.0): a
  ``<Table>.parquet`` file, a processed-profile folder (``<name>@latest/``), an ``explorer/``
  folder, or any folder (a run folder's ``neuron/``) holding them a few levels down (tables
  read in place, not cached);
* legacy Neuron JSON (``neuron-profile --output-format json``): ``system_profile.json``, with
  ``device_profile_model_<id>.json`` beside it (``device_profile_model_<id>.json`` files alone
  are not claimed);
* a raw Neuron capture folder (``<instance>_pid_<pid>/<timestamp>/`` with ``*.neff``,
  ``*.ntff``, ``ntrace.pb``, ``trace_info.pb`` and the framework ``trace.json``), before
  ``neuron-explorer view`` has turned it into tables: the tables are read where that program
  writes them (:func:`opscope.trace.neuron.capture.explorer_target`); loading never runs it.

A profile is one piece read whole (its folder's layout says what belongs together): it is not
listed file by file from a glob or a URL, nor split across a cluster's workers.
"""

from __future__ import annotations

from pathlib import Path

from opscope.trace.model import Trace
from opscope.trace.neuron.layout import LEGACY_SYSTEM, TABLE_FILE, is_neuron_path

NAME = "neuron"
_RAW_SUFFIXES = (".neff", ".ntff", ".pb")


def sniff(path: Path) -> bool:
    """A Parquet table file or ``system_profile.json``, or a folder holding Neuron tables,
    capture files or legacy JSON a few levels down (:func:`~opscope.trace.neuron.layout
    .is_neuron_path`)."""
    return is_neuron_path(path)


def claims(name: str) -> bool:
    """A file name of a Neuron profile's pieces (a table, ``system_profile.json``, a capture's
    NEFF/NTFF/protobuf file)."""
    return bool(TABLE_FILE.match(name)) or name == LEGACY_SYSTEM or name.endswith(_RAW_SUFFIXES)


def load(
    path: Path, *, cache: bool = True, max_bytes: int | None = None, workers: int | None = None
) -> Trace:
    """The Neuron profile under ``path`` (its ``meta.format``: :data:`NAME`)."""
    from opscope.trace.neuron.loader import load_neuron

    trace = load_neuron(path, max_bytes=max_bytes)
    trace.meta.format = NAME
    return trace
