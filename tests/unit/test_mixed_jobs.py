"""Files of different jobs are refused, never merged into one absurd job: by their
distributedInfo (world size, backend and version, a process group's size, a rank twice) and,
for ranks their traces name, by time windows far apart.  One short error, exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.pipeline import analyze
from opscope.cli.main import main
from opscope.trace.jobs import MixedJobsError, job_groups
from trace_checks import X

SHARED = Path(__file__).resolve().parents[2].parent / "shared/traces"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _doc(rank: int, world: int, shift_us: float = 0.0, **info: Any) -> dict[str, Any]:
    events = [
        X("ProfilerStep#1", shift_us, 400, "user_annotation"),
        X("aten::mm", shift_us + 10, 100, args={}),
    ]
    return {
        "schemaVersion": 1,
        "traceEvents": events,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world, **info},
    }


def _folder(tmp_path: Path, docs: list[dict[str, Any]]) -> Path:
    job = tmp_path / "job"
    job.mkdir()
    for i, doc in enumerate(docs):
        (job / f"trace{i}.json").write_text(json.dumps(doc))
    return job


def test_two_world_sizes_are_two_jobs(tmp_path: Path) -> None:
    job = _folder(tmp_path, [_doc(0, 2), _doc(1, 4)])
    with pytest.raises(MixedJobsError, match=r"^2 files from 2 different jobs: trace0.json"):
        analyze(job, findings=False, roofline=False)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            {"pg_config": [{"pg_name": "0", "pg_size": 2}]},
            {"pg_config": [{"pg_name": "0", "pg_size": 4}]},
        ),
        ({"nccl_version": "2.17.1"}, {"nccl_version": "2.22.3"}),
    ],
)
def test_process_groups_or_library_versions_that_disagree(
    tmp_path: Path, a: dict[str, Any], b: dict[str, Any]
) -> None:
    job = _folder(tmp_path, [_doc(0, 2, **a), _doc(1, 2, **b)])
    with pytest.raises(MixedJobsError, match="2 different jobs"):
        analyze(job, findings=False, roofline=False)


def test_a_rank_twice_is_two_runs(tmp_path: Path) -> None:
    assert job_groups(
        [{"distributed_info": {"rank": r, "world_size": 2}} for r in (0, 1, 0, 1)]
    ) == [
        [0, 1],
        [2, 3],
    ]
    job = _folder(tmp_path, [_doc(0, 2), _doc(1, 2), _doc(0, 2), _doc(1, 2)])
    with pytest.raises(MixedJobsError, match="4 files from 2 different jobs"):
        analyze(job, findings=False, roofline=False)


def test_named_ranks_a_minute_apart_are_different_runs(tmp_path: Path) -> None:
    job = _folder(tmp_path, [_doc(0, 2), _doc(1, 2, shift_us=60e6)])
    with pytest.raises(MixedJobsError, match=r"60\.0 s apart"):
        analyze(job, findings=False, roofline=False)


def test_ranks_of_one_job_are_still_one_job(tmp_path: Path) -> None:
    pg = {"pg_config": [{"pg_name": "0", "pg_size": 2}], "nccl_version": "2.17.1"}
    job = _folder(tmp_path, [_doc(0, 2, **pg), _doc(1, 2, shift_us=30.0, **pg)])
    assert analyze(job, findings=False, roofline=False).to_dict()["ranks"]


def _shared_three(tmp_path: Path) -> Path:
    picks = [
        SHARED / "cuda/a100_nccl_rank0_of2.json.gz",
        SHARED / "cuda/a100_cudagraph_rank0_of16.json.gz",
        SHARED / "rocm/mi300x_resnet_act_checkpoint_rank0_of8.json.gz",
    ]
    if not all(p.is_file() for p in picks):
        pytest.skip("../shared/traces not present (a user's clone)")
    folder = tmp_path / "three"
    folder.mkdir()
    for p in picks:
        (folder / p.name).symlink_to(p)
    return folder


@pytest.mark.parametrize("form", ["folder", "glob"])
def test_real_traces_of_three_jobs_are_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    folder = _shared_three(tmp_path)
    source = str(folder) if form == "folder" else str(folder / "*.json.gz")
    assert main(["report", source]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "3 files from 3 different jobs" in err
    for world in ("world size 2", "world size 16", "world size 8"):
        assert world in err
