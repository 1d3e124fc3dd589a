"""Which device to profile, and what torch.profiler needs to see its work.

Contract: :func:`resolve_device` turns a device name (or ``None`` for "the accelerator this
process has") into a :class:`DeviceSpec`, or raises :class:`~opscope.errors.DeviceError` with a
one-line reason.  The spec carries the profiler activities to turn on, chosen from what this
build of torch supports (``torch.profiler.supported_activities()``), never a hard-coded
``[CPU, CUDA]``: a CUDA activity on an XPU or Neuron host records nothing, and a PrivateUse1
backend (AWS Neuron's ``neuron``, …) only shows device work with ``ProfilerActivity.PrivateUse1``.

Auto-detection order: CUDA (a ROCm build answers to ``torch.cuda`` too; the kind is ``rocm``
when ``torch.version.hip`` is set), XPU, MTIA, the registered PrivateUse1 backend, else CPU.

torch is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from opscope.errors import DeviceError

#: The name torch gives the PrivateUse1 key while no backend has renamed it.
UNREGISTERED_PRIVATEUSE1 = "privateuseone"

#: Device kinds a DeviceSpec can have.
KINDS = ("cpu", "cuda", "rocm", "xpu", "mtia", "neuron", "privateuse1")

# The torch.profiler activity that records each kind's device work (ProfilerActivity member).
_DEVICE_ACTIVITY = {
    "cuda": "CUDA",
    "rocm": "CUDA",  # ROCm builds route HIP activity through the CUDA activity (roctracer)
    "xpu": "XPU",
    "mtia": "MTIA",
    "neuron": "PrivateUse1",
    "privateuse1": "PrivateUse1",
}


#: What a torch device query raises when it fails: RuntimeError from the C++ side or the driver,
#: AssertionError from a lazy init in a build without the backend, AttributeError/TypeError from
#: a partial backend module, ValueError/OSError from a driver's answer.
QUERY_ERRORS = (RuntimeError, AssertionError, AttributeError, TypeError, ValueError, OSError)


def _failed(what: str, exc: BaseException) -> str:
    return f"{what} raised {type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class DeviceSpec:
    """A device chosen for profiling.

    ``activities`` is a tuple of ``torch.profiler.ProfilerActivity`` (always CPU first, then the
    device's own activity when this torch build supports it).  ``backend`` is the torch module
    that drives the device (``torch.cuda``, ``torch.xpu``, ``torch.<privateuse1 name>``), or
    ``None`` for the CPU.  ``notes`` say what could not be set up (e.g. a device activity this
    build lacks), so a run folder explains a trace without device events.
    """

    kind: str
    torch_device: str
    name: str
    index: int | None = None
    activities: tuple[Any, ...] = ()
    backend: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def is_accelerator(self) -> bool:
        return self.kind != "cpu"

    def synchronize(self) -> None:
        """Wait until the device has finished all queued work (no-op on the CPU).

        Prefers ``torch.accelerator.synchronize`` (torch >= 2.6) when this device is the current
        accelerator; otherwise the backend module's ``synchronize`` (``torch.cuda.synchronize``,
        ``torch.neuron.synchronize``, …).
        """
        if not self.is_accelerator:
            return
        import torch

        device_type = self.torch_device.split(":", 1)[0]
        acc = getattr(torch, "accelerator", None)
        if acc is not None and hasattr(acc, "synchronize"):
            try:
                current = acc.current_accelerator()
            except QUERY_ERRORS:  # older or partial implementations: fall back to the module
                current = None
            if current is not None and current.type == device_type:
                acc.synchronize(torch.device(self.torch_device))
                return
        module = getattr(torch, self.backend or device_type, None)
        sync = getattr(module, "synchronize", None)
        if sync is None:
            raise DeviceError(
                f"cannot synchronize {self.torch_device}: "
                f"torch.{self.backend or device_type} has no synchronize()"
            )
        try:
            # The name, not torch.device(...): backend modules take strings, and a device type
            # torch does not know yet (a backend registered late) cannot become a torch.device.
            sync(self.torch_device)
        except TypeError:  # some backends' synchronize() takes no device argument
            sync()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "torch_device": self.torch_device,
            "name": self.name,
            "index": self.index,
            "activities": [_activity_name(a) for a in self.activities],
            "backend": self.backend,
            "notes": list(self.notes),
        }


def resolve_device(name: str | None = None) -> DeviceSpec:
    """The device to profile: ``name`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"xpu"``,
    ``"mtia"``, ``"neuron"``, the PrivateUse1 name, ``"privateuse1"``) or, when ``None``, the
    first accelerator found (CUDA/ROCm, XPU, MTIA, PrivateUse1), else the CPU.

    Raises :class:`DeviceError` for an unknown name, a device that is not available, or an
    index beyond the device count.
    """
    import torch

    if name is None:
        return _auto(torch)
    if not isinstance(name, str) or not name.strip():
        raise DeviceError(f"device must be a name such as 'cpu' or 'cuda:0', got {name!r}")
    text = name.strip().lower()
    dtype, _, index_text = text.partition(":")
    index: int | None = None
    if index_text:
        if not index_text.isdigit():
            raise DeviceError(f"device {name!r}: the index after ':' must be a number")
        index = int(index_text)
    pu1 = privateuse1_backend_name()
    if dtype == "cpu":
        if index not in (None, 0):
            raise DeviceError(f"device {name!r}: the CPU has no index {index}")
        return _cpu_spec(torch)
    if dtype in ("cuda", "rocm"):
        _require(torch, "cuda", name)
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        if dtype == "rocm" and kind != "rocm":
            raise DeviceError(f"device {name!r} is not available: this torch is not a ROCm build")
        return _accelerator_spec(torch, kind, "cuda", index)
    if dtype in ("xpu", "mtia"):
        _require(torch, dtype, name)
        return _accelerator_spec(torch, dtype, dtype, index)
    if pu1 is not None and dtype in (pu1, "privateuse1", UNREGISTERED_PRIVATEUSE1):
        _require(torch, pu1, name)
        return _accelerator_spec(torch, _privateuse1_kind(pu1), pu1, index)
    if dtype in ("neuron", "privateuse1", UNREGISTERED_PRIVATEUSE1):
        if dtype == "neuron":
            why = (
                "no PrivateUse1 backend named 'neuron' is registered (import torch_neuronx first?)"
            )
        else:
            why = "no PrivateUse1 backend is registered"
        raise DeviceError(f"device {name!r} is not available: {why}")
    known = "cpu, cuda, xpu, mtia" + (f", {pu1}" if pu1 else "")
    raise DeviceError(f"unknown device {name!r}: expected one of {known} (optionally ':<index>')")


def privateuse1_backend_name() -> str | None:
    """The registered PrivateUse1 backend's name (``"neuron"``, …), or None if none is."""
    import torch

    try:
        got = torch._C._get_privateuse1_backend_name()
    except AttributeError:  # very old torch: no PrivateUse1 renaming
        return None
    if not isinstance(got, str) or not got or got == UNREGISTERED_PRIVATEUSE1:
        return None
    return got


def _privateuse1_kind(backend: str) -> str:
    return "neuron" if backend == "neuron" else "privateuse1"


def _is_available(torch: Any, module_name: str) -> tuple[bool, str]:
    """(available, why not) for ``torch.<module_name>``."""
    module = getattr(torch, module_name, None)
    if module is None:
        return False, f"torch has no module torch.{module_name}"
    check = getattr(module, "is_available", None)
    if check is None:
        return False, f"torch.{module_name} has no is_available()"
    try:
        ok = bool(check())
    except QUERY_ERRORS as exc:
        return False, _failed(f"torch.{module_name}.is_available()", exc)
    return ok, f"torch.{module_name}.is_available() is False"


def _require(torch: Any, module_name: str, name: str) -> None:
    ok, why = _is_available(torch, module_name)
    if not ok:
        raise DeviceError(f"device {name!r} is not available: {why}")


def _auto(torch: Any) -> DeviceSpec:
    if _is_available(torch, "cuda")[0]:
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        return _accelerator_spec(torch, kind, "cuda", None)
    for module_name in ("xpu", "mtia"):
        if _is_available(torch, module_name)[0]:
            return _accelerator_spec(torch, module_name, module_name, None)
    pu1 = privateuse1_backend_name()
    if pu1 is not None and _is_available(torch, pu1)[0]:
        return _accelerator_spec(torch, _privateuse1_kind(pu1), pu1, None)
    return _cpu_spec(torch)


def _accelerator_spec(torch: Any, kind: str, backend: str, index: int | None) -> DeviceSpec:
    module = getattr(torch, backend)
    notes: list[str] = []
    count = _call_int(module, "device_count", notes)
    if count is None and hasattr(module, "device_count"):
        notes.append(f"the index {backend}:{index or 0} was not checked against a device count")
    if index is None:
        current = _call_int(module, "current_device", notes)
        if current is None and hasattr(module, "current_device"):
            notes.append(f"the current device is not known: {backend}:0 is profiled")
        index = current or 0
    if count is not None and index >= count:
        raise DeviceError(
            f"device '{backend}:{index}' is not available: "
            f"torch.{backend}.device_count() is {count}"
        )
    activities, activity_notes = _activities(torch, kind)
    name = _device_name(module, kind, index, notes)
    return DeviceSpec(
        kind=kind,
        torch_device=f"{backend}:{index}",
        name=name,
        index=index,
        activities=activities,
        backend=backend,
        notes=(*activity_notes, *notes),
    )


def _cpu_spec(torch: Any) -> DeviceSpec:
    activities, notes = _activities(torch, "cpu")
    return DeviceSpec(
        kind="cpu",
        torch_device="cpu",
        name=f"CPU ({cpu_model()})",
        index=None,
        activities=activities,
        backend=None,
        notes=notes,
    )


def _activities(torch: Any, kind: str) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """CPU plus the device's activity, each only if this build supports it."""
    activity = torch.profiler.ProfilerActivity
    notes: list[str] = []
    try:
        supported = set(torch.profiler.supported_activities())
    except QUERY_ERRORS as exc:  # a broken Kineto build: the CPU activity always works
        supported = {activity.CPU}
        notes.append(_failed("torch.profiler.supported_activities()", exc))
    chosen = [activity.CPU]
    wanted = _DEVICE_ACTIVITY.get(kind)
    if wanted is not None:
        member = getattr(activity, wanted, None)
        if member is not None and member in supported:
            chosen.append(member)
        else:
            notes.append(
                f"torch.profiler does not support ProfilerActivity.{wanted} in this build: "
                "the trace will have no device events"
            )
    return tuple(chosen), tuple(notes)


def _call_int(module: Any, attr: str, notes: list[str]) -> int | None:
    """``module.attr()`` as an int; None when there is no such function or it fails (then
    ``notes`` says why)."""
    fn = getattr(module, attr, None)
    if fn is None:
        return None
    try:
        return int(fn())
    except QUERY_ERRORS as exc:
        notes.append(_failed(f"{getattr(module, '__name__', 'torch')}.{attr}()", exc))
        return None


def _device_name(module: Any, kind: str, index: int, notes: list[str]) -> str:
    """The device's name from ``get_device_name``, else ``get_device_properties``, else its
    kind; a query that fails is said in ``notes``."""
    where = getattr(module, "__name__", "torch")
    for attr in ("get_device_name", "get_device_properties"):
        fn = getattr(module, attr, None)
        if fn is None:
            continue
        try:
            got = fn(index)
        except QUERY_ERRORS as exc:
            notes.append(_failed(f"{where}.{attr}({index})", exc))
            continue
        if attr == "get_device_properties":
            got = getattr(got, "name", None)
        if isinstance(got, str) and got:
            return str(got)
    return {"neuron": "AWS Neuron", "privateuse1": "PrivateUse1 device"}.get(kind, kind.upper())


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _activity_name(activity: Any) -> str:
    return str(getattr(activity, "name", activity))
