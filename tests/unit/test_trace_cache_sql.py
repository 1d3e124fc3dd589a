"""The ingest cache, Trace.sql, and the ``opscope sql`` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from opscope.errors import OpscopeError
from opscope.trace import cache as trace_cache
from opscope.trace import load
from opscope.trace.schema import EVENT_SCHEMA


def _trace(n: int = 50) -> dict[str, Any]:
    evs: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#0",
            "pid": 1,
            "tid": 1,
            "ts": 0,
            "dur": 100 * n + 100,
        },
    ]
    for i in range(n):
        t0 = 100 * i + 10
        evs += [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm" if i % 2 else "aten::add",
                "pid": 1,
                "tid": 1,
                "ts": t0,
                "dur": 50,
                "args": {"External id": i},
            },
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t0 + 5,
                "dur": 5,
                "args": {"correlation": 1000 + i},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "gemm" if i % 2 else "add_kernel",
                "pid": 0,
                "tid": 7,
                "ts": t0 + 20,
                "dur": 7.25,
                "args": {"correlation": 1000 + i},
            },
        ]
    return {"traceEvents": evs, "deviceProperties": [{"id": 0, "name": "G"}]}


@pytest.fixture()
def trace_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_trace()))
    return p


def _entries(tmp_path: Path) -> list[Path]:
    d = tmp_path / "cache" / "traces"
    return sorted(d.iterdir()) if d.is_dir() else []


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPSCOPE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert trace_cache.cache_dir() == tmp_path / "xdg" / "opscope" / "traces"
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "o"))
    assert trace_cache.cache_dir() == tmp_path / "o" / "traces"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("OPSCOPE_CACHE_DIR")
    assert trace_cache.cache_dir() == Path.home() / ".cache" / "opscope" / "traces"


def test_cache_round_trip(trace_file: Path, tmp_path: Path) -> None:
    first = load(trace_file)
    assert not first.meta.cached
    names = [p.suffix for p in _entries(tmp_path)]
    assert names == [".arrow", ".json"]
    again = load(trace_file)
    assert again.meta.cached
    assert again.events.equals(first.events)
    assert again.events.schema.equals(EVENT_SCHEMA, check_metadata=True)
    assert again.meta.device_properties == first.meta.device_properties
    assert again.meta.paths == [str(trace_file)]


def test_no_cache_neither_reads_nor_writes(trace_file: Path, tmp_path: Path) -> None:
    load(trace_file, cache=False)
    assert _entries(tmp_path) == []
    load(trace_file)
    t = load(trace_file, cache=False)
    assert not t.meta.cached


def test_changed_file_is_a_new_entry(trace_file: Path, tmp_path: Path) -> None:
    a = load(trace_file)
    doc = _trace(3)
    trace_file.write_text(json.dumps(doc))
    b = load(trace_file)
    assert not b.meta.cached and len(b) != len(a)
    assert len(_entries(tmp_path)) == 4


@pytest.mark.parametrize(
    "damage",
    [
        "truncate_table",
        "garbage_table",
        "garbage_meta",
        "wrong_rows",
        "wrong_size",
        "wrong_schema",
        "missing_table",
    ],
)
def test_corrupt_entries_are_rebuilt(trace_file: Path, tmp_path: Path, damage: str) -> None:
    first = load(trace_file)
    table = next(p for p in _entries(tmp_path) if p.suffix == ".arrow")
    meta = table.with_suffix(".json")
    record = json.loads(meta.read_text())
    if damage == "truncate_table":
        table.write_bytes(table.read_bytes()[: table.stat().st_size // 2])
        record["bytes"] = table.stat().st_size  # so that only the file itself tells
    elif damage == "garbage_table":
        table.write_bytes(b"ARROW1\x00\x00" + os.urandom(record["bytes"] - 8))
    elif damage == "garbage_meta":
        meta.write_text("{not json")
    elif damage == "wrong_rows":
        record["rows"] += 1
    elif damage == "wrong_size":
        table.write_bytes(table.read_bytes() + b"\x00" * 8)
    elif damage == "wrong_schema":
        other = pa.table({"id": pa.array(range(first.events.num_rows))})
        with pa.OSFile(str(table), "wb") as sink, pa.ipc.new_file(sink, other.schema) as w:
            w.write_table(other)
        record["bytes"] = table.stat().st_size
    else:
        table.unlink()
    if damage != "garbage_meta":
        meta.write_text(json.dumps(record))
    again = load(trace_file)
    assert not again.meta.cached  # rebuilt, never trusted
    assert again.events.equals(first.events)
    third = load(trace_file)
    assert third.meta.cached  # and the rebuilt entry is good


def test_least_recently_used_entries_go_beyond_the_limit(
    trace_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "cache" / "traces"
    files = []
    for n in (20, 21, 22, 23):
        p = tmp_path / f"t{n}.json"
        p.write_text(json.dumps(_trace(n)))
        files.append(p)
    a, b, c, new = files
    for f in (a, b, c):
        load(f)
    keys = {f: trace_cache.content_key(f) for f in files}
    size = {f: (d / f"{keys[f]}.arrow").stat().st_size for f in (a, b, c)}
    t0 = time.time() - 100
    for i, f in enumerate((b, a, c)):  # used in this order: b least recently
        os.utime(d / f"{keys[f]}.json", (t0 + i, t0 + i))
    assert trace_cache.evict(size[a] + size[c]) == 1
    assert not (d / f"{keys[b]}.arrow").exists() and not (d / f"{keys[b]}.json").exists()
    assert load(a).meta.cached and load(c).meta.cached  # and now recently used
    # a write keeps the cache under $OPSCOPE_CACHE_MAX_BYTES, the entry just written aside;
    # tables of releases before the Arrow cache go too
    (d / "old.parquet").write_bytes(b"PAR1")
    monkeypatch.setenv("OPSCOPE_CACHE_MAX_BYTES", "1")
    load(new)
    assert sorted(p.name for p in d.iterdir()) == sorted(
        [f"{keys[new]}.arrow", f"{keys[new]}.json"]
    )
    assert load(new).meta.cached


def test_unwritable_cache_is_skipped(
    trace_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(blocker))
    assert len(load(trace_file)) == 151


def test_sql_over_events_ops_kernels(trace_file: Path) -> None:
    t = load(trace_file)
    out = t.sql(
        "SELECT name, count(*) AS n, sum(dur_ns) AS ns FROM kernels GROUP BY name ORDER BY name"
    )
    assert isinstance(out, pa.Table)
    assert out.to_pylist() == [
        {"name": "add_kernel", "n": 25, "ns": 25 * 7250},
        {"name": "gemm", "n": 25, "ns": 25 * 7250},
    ]
    by_op = t.sql("SELECT op_name, count(*) AS n FROM kernels GROUP BY 1 ORDER BY 1").to_pylist()
    assert by_op == [{"op_name": "aten::add", "n": 25}, {"op_name": "aten::mm", "n": 25}]
    ops = t.sql(
        "SELECT name, sum(device_self_ns) AS d FROM ops WHERE kind = 'op' GROUP BY 1 ORDER BY 1"
    ).to_pylist()
    assert ops == [{"name": "aten::add", "d": 25 * 7250}, {"name": "aten::mm", "d": 25 * 7250}]
    assert t.ops is t.ops and t.kernels is t.kernels  # computed once
    joined = t.sql("SELECT count(*) AS n FROM events e JOIN kernels k ON e.id = k.op_id")
    assert joined.column(0).to_pylist() == [50]
    with pytest.raises(OpscopeError, match="SQL"):
        t.sql("SELECT nope FROM events")


def test_sql_df_needs_pandas(trace_file: Path) -> None:
    t = load(trace_file)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(OpscopeError, match="pandas"):
            t.sql_df("SELECT 1")
    else:
        assert t.sql_df("SELECT count(*) AS n FROM events")["n"][0] == 151


def test_cli_sql_formats(trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from opscope.cli.main import main

    q = "SELECT name, count(*) AS n FROM kernels GROUP BY name ORDER BY name"
    assert main(["sql", str(trace_file), q, "--format", "csv"]) == 0
    assert capsys.readouterr().out == "name,n\nadd_kernel,25\ngemm,25\n"
    assert main(["sql", str(trace_file), q, "--format", "json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"name": "add_kernel", "n": 25},
        {"name": "gemm", "n": 25},
    ]
    assert main(["sql", str(trace_file), "SELECT id FROM events ORDER BY id", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 rows shown; more rows exist" in out and "│ 2" in out and "│ 3 " not in out
    assert main(["sql", str(trace_file), "SELECT id FROM events WHERE id < 4", "--limit", "9"]) == 0
    assert "4 rows\n" in capsys.readouterr().out  # all there: no "more rows"
    assert main(["sql", str(trace_file), "SELECT bad syntax here"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("opscope sql: error: SQL:") and err.count("\n") == 1


def test_cli_bad_usage_exits_2(trace_file: Path) -> None:
    from opscope.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["sql", str(trace_file), "SELECT 1", "--format", "xml"])
    assert e.value.code == 2


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_sql_command_never_imports_torch(trace_file: Path, tmp_path: Path) -> None:
    env = dict(os.environ, OPSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    code = (
        "import sys\n"
        "from opscope.cli.main import main\n"
        f"rc = main(['sql', {str(trace_file)!r}, 'SELECT count(*) FROM events', "
        "'--format', 'csv'])\n"
        "assert rc == 0, rc\n"
        # the renderer registry's declared table gives --format its choices; no renderer loads
        "bad = [m for m in sys.modules if m.split('.')[0] == 'torch' or (m.startswith(("
        "'opscope.render.', 'opscope.report', 'opscope.explorer', 'opscope.mcp')) "
        "and m != 'opscope.render.registry')]\n"
        "print('IMPORTED', bad)\n"
    )
    r = _run(["-c", code], env)
    assert r.returncode == 0, r.stderr
    assert "IMPORTED []" in r.stdout
    r = _run(["-c", "import opscope.trace, sys; print('torch' in sys.modules)"], env)
    assert r.stdout.strip() == "False"


def test_help_imports_no_heavy_library(tmp_path: Path) -> None:
    """``opscope --help`` imports none of torch, DuckDB, Arrow or NumPy (its time is printed,
    never asserted: these machines are noisy)."""
    env = dict(os.environ)
    r = _run(["-m", "opscope", "--help"], env)  # warms the disk cache
    assert r.returncode == 0 and "report" in r.stdout
    best = min(_timed(lambda: _run(["-m", "opscope", "--help"], env)) for _ in range(3))
    r = _run(["-X", "importtime", "-m", "opscope", "--help"], env)
    assert r.returncode == 0
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if "|" in line}
    assert not {"torch", "duckdb", "pyarrow", "numpy"} & imported
    print(f"opscope --help: best of 3 {best:.3f} s")  # a figure, never asserted (noisy machines)


#: run in a fresh interpreter: the modules loaded when the report first opens its trace
_AT_OPEN = r"""
import json, sys
target = sys.argv[1]
seen = {}
def hook(event, args):
    if event == "open" and not seen and str(args[0]) == target:
        seen["mods"] = sorted(sys.modules)
sys.addaudithook(hook)
from opscope.cli.main import main
rc = main(["report", target, "--format", "json", "-o", sys.argv[2]])
print("AT_OPEN " + json.dumps({"rc": rc, "end": sorted(sys.modules), **seen}))
"""


def test_report_reads_its_trace_before_the_analysis_is_imported(
    trace_file: Path, tmp_path: Path
) -> None:
    """A text/JSON report pays only for what it uses: by the first open of its trace it has
    loaded the trace's reading and nothing of the analysis, the renderers, the capture, the
    explorer, MCP, the SQL sandbox, the graph captures' merge, Dask, DuckDB or torch (those
    come after, when used)."""
    env = dict(os.environ, OPSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    r = _run(["-c", _AT_OPEN, str(trace_file), str(tmp_path / "r.json")], env)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("AT_OPEN "))
    got = json.loads(line[len("AT_OPEN ") :])
    assert got["rc"] == 0 and "mods" in got, got
    mods = set(got["mods"])
    assert "opscope.trace.kineto.file" in mods or "opscope.trace.formats.kineto" in mods
    heavy = ("torch", "duckdb", "dask", "distributed", "mcp", "playwright", "pandas")
    early = sorted(
        m
        for m in mods
        if m.split(".")[0] in heavy
        or (
            m.startswith(
                (
                    "opscope.analysis",
                    "opscope.capture",
                    "opscope.explorer",
                    "opscope.mcp",
                    "opscope.report",
                    "opscope.render.",
                    "concurrent.futures.process",
                    "opscope.trace.sqlsafe",
                    "opscope.trace.graphs",
                )
            )
            and m != "opscope.render.registry"
        )
    )
    assert early == [], early
    # the report itself was made: the analysis came after the open
    assert json.loads((tmp_path / "r.json").read_text())
    # and one process's report of a file never loads a job's path (joined across ranks), a
    # process pool's modules, zipfile (importlib.resources' way to a data file) or the raw
    # Neuron captures' checks (a folder's)
    unused = (
        "opscope.analysis.critical.job",
        "opscope.analysis.critical.job_solve",
        "opscope.analysis.critical.job_savings",
        "multiprocessing",
        "concurrent.futures.process",
        "zipfile",
        "opscope.trace.neuron.capture",
    )
    assert sorted(set(got["end"]) & set(unused)) == []
    assert "opscope.analysis.pipeline" in got["end"]


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0
