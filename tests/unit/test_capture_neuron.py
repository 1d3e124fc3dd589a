"""Neuron wiring: NeuronConfig into experimental_config, NeuronProfiler.export_trace chained.

No Neuron hardware or ``torch_neuronx`` here, so two stand-ins record what opscope does:

- a stand-in ``torch_neuronx`` package (``torch_neuronx.profiling`` with ``NeuronConfig``,
  ``ProfileMode``, ``NeuronProfiler``) injected into ``sys.modules``; its ``NeuronConfig``
  keeps the keywords it was given and its ``NeuronProfiler.export_trace`` records its calls and,
  like the real one, saves the Kineto trace into the Neuron output folder;
- a stand-in ``torch.profiler.profile`` that records its keyword arguments, calls
  ``on_trace_ready`` where torch would, and refuses a second export ("Trace is already saved.")
  as torch does.
"""

from __future__ import annotations

import enum
import gzip
import json
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from torch.profiler import ProfilerActivity

from opscope.capture.devices import DeviceSpec
from opscope.capture.neuron import setup_neuron_capture
from opscope.capture.runfolder import read_run_json
from opscope.capture.session import profile
from opscope.errors import OpscopeError


class ProfileMode(enum.Enum):
    DEVICE = "device"
    RUNTIME = "runtime"
    CPU_UTIL = "cpu_util"


class NeuronConfigWithCorrelate:
    def __init__(
        self,
        modes: Any = None,
        profile_output_dir: str = "./output",
        max_events_per_nc: int | None = None,
        capture_enabled_for_nc: str | None = None,
        correlate_device_time: bool = False,
    ) -> None:
        self.kwargs = {
            "modes": modes,
            "profile_output_dir": profile_output_dir,
            "max_events_per_nc": max_events_per_nc,
            "capture_enabled_for_nc": capture_enabled_for_nc,
            "correlate_device_time": correlate_device_time,
        }


class NeuronConfigWithout:
    """An older NeuronConfig that does not know correlate_device_time."""

    def __init__(
        self, modes: Any = None, profile_output_dir: str = "./output", max_events_per_nc: int = 0
    ) -> None:
        self.kwargs = {
            "modes": modes,
            "profile_output_dir": profile_output_dir,
            "max_events_per_nc": max_events_per_nc,
        }


class NeuronConfigKwargs:
    """A NeuronConfig taking **kwargs whose checks reject correlate_device_time."""

    def __init__(self, **kwargs: Any) -> None:
        if "correlate_device_time" in kwargs:
            raise TypeError("unexpected keyword argument 'correlate_device_time'")
        self.kwargs = kwargs


class NeuronConfigOpenKwargs:
    """A NeuronConfig taking **kwargs that does accept correlate_device_time."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


def install_torch_neuronx(
    monkeypatch: pytest.MonkeyPatch, config_cls: type, *, exporter_saves: bool = True
) -> list[tuple[Any, Any]]:
    """Inject the stand-in torch_neuronx; returns the export_trace calls (config, prof)."""
    calls: list[tuple[Any, Any]] = []

    class NeuronProfiler:
        def __init__(self, config: Any) -> None:
            self.config = config

        def export_trace(self, prof: Any) -> None:
            calls.append((self.config, prof))
            if exporter_saves:  # like the real one: the Kineto trace beside the runtime files
                out = Path(self.config.kwargs["profile_output_dir"])
                prof.export_chrome_trace(str(out / "pytorch_trace.json"))

    package = types.ModuleType("torch_neuronx")
    package.__version__ = "0.0-stand-in"  # type: ignore[attr-defined]
    profiling = types.ModuleType("torch_neuronx.profiling")
    profiling.NeuronConfig = config_cls  # type: ignore[attr-defined]
    profiling.ProfileMode = ProfileMode  # type: ignore[attr-defined]
    profiling.NeuronProfiler = NeuronProfiler  # type: ignore[attr-defined]
    package.profiling = profiling  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_neuronx", package)
    monkeypatch.setitem(sys.modules, "torch_neuronx.profiling", profiling)
    return calls


class FakeProfile:
    """Stand-in torch.profiler.profile: records kwargs, follows the schedule, saves once."""

    instances: ClassVar[list[FakeProfile]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.step_num = 0
        self.saved = False
        self.exports: list[str] = []
        self.metadata: dict[str, str] = {}
        FakeProfile.instances.append(self)

    def __enter__(self) -> FakeProfile:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def add_metadata(self, key: str, value: str) -> None:
        self.metadata[key] = value

    def step(self) -> None:
        before = self.kwargs["schedule"](self.step_num)
        self.step_num += 1
        if before == torch.profiler.ProfilerAction.RECORD_AND_SAVE:
            self.saved = False  # a new window may be saved once
            self.kwargs["on_trace_ready"](self)

    def export_chrome_trace(self, path: str) -> None:
        if self.saved:
            raise RuntimeError("Trace is already saved.")
        self.saved = True
        self.exports.append(path)
        doc = json.dumps({"traceEvents": [], "stand_in": True}).encode()
        if path.endswith(".gz"):
            with gzip.open(path, "wb") as fh:
                fh.write(doc)
        else:
            Path(path).write_bytes(doc)


@pytest.fixture
def fake_neuron_device(monkeypatch: pytest.MonkeyPatch) -> tuple[DeviceSpec, list[Any]]:
    syncs: list[Any] = []
    module = types.SimpleNamespace(synchronize=lambda device=None: syncs.append(device))
    monkeypatch.setattr(torch, "neuron", module, raising=False)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: None)
    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    FakeProfile.instances.clear()
    spec = DeviceSpec(
        kind="neuron",
        torch_device="neuron:0",
        name="stand-in NeuronCore",
        index=0,
        activities=(ProfilerActivity.CPU, ProfilerActivity.PrivateUse1),
        backend="neuron",
    )
    return spec, syncs


def test_session_wires_neuron_config_and_exporter(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_neuron_device: tuple[DeviceSpec, list[Any]],
) -> None:
    spec, syncs = fake_neuron_device
    exports = install_torch_neuronx(monkeypatch, NeuronConfigWithCorrelate)
    with profile(
        device=spec,
        out=tmp_path,
        label="trn",
        neuron_config={"max_events_per_nc": 5000, "capture_enabled_for_nc": "0,1"},
    ) as p:
        for _ in range(p.steps):
            p.step()

    (prof,) = FakeProfile.instances
    kwargs = prof.kwargs
    assert kwargs["activities"] == [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    cfg = kwargs["experimental_config"]
    assert isinstance(cfg, NeuronConfigWithCorrelate)
    assert cfg.kwargs == {
        "modes": [ProfileMode.DEVICE, ProfileMode.RUNTIME],
        "profile_output_dir": str(p.run_dir / "neuron"),
        "max_events_per_nc": 5000,
        "capture_enabled_for_nc": "0,1",
        "correlate_device_time": True,
    }
    # NeuronProfiler(cfg).export_trace ran once, for the one window, with this profiler
    assert len(exports) == 1
    assert exports[0][0] is cfg and exports[0][1] is prof
    # torch allows one save per window: the Neuron exporter took it, opscope copied it
    assert prof.exports == [str(p.run_dir / "neuron" / "pytorch_trace.json")]
    with gzip.open(p.run_dir / "trace.json.gz") as fh:
        assert json.load(fh)["stand_in"] is True
    assert prof.metadata == {"device_kind": "neuron"}
    assert syncs == ["neuron:0"] * (p.steps + 1)  # every step, and once at exit

    run = read_run_json(p.run_dir)
    assert run["status"] == "ok"
    assert run["traces"] == ["trace.json.gz"]
    assert run["device"]["activities"] == ["CPU", "PrivateUse1"]
    neuron = run["neuron"]
    assert neuron["available"] is True
    assert neuron["correlate_device_time"] is True
    assert neuron["output_dir"] == "neuron"
    assert neuron["on_trace_ready"] == "NeuronProfiler.export_trace"
    assert neuron["config"]["modes"] == ["DEVICE", "RUNTIME"]
    assert neuron["config"]["max_events_per_nc"] == 5000
    assert neuron["version"] == "0.0-stand-in"


def test_exporter_that_does_not_save_leaves_the_export_to_opscope(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_neuron_device: tuple[DeviceSpec, list[Any]],
) -> None:
    spec, _ = fake_neuron_device
    exports = install_torch_neuronx(monkeypatch, NeuronConfigWithCorrelate, exporter_saves=False)
    with profile(device=spec, out=tmp_path, wait=0, warmup=1, active=1, repeat=2) as p:
        for _ in range(p.steps):
            p.step()
    (prof,) = FakeProfile.instances
    assert len(exports) == 2
    assert [Path(e).name for e in prof.exports] == [
        ".partial-trace.json.gz",
        ".partial-trace.cycle2.json.gz",
    ]
    assert sorted(f.name for f in p.run_dir.glob("trace*")) == [
        "trace.cycle2.json.gz",
        "trace.json.gz",
    ]
    assert not list(p.run_dir.glob(".partial-*"))


def test_correlate_only_where_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_torch_neuronx(monkeypatch, NeuronConfigWithout)
    cap = setup_neuron_capture(tmp_path, {"modes": ["device", "cpu_util"]})
    assert cap.active
    assert cap.config.kwargs["modes"] == [ProfileMode.DEVICE, ProfileMode.CPU_UTIL]
    assert "correlate_device_time" not in cap.config.kwargs
    assert cap.info["correlate_device_time"] is None

    install_torch_neuronx(monkeypatch, NeuronConfigKwargs)
    cap = setup_neuron_capture(tmp_path, {"max_events_per_nc": 7})
    assert cap.config.kwargs == {
        "modes": [ProfileMode.DEVICE, ProfileMode.RUNTIME],
        "profile_output_dir": str(tmp_path / "neuron"),
        "max_events_per_nc": 7,
    }
    assert cap.info["correlate_device_time"] is None

    install_torch_neuronx(monkeypatch, NeuronConfigOpenKwargs)  # signature cannot tell: try it
    cap = setup_neuron_capture(tmp_path, None)
    assert cap.config.kwargs["correlate_device_time"] is True
    assert cap.info["correlate_device_time"] is True


def test_rejected_user_options_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_torch_neuronx(monkeypatch, NeuronConfigWithout)
    with pytest.raises(OpscopeError, match="neuron_config: NeuronConfig rejected the options"):
        setup_neuron_capture(tmp_path, {"no_such_option": 1})
    with pytest.raises(OpscopeError, match="unknown ProfileMode 'bogus'"):
        setup_neuron_capture(tmp_path, {"modes": ["bogus"]})


def test_without_torch_neuronx_the_run_says_so(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fake_neuron_device: tuple[DeviceSpec, list[Any]],
) -> None:
    spec, _ = fake_neuron_device
    monkeypatch.setitem(sys.modules, "torch_neuronx", None)  # import fails
    with profile(device=spec, out=tmp_path, wait=0, warmup=1) as p:
        for _ in range(p.steps):
            p.step()
    (prof,) = FakeProfile.instances
    assert "experimental_config" not in prof.kwargs
    run = read_run_json(p.run_dir)
    assert run["neuron"]["available"] is False
    assert "torch_neuronx.profiling is not importable" in run["neuron"]["reason"]
    assert any("only the framework (Kineto) trace" in w for w in run["warnings"])
    assert run["traces"] == ["trace.json.gz"]


def test_neuron_config_on_another_device_is_ignored_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    FakeProfile.instances.clear()
    with profile(device="cpu", out=tmp_path, wait=0, warmup=1, neuron_config={"x": 1}) as p:
        for _ in range(p.steps):
            p.step()
    assert "experimental_config" not in FakeProfile.instances[0].kwargs
    run = read_run_json(p.run_dir)
    assert run["neuron"] is None
    assert any("neuron_config ignored" in w for w in run["warnings"])
