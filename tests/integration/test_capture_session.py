"""Real profiling sessions on the CPU: run folder, trace, run.json, schedule and error paths."""

from __future__ import annotations

import gzip
import json
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.profiler import ProfilerActivity

import opscope
import opscope.capture.session as session_mod
import opscope.trace
from opscope.capture import CompileRecord, DeviceSpec, read_run_json
from opscope.capture.session import SYNC_ANNOTATION, profile
from opscope.errors import DeviceError, ScheduleError
from schema_checks import check_document


def work() -> torch.Tensor:
    a = torch.randn(32, 32)
    return (a @ a).relu().sum()


def run_steps(p: Any, n: int | None = None) -> None:
    for _ in range(p.steps if n is None else n):
        work()
        p.step()


def test_run_folder_trace_and_run_json(tmp_path: Path) -> None:
    with opscope.profile(
        device="cpu", wait=1, warmup=1, active=2, out=tmp_path, label="unit", run_info={"k": 7}
    ) as p:
        assert p.steps == 4
        run_steps(p)

    run_dir = p.run_dir
    assert run_dir.parent == tmp_path and run_dir.name.endswith("-unit")
    assert p.trace_path == run_dir / "trace.json.gz"
    assert sorted(f.name for f in run_dir.iterdir()) == ["run.json", "trace.json.gz"]
    with gzip.open(p.trace_path) as fh:  # a gzip Kineto trace, as torch wrote it
        doc = json.load(fh)
    assert doc["traceEvents"]
    assert doc["device_kind"] == "cpu"

    trace = opscope.trace.load(run_dir)
    steps = trace.sql("SELECT name FROM events WHERE name LIKE 'ProfilerStep#%' ORDER BY 1")
    assert steps.column("name").to_pylist() == ["ProfilerStep#2", "ProfilerStep#3"]
    names = set(trace.column("name"))
    assert "aten::mm" in names
    assert trace.device.kind == "cpu"

    run = read_run_json(run_dir)
    assert run["schema"] == "opscope.run/1"
    check_document(run, "run")
    assert run["status"] == "ok" and run["error"] is None
    assert run["label"] == "unit"
    assert isinstance(run["command"], list) and run["command"]
    assert run["created"][:4].isdigit() and "T" in run["created"]
    assert run["device"]["kind"] == "cpu" and run["device"]["activities"] == ["CPU"]
    assert run["torch"]["version"] == torch.__version__
    assert run["python"] and run["hostname"]
    assert run["schedule"] == {
        "wait": 1,
        "warmup": 1,
        "active": 2,
        "repeat": 1,
        "skip_first": 0,
        "steps_needed": 4,
    }
    assert run["steps"]["run"] == 4 and run["steps"]["active"] == [2, 3]
    assert run["traces"] == ["trace.json.gz"]
    assert run["profiler"]["record_shapes"] is True
    assert run["compile"] == [] and run["neuron"] is None
    assert run["run_info"] == {"k": 7}
    assert run["warnings"] == []


def test_exports_once_per_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    original = torch.profiler.profile.export_chrome_trace

    def counting(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", counting)
    with profile(device="cpu", wait=0, warmup=1, active=1, repeat=2, out=tmp_path) as p:
        run_steps(p)
        prof = p.profiler
    assert len(calls) == 2
    assert [f.name for f in p.trace_paths] == ["trace.json.gz", "trace.cycle2.json.gz"]
    for path in p.trace_paths:
        assert len(opscope.trace.load(path)) > 0
    # torch permits one save per window; the session took it, a user export now fails
    with pytest.raises(RuntimeError, match="already saved"):
        prof.export_chrome_trace(str(tmp_path / "again.json"))


def test_body_exception_is_reraised_and_recorded(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), profile(device="cpu", out=tmp_path) as p:
        run_steps(p, 1)
        _ = 1 / 0
    run = read_run_json(p.run_dir)
    assert run["status"] == "error"
    assert run["error"].startswith("ZeroDivisionError: division by zero")
    assert run["steps"]["run"] == 1
    assert p.status == "error"


def test_active_window_never_reached(tmp_path: Path) -> None:
    with (
        pytest.raises(ScheduleError, match=r"starts at step 3 and needs 4 steps .* ran 2"),
        profile(device="cpu", wait=2, warmup=1, active=1, out=tmp_path) as p,
    ):
        run_steps(p, 2)
    run = read_run_json(p.run_dir)
    assert run["status"] == "schedule_error"
    assert "the program ran 2" in run["error"]
    assert run["traces"] == []
    assert p.trace_path is None


def test_incomplete_repeat_warns(tmp_path: Path) -> None:
    with (
        pytest.warns(RuntimeWarning, match="1 of 2 active windows"),
        profile(device="cpu", wait=0, warmup=1, active=1, repeat=2, out=tmp_path) as p,
    ):
        run_steps(p, 2)
    run = read_run_json(p.run_dir)
    assert run["status"] == "ok"
    assert run["traces"] == ["trace.json.gz"]
    assert any("1 of 2 active windows" in w for w in run["warnings"])


def test_record_compile_lands_in_run_json(tmp_path: Path) -> None:
    rec = CompileRecord(label="warm-up", wall_s=1.5, frames_compiled=1, compile_ids=["0/0"])
    with profile(device="cpu", wait=0, warmup=1, out=tmp_path) as p:
        p.record_compile(rec)
        run_steps(p)
    assert read_run_json(p.run_dir)["compile"][0]["compile_ids"] == ["0/0"]
    p.record_compile({"label": "late", "wall_s": 0.1})  # after exit: run.json is rewritten
    assert [c["label"] for c in read_run_json(p.run_dir)["compile"]] == ["warm-up", "late"]


def test_compile_inside_recorded_steps_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stand-in for Dynamo's frame counter: one frame compiles during step 2 (recorded).
    frames = iter([0, 0, 0, 1, 1])
    monkeypatch.setattr(session_mod, "frames_compiled_so_far", lambda: next(frames))
    with (
        pytest.warns(RuntimeWarning, match=r"compiled during recorded step\(s\) \[2\]"),
        profile(device="cpu", wait=1, warmup=1, active=2, out=tmp_path) as p,
    ):
        run_steps(p)
    assert read_run_json(p.run_dir)["compiled_in_window"] == [2]


def test_an_unreadable_frame_counter_is_said_not_read_as_nothing_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Dynamo's counter cannot be read at step 2's end: the window's compilation is unknown
    # there (said once), and a later step that compiles against a readable mark is flagged.
    frames = iter([0, 0, None, 1, 2])
    monkeypatch.setattr(session_mod, "frames_compiled_so_far", lambda: next(frames))
    with (
        pytest.warns(RuntimeWarning, match=r"compiled during recorded step\(s\) \[3\]"),
        profile(device="cpu", wait=1, warmup=1, active=2, out=tmp_path) as p,
    ):
        run_steps(p)
    doc = read_run_json(p.run_dir)
    assert doc["compiled_in_window"] == [3]
    assert doc["warnings"].count(session_mod.UNREADABLE_FRAMES) == 1


def test_sync_runs_inside_each_step_under_its_annotation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in accelerator whose backend module records synchronize() calls; the profiler
    # is real (CPU activity), so the annotation must show up in the trace.
    syncs: list[Any] = []
    monkeypatch.setattr(
        torch, "standin", types.SimpleNamespace(synchronize=syncs.append), raising=False
    )
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: None)
    spec = DeviceSpec(
        kind="privateuse1",
        torch_device="standin:0",
        name="stand-in",
        index=0,
        activities=(ProfilerActivity.CPU,),
        backend="standin",
    )
    with profile(device=spec, wait=1, warmup=1, active=2, out=tmp_path) as p:
        run_steps(p)
    assert syncs == ["standin:0"] * 5  # 4 steps + once at exit
    trace = opscope.trace.load(p.run_dir)
    rows = trace.sql(
        f"SELECT step FROM events WHERE name = '{SYNC_ANNOTATION}' ORDER BY step"
    ).column("step")
    assert rows.to_pylist() == [2, 3]  # one per recorded step, inside that step
    assert read_run_json(p.run_dir)["profiler"]["sync_annotation"] == SYNC_ANNOTATION


def test_no_sync_when_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs: list[Any] = []
    spec = DeviceSpec(kind="privateuse1", torch_device="standin:0", name="s", backend="standin")
    monkeypatch.setattr(
        torch, "standin", types.SimpleNamespace(synchronize=syncs.append), raising=False
    )
    with profile(device=spec, wait=0, warmup=1, sync=False, out=tmp_path) as p:
        run_steps(p)
    assert syncs == []
    assert read_run_json(p.run_dir)["profiler"]["sync"] is False


def test_misuse(tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        profile(device="tpu", out=tmp_path)
    with pytest.raises(ScheduleError, match="active must be >= 1"):
        profile(active=0, out=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing created for a session that never started
    p = profile(device="cpu", wait=0, warmup=1, out=tmp_path)
    with pytest.raises(RuntimeError, match="has not started"):
        _ = p.run_dir
    with pytest.raises(RuntimeError, match="outside"):
        p.step()
    with p:
        run_steps(p)
    with pytest.raises(RuntimeError, match="one `with` block"), p:
        pass
