"""AWS Neuron capture through ``torch_neuronx.profiling`` (the PrivateUse1 ``neuron`` device).

Contract: :func:`setup_neuron_capture` returns a :class:`NeuronCapture`.  When
``torch_neuronx.profiling`` offers ``NeuronConfig``, ``ProfileMode`` and ``NeuronProfiler``, it
builds ``NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME],
profile_output_dir=<run_dir>/neuron, **user options)`` (``correlate_device_time=True`` only if
the installed ``NeuronConfig`` accepts it: the keyword is undocumented), for the session to pass
to ``torch.profiler.profile(experimental_config=...)``, and ``NeuronProfiler(cfg).export_trace``
for the session to call from ``on_trace_ready`` before its own export.  Otherwise ``config`` is
None and ``info`` says why.  ``info`` is what ``run.json`` records under ``"neuron"``.

The Neuron profiling API is young and has changed shape before, so every piece is
feature-detected and nothing here is imported unless the session profiles a ``neuron`` device.
"""

from __future__ import annotations

import gzip
import importlib
import inspect
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.capture.runfolder import NEURON_DIR
from opscope.errors import OpscopeError

NEURON_PROFILING_MODULE = "torch_neuronx.profiling"
_CORRELATE = "correlate_device_time"


@dataclass
class NeuronCapture:
    """What the session needs to capture Neuron runtime and device activity."""

    output_dir: Path
    config: Any = None  # a NeuronConfig, passed as experimental_config
    export_trace: Callable[[Any], Any] | None = None  # NeuronProfiler(cfg).export_trace
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.config is not None


def neuron_profiling_api() -> tuple[Any, Any, Any] | str:
    """``(NeuronConfig, ProfileMode, NeuronProfiler)`` from torch_neuronx, or why not."""
    try:
        module = importlib.import_module(NEURON_PROFILING_MODULE)
    except Exception as exc:  # ImportError, or a broken install raising anything on import
        return f"{NEURON_PROFILING_MODULE} is not importable ({type(exc).__name__}: {exc})"
    names = ("NeuronConfig", "ProfileMode", "NeuronProfiler")
    missing = [n for n in names if not hasattr(module, n)]
    if missing:
        return f"{NEURON_PROFILING_MODULE} has no {', '.join(missing)}"
    return module.NeuronConfig, module.ProfileMode, module.NeuronProfiler


def setup_neuron_capture(run_dir: Path, options: Mapping[str, Any] | None = None) -> NeuronCapture:
    """Build the Neuron profiler config for a run folder; see the module docstring.

    ``options`` are extra ``NeuronConfig`` keywords (``max_events_per_nc``,
    ``capture_enabled_for_nc``, ``neff_cache_dir``, ``modes`` as ProfileMode members or names,
    …); they override the defaults.  Raises OpscopeError when NeuronConfig rejects them.
    """
    output_dir = run_dir / NEURON_DIR
    capture = NeuronCapture(output_dir=output_dir)
    api = neuron_profiling_api()
    if isinstance(api, str):
        capture.info = {
            "available": False,
            "reason": api + ": only the framework (Kineto) trace is captured",
            "options": dict(options or {}),
        }
        return capture
    config_cls, mode_cls, profiler_cls = api
    kwargs: dict[str, Any] = {
        "modes": [mode_cls.DEVICE, mode_cls.RUNTIME],
        "profile_output_dir": str(output_dir),
    }
    for key, value in (options or {}).items():
        kwargs[key] = _modes(mode_cls, value) if key == "modes" else value
    output_dir = Path(kwargs["profile_output_dir"])
    output_dir.mkdir(parents=True, exist_ok=True)
    capture.output_dir = output_dir

    # correlate_device_time is undocumented: add it only where NeuronConfig takes it.  When the
    # signature cannot tell (C type, **kwargs), try it and retry without on TypeError.
    accepts = _accepts_keyword(config_cls, _CORRELATE)
    tentative = _CORRELATE not in kwargs and accepts is None
    if _CORRELATE not in kwargs and accepts is not False:
        kwargs[_CORRELATE] = True
    try:
        config = config_cls(**kwargs)
    except TypeError as exc:
        if not tentative:
            raise OpscopeError(f"neuron_config: NeuronConfig rejected the options: {exc}") from None
        del kwargs[_CORRELATE]
        try:
            config = config_cls(**kwargs)
        except TypeError as exc2:
            raise OpscopeError(
                f"neuron_config: NeuronConfig rejected the options: {exc2}"
            ) from None
    correlate = kwargs.get(_CORRELATE)
    capture.config = config
    info: dict[str, Any] = {
        "available": True,
        "api": NEURON_PROFILING_MODULE,
        "version": _version(),
        "config": {k: _describe(v) for k, v in kwargs.items()},
        "correlate_device_time": correlate,
        "output_dir": _relative(output_dir, run_dir),
        "on_trace_ready": None,
        "notes": [],
    }
    try:
        exporter = getattr(profiler_cls(config), "export_trace", None)
    except Exception as exc:
        exporter = None
        info["notes"].append(f"NeuronProfiler(config) raised {type(exc).__name__}: {exc}")
    if exporter is None:
        info["notes"].append("NeuronProfiler has no export_trace: Neuron export skipped")
    else:
        capture.export_trace = exporter
        info["on_trace_ready"] = "NeuronProfiler.export_trace"
    capture.info = info
    return capture


def find_exported_trace(output_dir: Path, since: float) -> Path | None:
    """The newest Kineto JSON a Neuron exporter wrote under ``output_dir`` after ``since``."""
    if not output_dir.is_dir():
        return None
    candidates = [
        p
        for p in output_dir.rglob("*")
        if p.is_file()
        and (p.name.endswith(".json") or p.name.endswith(".json.gz"))
        and p.stat().st_mtime >= since - 1.0  # mtime granularity on some filesystems
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda p: p.stat().st_mtime)


def copy_as_gzip(source: Path, target: Path) -> None:
    """Copy a ``.json`` or ``.json.gz`` trace to ``target`` (always gzip)."""
    if source.name.endswith(".gz"):
        shutil.copyfile(source, target)
        return
    with source.open("rb") as fin, gzip.open(target, "wb") as fout:
        shutil.copyfileobj(fin, fout)


def _modes(mode_cls: Any, value: Any) -> Any:
    """ProfileMode members from names (``"device"``, ``"RUNTIME"``), members kept as given."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        value = [value]
    out = []
    for item in value:
        if isinstance(item, str):
            member = getattr(mode_cls, item.upper(), None)
            if member is None:
                raise OpscopeError(f"neuron_config: unknown ProfileMode {item!r}")
            out.append(member)
        else:
            out.append(item)
    return out


def _accepts_keyword(cls: Any, name: str) -> bool | None:
    """True/False when the signature tells; None when it cannot (``**kwargs``, C types)."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return None
    if name in params:
        return True
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return False


def _describe(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_describe(v) for v in value]
    name = getattr(value, "name", None)  # enum members: ProfileMode.DEVICE -> "DEVICE"
    return name if isinstance(name, str) else str(value)


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except ValueError:
        return str(path)


def _version() -> str | None:
    try:
        module = importlib.import_module("torch_neuronx")
    except Exception:
        return None
    version = getattr(module, "__version__", None)
    return str(version) if version is not None else None
