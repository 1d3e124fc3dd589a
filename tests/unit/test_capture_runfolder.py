"""Run folders: unique names, atomic JSON, run.json reading; capture never imports torch early."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from opscope.capture.runfolder import (
    RUN_SCHEMA,
    new_run_dir,
    read_run_json,
    safe_label,
    trace_name,
    write_json,
)
from opscope.errors import OpscopeError


def test_new_run_dir_name_and_uniqueness(tmp_path: Path) -> None:
    dirs = [new_run_dir(tmp_path / "runs", "my model") for _ in range(3)]
    assert len({d.name for d in dirs}) == 3  # same second, three folders
    assert all(d.is_dir() and d.parent == tmp_path / "runs" for d in dirs)
    assert re.fullmatch(r"\d{8}-\d{6}-my-model", dirs[0].name)
    same_second = [d for d in dirs if d.name.startswith(dirs[0].name)]
    if len(same_second) == 3:
        assert [d.name[len(dirs[0].name) :] for d in same_second] == ["", "-2", "-3"]


@pytest.mark.parametrize(
    ("label", "expected"),
    [(None, "run"), ("", "run"), ("a/b c", "a-b-c"), ("../x", "x"), ("ok_1.2", "ok_1.2")],
)
def test_safe_label(label: str | None, expected: str) -> None:
    assert safe_label(label) == expected


def test_trace_names() -> None:
    assert [trace_name(i) for i in (1, 2, 3)] == [
        "trace.json.gz",
        "trace.cycle2.json.gz",
        "trace.cycle3.json.gz",
    ]


def test_write_json_atomic_and_readable(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    write_json(target, {"schema": RUN_SCHEMA, "path": tmp_path, "n": 1})
    write_json(target, {"schema": RUN_SCHEMA, "n": 2})
    assert read_run_json(tmp_path) == {"schema": RUN_SCHEMA, "n": 2}
    assert read_run_json(target)["n"] == 2
    assert os.listdir(tmp_path) == ["run.json"]  # no temp files left behind


def test_write_json_failure_leaves_old_file(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    write_json(target, {"schema": RUN_SCHEMA, "n": 1})

    class Boom:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_json(target, {"bad": Boom()})
    assert json.loads(target.read_text())["n"] == 1
    assert os.listdir(tmp_path) == ["run.json"]


def test_read_run_json_errors(tmp_path: Path) -> None:
    with pytest.raises(OpscopeError, match="no such file"):
        read_run_json(tmp_path)
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(OpscopeError, match=r"cannot read run\.json"):
        read_run_json(tmp_path)
    (tmp_path / "run.json").write_text('{"schema": "other/1"}')
    with pytest.raises(OpscopeError, match=r"not an opscope run\.json"):
        read_run_json(tmp_path)


def test_importing_capture_does_not_import_torch() -> None:
    code = (
        "import sys, opscope.capture, opscope.capture.devices, opscope.capture.schedule, "
        "opscope.capture.compile_metrics, opscope.capture.neuron, opscope.capture.runfolder; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(not hasattr(os, "fchmod"), reason="POSIX file modes")
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_write_json_is_as_readable_as_the_umask_says(tmp_path: Path, umask: int, mode: int) -> None:
    """run.json beside a trace is readable as the trace is (mkstemp alone makes it 0600)."""
    old = os.umask(umask)
    try:
        path = write_json(tmp_path / "run.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode
