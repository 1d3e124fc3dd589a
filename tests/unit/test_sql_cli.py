"""`opscope sql` on the command line: --schema, usage errors, DuckDB's hints kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opscope.cli.main import main


@pytest.fixture()
def trace(tmp_path: Path) -> Path:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 2}
        for i in range(5)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_schema_lists_every_table_and_its_columns(
    trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sql", str(trace), "--schema", "--no-cache"]) == 0
    out = capsys.readouterr().out
    for table in ("events (5 rows)", "ops (", "kernels ("):
        assert table in out
    assert "  dur_ns" in out and "int64" in out and "dictionary" not in out
    assert main(["sql", str(trace), "--schema", "--format", "json", "--no-cache"]) == 0
    tables = json.loads(capsys.readouterr().out)
    assert [t["name"] for t in tables] == ["events", "ops", "kernels"]
    assert {"name": "name", "type": "string"} in tables[0]["columns"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([], "no query"),
        (["  "], "no query"),
        (["SELECT 1", "--schema"], "not both"),
        (["SELECT 1; SELECT 2"], "2 statements"),
        ([";"], "empty"),
    ],
)
def test_usage_errors_exit_2(
    trace: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    assert main(["sql", str(trace), *args, "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("query", "hint"),
    [
        ("SELECT nme FROM events", 'Candidate bindings: "name"'),
        ("SELECT * FROM kernel", 'Did you mean "kernels"?'),
        ("SELECT * FROM evnts", 'Did you mean "events"?'),
    ],
)
def test_duckdb_hints_are_kept_on_the_line(
    trace: Path, capsys: pytest.CaptureFixture[str], query: str, hint: str
) -> None:
    assert main(["sql", str(trace), query, "--no-cache"]) == 1
    err = capsys.readouterr().err
    assert hint in err and err.count("\n") == 1


def test_integer_sums_stay_integers(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q = "SELECT sum(dur_ns) AS total, count(*) AS n FROM events"
    assert main(["sql", str(trace), q, "--format", "json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"total": 10_000, "n": 5}]


def test_the_query_may_follow_the_options(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sql", str(trace), "--format", "json", "--no-cache", "select count(*) n from events"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 5}]
    with pytest.raises(SystemExit) as exc:  # two queries: still refused, naming the extra one
        main([*args, "select 2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments:" in err and "select 2" in err


def test_a_glob_of_rank_files_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for rank in range(2):
        events = [
            {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": i, "dur": 1}
            for i in range(3 + rank)
        ]
        doc = {"traceEvents": events, "distributedInfo": {"rank": rank, "world_size": 2}}
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(doc))
    pattern = str(tmp_path / "rank*.json")
    query = "select rank, count(*) n from events group by 1 order by 1"
    assert main(["sql", pattern, query, "--format", "json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"rank": 0, "n": 3}, {"rank": 1, "n": 4}]
    assert main(["sql", str(tmp_path / "none*.json"), "select 1", "--no-cache"]) == 1
    assert "no trace files match this pattern" in capsys.readouterr().err


def test_a_closed_pipe_ends_quietly(trace: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from opscope.cli.main import main; "
        f"sys.exit(main(['sql', {str(trace)!r}, 'select * from range(200000)', "
        "'--format', 'csv', '--no-cache']))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err
