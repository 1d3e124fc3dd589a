"""A folder of run folders is not one trace: the API and the CLI name the run folders found
and read none of them; trace files of several run folders are not stacked as ranks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from opscope import analyze
from opscope.cli.main import main
from opscope.errors import OpscopeError
from opscope.trace import load
from opscope.trace.formats import detect


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _doc(rank: int | None = None) -> dict[str, Any]:
    """One step with an op and its kernel; every run is recorded at the same times, so their
    windows overlap (the time-window check alone would take them as ranks)."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10,
         "dur": 50, "args": {"External id": 5}},
    ]  # fmt: skip
    doc: dict[str, Any] = {"traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
    return doc


def _gz(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


def _run(root: Path, name: str, *, ranks: int = 0, neuron: bool = False) -> Path:
    """A run folder as ``opscope profile`` writes it: run.json and trace.json.gz, or
    traces/rank<N>.json.gz for ``ranks`` ranks; ``neuron``: a neuron/ folder with a table."""
    run = root / name
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"schema": "opscope.run/1", "label": name}))
    if ranks:
        for r in range(ranks):
            _gz(run / "traces" / f"rank{r}.json.gz", _doc(r))
    else:
        _gz(run / "trace.json.gz", _doc())
    if neuron:
        (run / "neuron" / "prof").mkdir(parents=True)
        (run / "neuron" / "prof" / "SystemProfileEvents.parquet").write_bytes(b"")
    return run


def _runs(tmp_path: Path, **kw: Any) -> Path:
    root = tmp_path / "runs"
    _run(root, "20260101-100000-a", **kw)
    _run(root, "20260101-100500-b", **kw)
    return root


MESSAGE = r"holds 2 run folders, not one trace: 20260101-100000-a, 20260101-100500-b"


@pytest.mark.parametrize("kw", [{}, {"ranks": 2}, {"neuron": True}])
def test_analyze_of_a_folder_of_runs_names_them(tmp_path: Path, kw: dict[str, Any]) -> None:
    root = _runs(tmp_path, **kw)
    with pytest.raises(OpscopeError, match=MESSAGE):
        analyze(root, findings=False, roofline=False)
    with pytest.raises(OpscopeError, match=MESSAGE):
        load(root, cache=False)
    # the Neuron formats would find the runs' neuron/ tables below it: not theirs to claim
    assert detect(root).name == "kineto"


def test_one_run_folder_inside_is_named_too(tmp_path: Path) -> None:
    run = _run(tmp_path / "out", "20260101-100000-a")
    with pytest.raises(
        OpscopeError, match=rf"holds a run folder.*report one \(opscope report {run}\)"
    ):
        load(tmp_path / "out", cache=False)


def test_report_of_a_folder_of_runs_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _runs(tmp_path)
    assert main(["report", str(root)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "20260101-100000-a, 20260101-100500-b" in err
    assert f"opscope report {root / '20260101-100000-a'}" in err


@pytest.mark.parametrize("form", ["list", "glob"])
def test_files_of_several_runs_are_not_ranks(tmp_path: Path, form: str) -> None:
    root = _runs(tmp_path, ranks=2)
    runs = sorted(root.iterdir())
    source: Any = runs if form == "list" else str(root / "*" / "traces" / "*.json.gz")
    with pytest.raises(OpscopeError, match=r"files of 2 run folders, not ranks of one job"):
        analyze(source, findings=False, roofline=False)


def test_a_run_folder_of_ranks_is_still_one_job(tmp_path: Path) -> None:
    run = _run(tmp_path, "20260101-100000-a", ranks=2)
    files = sorted((run / "traces").iterdir())
    for source in (run, files):
        ranks = analyze(source, findings=False, roofline=False).to_dict()["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1]
