"""`opscope sql` over an event store (the rank<N>.parquet files `opscope report --cluster
--store` writes): events, ops and kernels of every rank, in the sandbox; told from a Neuron
Explorer folder by the files' columns, not their names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from opscope.analysis.cluster import write_events
from opscope.analysis.rank_split import rank_traces
from opscope.cli.main import main
from opscope.trace import load
from opscope.trace.formats import detect
from trace_checks import mm_step_doc


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def job(tmp_path: Path) -> Path:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank, ops in ((0, 3), (1, 5)):
        (folder / f"rank{rank}.json").write_text(json.dumps(mm_step_doc(rank, ops)))
    return folder


def _store(job: Path, out: Path, *, job_ids: bool) -> dict[int, int]:
    """A store as the cluster writes it (``job_ids``: each rank's block of the job's table,
    ids the job's) or from each rank's trace loaded on its own (ids from 0 in every file);
    the events of each rank."""
    if job_ids:
        traces = rank_traces(load(job, cache=False))
    else:
        traces = [load(p, cache=False) for p in sorted(job.glob("rank*.json"))]
    counts: dict[int, int] = {}
    for t in traces:
        rank = int(t.meta.ranks[0])
        write_events(t.events, out, rank)
        counts[rank] = t.events.num_rows
    return counts


def _sql(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["sql", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("job_ids", [True, False])
def test_sql_over_a_store_counts_every_rank(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], job_ids: bool
) -> None:
    store = tmp_path / "job-events"  # any name: the files say what it is
    counts = _store(job, store, job_ids=job_ids)
    assert sorted(counts) == [0, 1] and counts[0] != counts[1]
    assert detect(store).name == "event_store"
    rows = _sql(capsys, str(store), "SELECT rank, count(*) AS n FROM events GROUP BY 1 ORDER BY 1")
    assert {r["rank"]: r["n"] for r in rows} == counts
    # ids unique over the job, links kept: each kernel's op is an aten::mm of its own rank
    rows = _sql(
        capsys,
        str(store),
        "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM events",
    )
    assert rows == [{"n": sum(counts.values()), "ids": sum(counts.values())}]
    rows = _sql(
        capsys,
        str(store),
        "SELECT k.rank, count(*) AS n, count(DISTINCT e.rank) AS op_ranks FROM kernels k "
        "JOIN events e ON e.id = k.op_id AND e.name = 'aten::mm' AND e.rank = k.rank "
        "GROUP BY 1 ORDER BY 1",
    )
    assert rows == [{"rank": 0, "n": 3, "op_ranks": 1}, {"rank": 1, "n": 5, "op_ranks": 1}]
    rows = _sql(capsys, str(store), "SELECT rank, count(*) AS n FROM ops GROUP BY 1 ORDER BY 1")
    assert [r["n"] for r in rows] == [4, 6]  # the step and the rank's ops


def test_schema_of_a_store(job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    counts = _store(job, store, job_ids=True)
    tables = _sql(capsys, str(store), "--schema")
    assert [t["name"] for t in tables] == ["events", "ops", "kernels"]
    assert tables[0]["rows"] == sum(counts.values())
    rows = _sql(capsys, str(store / "rank1.parquet"), "SELECT DISTINCT rank FROM events")
    assert rows == [{"rank": 1}]


def test_the_sandbox_holds_over_a_store(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    _store(job, store, job_ids=True)
    query = f"SELECT count(*) FROM read_parquet('{store / 'rank0.parquet'}')"
    assert main(["sql", str(store), query]) == 1
    assert "no file or network access" in capsys.readouterr().err
    assert main(["sql", str(store), "CREATE TABLE x AS SELECT 1"]) == 1
    assert "the tables are read-only" in capsys.readouterr().err


def test_parquet_of_other_columns_is_not_a_store(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    pq.write_table(pa.table({"rank": [0], "x": [1.0]}), other / "rank0.parquet")
    assert detect(other).name != "event_store"
    assert detect(other / "rank0.parquet").name != "event_store"
    mixed = tmp_path / "mixed"
    _store(job, mixed, job_ids=True)
    pq.write_table(pa.table({"rank": [0], "x": [1.0]}), mixed / "rank2.parquet")
    assert main(["sql", str(mixed), "SELECT 1"]) == 1
    err = capsys.readouterr().err
    assert "rank2.parquet is not an event table" in err and len(err.splitlines()) == 1
