"""Capture: profiling sessions over torch.profiler, device backends, compile metrics, run folders.

Imports torch lazily; importing this package does not import torch (``profile`` and
``ProfileSession`` load :mod:`opscope.capture.session`, which does, on first use).

- :mod:`.devices`: which device, which profiler activities, how to synchronize it
- :mod:`.schedule`: wait/warmup/active arithmetic and its validation
- :mod:`.session`: ``profile(...)``, the context manager
- :mod:`.compile_metrics`: ``watch_compile()``, compile time measured outside the profile
- :mod:`.neuron`: ``torch_neuronx.profiling`` wiring for the ``neuron`` device
- :mod:`.neuron_explorer`: ``neuron-explorer view`` on a raw Neuron capture, before loading
- :mod:`.runfolder`: run folder naming, atomic JSON, ``run.json`` reading
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opscope.capture.compile_metrics import CompileRecord, watch_compile
from opscope.capture.devices import DeviceSpec, resolve_device
from opscope.capture.runfolder import RUN_SCHEMA, new_run_dir, read_run_json, write_json
from opscope.capture.schedule import Schedule

if TYPE_CHECKING:
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
    "read_run_json",
    "resolve_device",
    "watch_compile",
    "write_json",
]

_LAZY = {"profile", "ProfileSession", "SYNC_ANNOTATION"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from opscope.capture import session

        return getattr(session, name)
    raise AttributeError(f"module 'opscope.capture' has no attribute {name!r}")
