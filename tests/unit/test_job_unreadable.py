"""A job's rank file that cannot be read is left out and named; the job's report goes on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import opscope
from distjobs import write_nccl_job
from opscope.documents import Report
from opscope.errors import TraceError
from schema_checks import undeclared


def _corrupt(path: Path, data: bytes = b"garbage, not JSON") -> None:
    path.write_bytes(data)


def test_a_bad_rank_is_left_out_and_named(tmp_path: Path) -> None:
    paths = write_nccl_job(tmp_path, 4)
    _corrupt(paths[2])
    doc = opscope.analyze(tmp_path).to_dict()
    assert doc["source"]["ranks"] == [0, 1, 3]
    assert str(paths[2]) not in doc["source"]["paths"]
    (entry,) = doc["source"]["unreadable"]
    assert entry["path"] == str(paths[2]) and entry["rank"] == 2
    assert "not JSON" in entry["reason"]
    warning = [w for w in doc["source"]["warnings"] if "left out" in w]
    assert len(warning) == 1 and "rank 2" in warning[0] and "not JSON" in warning[0]
    assert doc["distributed"]["missing_ranks"] == [2]
    assert doc["distributed"]["world_size"] == 4
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 3]
    assert not undeclared(doc, Report)


def test_the_good_ranks_give_the_same_report_as_without_the_bad_file(tmp_path: Path) -> None:
    """What the readable ranks say does not change because a file beside them is bad."""
    job = tmp_path / "job"
    paths = write_nccl_job(job, 3)
    alone = tmp_path / "alone"
    alone.mkdir()
    for p in (paths[0], paths[2]):
        (alone / p.name).write_bytes(p.read_bytes())
    _corrupt(paths[1], b"")
    with_bad = opscope.analyze(job).to_dict()
    without = opscope.analyze(alone).to_dict()
    for key in ("ops", "kernels", "summary", "steps", "findings"):
        assert with_bad[key] == without[key], key
    assert with_bad["distributed"]["instances"] == without["distributed"]["instances"]


def test_rank_from_the_world_size_when_the_name_does_not_say(tmp_path: Path) -> None:
    paths = write_nccl_job(tmp_path, 3)
    odd = tmp_path / "broken.json"
    paths[1].rename(odd)
    _corrupt(odd)
    doc = opscope.analyze(tmp_path).to_dict()
    (entry,) = doc["source"]["unreadable"]
    assert entry["rank"] is None
    assert doc["distributed"]["missing_ranks"] == [1]  # from distributedInfo's world size


def test_every_file_bad_is_one_clear_error(tmp_path: Path) -> None:
    for p in write_nccl_job(tmp_path, 3):
        _corrupt(p)
    with pytest.raises(TraceError, match="none of its 3 trace files can be read") as exc:
        opscope.analyze(tmp_path)
    assert "\n" not in str(exc.value)


def test_one_bad_file_alone_is_still_an_error(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    _corrupt(path)
    with pytest.raises(TraceError, match="not JSON"):
        opscope.analyze(path)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opscope", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_reports_the_job_and_warns_on_stderr(tmp_path: Path) -> None:
    paths = write_nccl_job(tmp_path, 3)
    _corrupt(paths[0])
    done = _cli("report", str(tmp_path), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["source"]["ranks"] == [1, 2]
    assert doc["distributed"]["missing_ranks"] == [0]
    lines = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(lines) == 1
    assert lines[0].startswith("opscope report: warning: rank 0 left out")
    assert str(paths[0]) in lines[0]


def test_cli_every_file_bad_exits_1_with_one_line(tmp_path: Path) -> None:
    for p in write_nccl_job(tmp_path, 2):
        _corrupt(p)
    done = _cli("report", str(tmp_path))
    assert done.returncode == 1
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1 and "none of its 2 trace files" in err
