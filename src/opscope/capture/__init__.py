"""Capture: profiling sessions over torch.profiler, device backends, compile metrics, run folders.

Imports lazily: importing this package imports none of its modules (each name loads its module
on first use, so the CLI's Neuron conversion step, :mod:`.neuron_explorer`, costs a report
nothing of the rest), and none imports torch at load (``profile`` and ``ProfileSession`` load
:mod:`opscope.capture.session`, which does, on first use).

- :mod:`.devices`: which device, which profiler activities, how to synchronize it
- :mod:`.schedule`: wait/warmup/active arithmetic and its validation
- :mod:`.session`: ``profile(...)``, the context manager
- :mod:`.compile_metrics`: ``watch_compile()``, compile time measured outside the profile
- :mod:`.neuron`: ``torch_neuronx.profiling`` wiring for the ``neuron`` device
- :mod:`.neuron_explorer`: ``neuron-explorer view`` on a raw Neuron capture, before loading
- :mod:`.loader_workers`: each DataLoader worker profiled into ``loader_traces/``
- :mod:`.runfolder`: run folder naming, atomic JSON, ``run.json`` reading
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opscope.capture.compile_metrics import CompileRecord, watch_compile
    from opscope.capture.devices import DeviceSpec, resolve_device
    from opscope.capture.loader_workers import profile_loader_workers
    from opscope.capture.runfolder import RUN_SCHEMA, new_run_dir, read_run_json, write_json
    from opscope.capture.schedule import Schedule
    from opscope.capture.session import SYNC_ANNOTATION, ProfileSession, profile

__all__ = [
    "RUN_SCHEMA",
    "SYNC_ANNOTATION",
    "CompileRecord",
    "DeviceSpec",
    "ProfileSession",
    "Schedule",
    "new_run_dir",
    "profile",
    "profile_loader_workers",
    "read_run_json",
    "resolve_device",
    "watch_compile",
    "write_json",
]

# each public name and the module that holds it
_LAZY = {
    "CompileRecord": "compile_metrics",
    "watch_compile": "compile_metrics",
    "DeviceSpec": "devices",
    "resolve_device": "devices",
    "profile_loader_workers": "loader_workers",
    "RUN_SCHEMA": "runfolder",
    "new_run_dir": "runfolder",
    "read_run_json": "runfolder",
    "write_json": "runfolder",
    "Schedule": "schedule",
    "profile": "session",
    "ProfileSession": "session",
    "SYNC_ANNOTATION": "session",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opscope.capture' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"opscope.capture.{module}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
