"""Device choice: auto-detection order, explicit names, activities, synchronize, errors.

CUDA, ROCm and PrivateUse1 (``neuron``) hosts are simulated on this CPU-only torch with
stand-ins: ``torch.cuda.*`` functions, ``torch._C._get_privateuse1_backend_name`` and
``torch.profiler.supported_activities`` are monkeypatched, and a stand-in backend module is set
as ``torch.neuron``.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity

from opscope.capture.devices import DeviceSpec, privateuse1_backend_name, resolve_device
from opscope.errors import DeviceError


@pytest.fixture(autouse=True)
def _no_accelerator_api(monkeypatch: pytest.MonkeyPatch) -> None:
    # Keep torch.accelerator out of the way unless a test opts in: on this CPU build it reports
    # no accelerator, but a test host with one must not change these results.
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a, **k: None)


def _activities(monkeypatch: pytest.MonkeyPatch, *acts: ProfilerActivity) -> None:
    monkeypatch.setattr(torch.profiler, "supported_activities", lambda: set(acts))


def fake_cuda(
    monkeypatch: pytest.MonkeyPatch, *, count: int = 2, hip: str | None = None
) -> list[Any]:
    """Make torch.cuda look available with ``count`` GPUs; returns the synchronize calls."""
    calls: list[Any] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: f"Stand-in GPU {i}")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    monkeypatch.setattr(torch.version, "hip", hip)
    _activities(monkeypatch, ProfilerActivity.CPU, ProfilerActivity.CUDA)
    return calls


def fake_privateuse1(
    monkeypatch: pytest.MonkeyPatch, name: str = "neuron", *, available: bool = True
) -> list[Any]:
    """Register a stand-in PrivateUse1 backend ``torch.<name>``; returns its synchronize calls."""
    calls: list[Any] = []
    module = SimpleNamespace(
        is_available=lambda: available,
        device_count=lambda: 2,
        current_device=lambda: 0,
        get_device_name=lambda i=0: f"Stand-in {name} core {i}",
        synchronize=lambda device=None: calls.append(device),
    )
    monkeypatch.setattr(torch._C, "_get_privateuse1_backend_name", lambda: name)
    monkeypatch.setattr(torch, name, module, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _activities(monkeypatch, ProfilerActivity.CPU, ProfilerActivity.PrivateUse1)
    return calls


def test_cpu_when_nothing_else() -> None:
    spec = resolve_device()
    assert spec.kind == "cpu"
    assert spec.torch_device == "cpu"
    assert spec.activities == (ProfilerActivity.CPU,)
    assert spec.name.startswith("CPU (") and len(spec.name) > len("CPU ()")
    spec.synchronize()  # a no-op, must not raise
    assert json.loads(json.dumps(spec.to_dict()))["activities"] == ["CPU"]


def test_explicit_cpu_overrides_an_available_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch)
    assert resolve_device().kind == "cuda"
    assert resolve_device("cpu").kind == "cpu"
    assert resolve_device("CPU").kind == "cpu"


def test_cuda_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_cuda(monkeypatch)
    spec = resolve_device()
    assert (spec.kind, spec.torch_device, spec.index) == ("cuda", "cuda:0", 0)
    assert spec.name == "Stand-in GPU 0"
    assert spec.activities == (ProfilerActivity.CPU, ProfilerActivity.CUDA)
    assert spec.notes == ()
    spec.synchronize()
    assert calls == ["cuda:0"]


def test_cuda_index_and_out_of_range(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch, count=2)
    spec = resolve_device("cuda:1")
    assert (spec.torch_device, spec.index, spec.name) == ("cuda:1", 1, "Stand-in GPU 1")
    with pytest.raises(DeviceError, match=r"'cuda:2' is not available: .*device_count\(\) is 2"):
        resolve_device("cuda:2")


def test_rocm_build_reports_rocm(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch, hip="6.2.0")
    spec = resolve_device()
    assert spec.kind == "rocm"
    assert spec.torch_device == "cuda:0"  # ROCm keeps torch's cuda device type
    assert ProfilerActivity.CUDA in spec.activities
    assert resolve_device("cuda").kind == "rocm"


def test_device_activity_only_when_supported(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch)
    _activities(monkeypatch, ProfilerActivity.CPU)  # a build without CUPTI
    spec = resolve_device("cuda")
    assert spec.activities == (ProfilerActivity.CPU,)
    assert any("ProfilerActivity.CUDA" in n for n in spec.notes)


def test_neuron_privateuse1_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_privateuse1(monkeypatch, "neuron")
    assert privateuse1_backend_name() == "neuron"
    spec = resolve_device()
    assert (spec.kind, spec.torch_device, spec.backend) == ("neuron", "neuron:0", "neuron")
    assert spec.activities == (ProfilerActivity.CPU, ProfilerActivity.PrivateUse1)
    assert ProfilerActivity.CUDA not in spec.activities
    assert spec.name == "Stand-in neuron core 0"
    spec.synchronize()
    spec.synchronize()
    assert calls == ["neuron:0", "neuron:0"]
    assert resolve_device("neuron:1").torch_device == "neuron:1"
    assert resolve_device("privateuse1").kind == "neuron"


def test_other_privateuse1_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_privateuse1(monkeypatch, "acme")
    spec = resolve_device("acme")
    assert (spec.kind, spec.torch_device) == ("privateuse1", "acme:0")
    spec.synchronize()
    assert calls == ["acme:0"]


def test_synchronize_without_device_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_privateuse1(monkeypatch, "neuron")
    calls: list[str] = []
    monkeypatch.setattr(getattr(torch, "neuron"), "synchronize", lambda: calls.append("sync"))  # noqa: B009
    resolve_device("neuron").synchronize()
    assert calls == ["sync"]


def test_synchronize_prefers_torch_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    module_calls = fake_cuda(monkeypatch)
    acc_calls: list[Any] = []
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "synchronize", lambda d=None: acc_calls.append(d))
    resolve_device("cuda").synchronize()
    assert acc_calls == [torch.device("cuda:0")]
    assert module_calls == []


def test_unregistered_privateuse1_is_not_a_device() -> None:
    # The default name means "no backend registered": never auto-picked, never explicit.
    assert torch._C._get_privateuse1_backend_name() == "privateuseone"
    assert privateuse1_backend_name() is None
    with pytest.raises(DeviceError, match="no PrivateUse1 backend named 'neuron'"):
        resolve_device("neuron")
    with pytest.raises(DeviceError, match="no PrivateUse1 backend is registered"):
        resolve_device("privateuse1")


def test_registered_but_unavailable_backend_falls_back_to_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_privateuse1(monkeypatch, "neuron", available=False)
    assert resolve_device().kind == "cpu"
    with pytest.raises(DeviceError, match=r"torch.neuron.is_available\(\) is False"):
        resolve_device("neuron")


def test_cuda_preferred_over_privateuse1(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_privateuse1(monkeypatch, "neuron")
    fake_cuda(monkeypatch)
    assert resolve_device().kind == "cuda"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("cuda", "device 'cuda' is not available: torch.cuda.is_available() is False"),
        ("tpu", "unknown device 'tpu': expected one of cpu, cuda, xpu, mtia"),
        ("cuda:x", "device 'cuda:x': the index after ':' must be a number"),
        ("cpu:1", "device 'cpu:1': the CPU has no index 1"),
        ("", "device must be a name such as 'cpu' or 'cuda:0', got ''"),
    ],
)
def test_errors_are_one_line(monkeypatch: pytest.MonkeyPatch, name: str, message: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError) as info:
        resolve_device(name)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_spec_is_frozen() -> None:
    spec = resolve_device("cpu")
    with pytest.raises(AttributeError):
        spec.kind = "cuda"  # type: ignore[misc]
    assert isinstance(spec, DeviceSpec)


def _raise(exc: BaseException) -> Any:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise exc

    return fail


def test_a_failing_device_query_is_said_in_the_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    # the name query fails: the properties' name is used and the note says why
    fake_cuda(monkeypatch)
    monkeypatch.setattr(torch.cuda, "get_device_name", _raise(RuntimeError("driver gone")))
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i=0: SimpleNamespace(name="From props")
    )
    spec = resolve_device("cuda:1")
    assert spec.name == "From props"
    assert any("get_device_name(1) raised RuntimeError: driver gone" in n for n in spec.notes)
    # the device count fails: the index goes unchecked, and the notes say so
    monkeypatch.setattr(torch.cuda, "device_count", _raise(RuntimeError("no count")))
    spec = resolve_device("cuda:5")
    assert spec.torch_device == "cuda:5"
    assert any("device_count() raised RuntimeError: no count" in n for n in spec.notes)
    assert any("was not checked against a device count" in n for n in spec.notes)
    assert spec.to_dict()["notes"] == list(spec.notes)


def test_a_healthy_device_has_no_query_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch)
    assert resolve_device("cuda").notes == ()


def test_a_failing_activity_query_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch)
    monkeypatch.setattr(torch.profiler, "supported_activities", _raise(RuntimeError("kineto")))
    spec = resolve_device("cuda")
    assert spec.activities == (ProfilerActivity.CPU,)
    assert any("supported_activities() raised RuntimeError: kineto" in n for n in spec.notes)


def test_an_unexpected_error_in_a_query_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    # a bug in a backend (not what a device query raises) is not taken for a missing name
    fake_cuda(monkeypatch)
    monkeypatch.setattr(torch.cuda, "get_device_name", _raise(ZeroDivisionError("bug")))
    with pytest.raises(ZeroDivisionError):
        resolve_device("cuda")
