"""The SQL sandbox (opscope.trace.sqlsafe): untrusted queries can neither reach files, the
network, the configuration nor Python objects; one read-only statement at a time; a time limit;
a row cap with offsets; JSON-safe rows.

The two layers are tested apart: the statement checks through ``Trace.query``, and the locked
connection with the checks bypassed (``sqlsafe.execute`` on ``sqlsafe.connect``)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from opscope.errors import OpscopeError
from opscope.service import ServiceError, Workspace
from opscope.trace import Trace, TraceMeta, load, sqlrows, sqlsafe
from trace_checks import KINETO_LIKE

SLOW = "SELECT sum(a.range * b.range) FROM range(100000000) a, range(100000000) b"
ALLOWED_NOTE = "allowed: SELECT"


@pytest.fixture
def trace_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    p = tmp_path / "t.json"
    p.write_text(json.dumps(KINETO_LIKE))
    return p


@pytest.fixture
def trace(trace_file: Path) -> Trace:
    return load(trace_file)


@pytest.fixture(scope="module")
def big() -> Trace:
    """100k generated events (only ``events`` is queried: ops and kernels need real ones)."""
    n = 100_000
    return Trace(pa.table({"id": pa.array(range(n), pa.int64())}), TraceMeta())


def _sandbox() -> duckdb.DuckDBPyConnection:
    con = sqlsafe.connect(sandboxed=True)
    con.register("events", pa.table({"id": [1, 2, 3]}))
    return con


# -- layer 1: the statement checks ----------------------------------------------------------

REFUSED_BY_CHECKS = [
    ("SELECT * FROM read_csv('/etc/passwd')", "read_csv() refused: opscope's SQL has no file"),
    ("SELECT * FROM read_csv_auto('/etc/passwd')", "read_csv_auto() refused"),
    ("SELECT * FROM read_text('/etc/passwd')", "read_text() refused"),
    ("SELECT * FROM read_blob('/etc/passwd')", "read_blob() refused"),
    ("SELECT * FROM read_json_auto('/etc/x.json')", "read_json_auto() refused"),
    ("SELECT * FROM read_parquet('http://example.com/x.parquet')", "read_parquet() refused"),
    ("SELECT * FROM parquet_metadata('x.parquet')", "parquet_metadata() refused"),
    ("SELECT * FROM glob('/etc/*')", "glob() refused"),
    ("SELECT * FROM sniff_csv('/etc/passwd')", "sniff_csv() refused"),
    ("SELECT * FROM duckdb_secrets()", "duckdb_secrets() refused"),
    ("SELECT * FROM which_secret('s3://b/k', 's3')", "which_secret() refused"),
    ("SELECT * FROM \"READ_TEXT\"('/etc/passwd')", "read_text() refused"),  # quoted, upper case
    ("SELECT * FROM system.main.read_text('/etc/passwd')", "read_text() refused"),
    ("SELECT (SELECT count(*) FROM read_text('/etc/passwd'))", "read_text() refused"),
    ("WITH x AS (FROM glob('*')) SELECT * FROM x", "glob() refused"),
    ("SELECT * FROM '/etc/passwd'", "FROM '/etc/passwd' refused"),  # replacement scan
    ('WITH "a.b" AS (SELECT 1) FROM "c.csv"', "FROM 'c.csv' refused"),
    ("SUMMARIZE SELECT * FROM read_text('/etc/passwd')", "read_text() refused"),
    ("DESCRIBE FROM read_text('/etc/passwd')", "read_text() refused"),
    ("SHOW SELECT * FROM read_text('/etc/passwd')", "read_text() refused"),
    ("SELECT * FROM events, LATERAL read_text(name)", "read_text() refused"),
    ("PIVOT read_text('/etc/passwd') ON filename IN ('a') USING count(*)", "read_text() refused"),
    ('SELECT * FROM "data.csv"', "FROM 'data.csv' refused"),
    ("SELECT * FROM query('SELECT 1')", "query() refused: it runs SQL"),
    ("FROM query_table('events')", "query_table() refused"),
    ("FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))", "refused: it runs SQL"),
    ("FROM destroy_external_resource('read_text', '/etc/passwd')", "refused: it runs SQL"),
    ("FROM arrow_scan(1, 2, 3)", "arrow_scan() refused"),
    ("FROM pandas_scan(1)", "pandas_scan() refused"),
    ("FROM enable_profiling(save_location := '/tmp/p.json')", "refused: the configuration"),
    ("FROM enable_logging(storage := 'file')", "enable_logging() refused"),
    ("FROM checkpoint()", "checkpoint() refused"),
    ("COPY events TO '/tmp/x.csv'", "COPY refused: opscope's SQL has no file or network access"),
    ("COPY (SELECT 1) TO '/tmp/x.csv'", "--format csv or json and a redirect"),
    ("COPY events FROM '/etc/passwd'", "COPY refused"),
    ("EXPORT DATABASE '/tmp/x'", "EXPORT refused"),
    ("IMPORT DATABASE '/tmp/x'", "PRAGMA refused"),
    ("ATTACH '/tmp/x.db' AS x", "ATTACH refused: no other database"),
    ("ATTACH ':memory:' AS m", "ATTACH refused"),
    ("DETACH m", "DETACH refused"),
    ("USE memory", "SET refused"),
    ("INSTALL httpfs", "INSTALL/LOAD refused: extensions cannot be installed"),
    ("FORCE INSTALL httpfs FROM community", "INSTALL/LOAD refused"),
    ("LOAD httpfs", "INSTALL/LOAD refused"),
    ("LOAD '/tmp/evil.duckdb_extension'", "INSTALL/LOAD refused"),
    ("UPDATE EXTENSIONS", "this statement refused"),
    ("SET enable_external_access = true", "SET refused: the configuration is locked"),
    ("SET GLOBAL lock_configuration = false", "SET refused"),
    ("RESET enable_external_access", "SET refused"),
    ("SET VARIABLE x = 1", "SET refused"),
    ("PRAGMA enable_profiling", "PRAGMA refused"),
    ("PRAGMA version", "pragma_* table functions work in a SELECT"),
    ("CALL pragma_version()", "CALL refused: use SELECT * FROM f(...)"),
    ("CHECKPOINT", "CALL refused"),
    ("CREATE TABLE t AS SELECT 1", "CREATE refused: the tables are read-only"),
    ("CREATE TEMP VIEW v AS SELECT 1", "CREATE refused"),
    ("CREATE MACRO m(x) AS x", "CREATE refused"),
    ("CREATE SECRET (TYPE s3, KEY_ID 'k', SECRET 's')", "CREATE refused"),
    ("INSERT INTO events SELECT * FROM events", "INSERT refused"),
    ("UPDATE events SET id = 0", "UPDATE refused"),
    ("DELETE FROM events", "DELETE refused"),
    ("DROP VIEW events", "DROP refused"),
    ("ALTER VIEW events RENAME TO e", "ALTER refused"),
    ("MERGE INTO events USING events e ON true WHEN MATCHED THEN DELETE", "MERGE INTO refused"),
    ("BEGIN TRANSACTION", "TRANSACTION refused"),
    ("PREPARE p AS SELECT 1", "PREPARE refused"),
    ("VACUUM", "VACUUM refused"),
    ("PIVOT events ON name USING count(*)", "PIVOT without IN (...) refused"),
    ("SELECT 1; SELECT 2", "2 statements refused: send one statement at a time"),
    ("SELECT 1; COPY events TO '/tmp/x.csv'", "2 statements refused"),
    ("EXPLAIN COPY events TO '/tmp/x.csv'", "EXPLAIN of anything but a SELECT refused"),
    ("EXPLAIN ANALYZE COPY events TO '/tmp/x.csv'", "EXPLAIN of anything but a SELECT refused"),
    ("EXPLAIN ANALYZE SELECT * FROM read_text('/etc/passwd')", "read_text() refused"),
]


@pytest.mark.parametrize(("query", "message"), REFUSED_BY_CHECKS)
def test_every_escape_is_refused_by_the_checks(trace: Trace, query: str, message: str) -> None:
    with pytest.raises(OpscopeError) as e:
        trace.query(query, limit=10)
    text = str(e.value)
    assert text.startswith("SQL: only one read-only SELECT is allowed ("), text
    assert message in text
    assert ALLOWED_NOTE in text and "tables: events, ops, kernels" in text
    assert "\n" not in text


def test_empty_and_broken_queries_are_one_line(trace: Trace) -> None:
    for query, message in [
        ("", "the query is empty"),
        (" ; -- nothing", "the query is empty"),
        ("SELEKT 1", "Parser Error"),
        ("SELECT nope FROM events", "Binder Error"),
        ("SELECT * FROM nowhere", "nowhere does not exist! (tables: events, ops, kernels)"),
    ]:
        with pytest.raises(OpscopeError, match=r"^SQL: ") as e:
            trace.query(query, limit=1)
        assert message in str(e.value) and "\n" not in str(e.value)


# -- layer 2: the locked connection, the checks bypassed ------------------------------------

LOCKED_OUT = [
    "SELECT * FROM read_csv('{p}/secret.txt')",
    "SELECT * FROM read_text('{p}/secret.txt')",
    "SELECT * FROM read_blob('{p}/secret.txt')",
    "SELECT * FROM read_json_auto('{p}/secret.txt')",
    "SELECT * FROM sniff_csv('{p}/secret.txt')",
    "SELECT * FROM glob('{p}/*')",
    "SELECT * FROM read_parquet('http://127.0.0.1:9/x.parquet')",
    "SELECT * FROM read_csv('https://example.com/x.csv')",
    "SELECT * FROM '{p}/secret.txt'",
    "SELECT * FROM '{p}/secret.csv'",
    "SELECT * FROM histogram('{p}/secret.csv', a)",
    "SELECT getenv('HOME')",
    "SELECT * FROM destroy_external_resource('read_text', '{p}/secret.txt')",
    "COPY events TO '{p}/out.csv'",
    "COPY (SELECT 1) TO '{p}/out.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{p}/export'",
    "IMPORT DATABASE '{p}'",
    "ATTACH '{p}/new.db' AS x",
    "INSTALL httpfs",
    "LOAD httpfs",
    "LOAD '{p}/evil.duckdb_extension'",
    "SET enable_external_access = true",
    "SET GLOBAL enable_external_access = true",
    "RESET enable_external_access",
    "SET lock_configuration = false",
    "SET python_enable_replacements = true",
    "SET python_scan_all_frames = true",
    "SET allowed_directories = ['/']",
    "SET temp_directory = '{p}/spill'",
    "SET memory_limit = '1TB'",
    "SET threads = 64",
    "PRAGMA enable_profiling",
    "PRAGMA profile_output = '{p}/profile.json'",
    "SELECT * FROM enable_profiling(save_location := '{p}/profile.json')",
    "SELECT * FROM enable_logging(storage := 'file', storage_path := '{p}/logs')",
    "SELECT * FROM add_grammar_extension('x')",
    "SELECT * FROM query('COPY events TO ''{p}/out.csv''')",
]


@pytest.mark.parametrize("template", LOCKED_OUT)
def test_the_locked_connection_refuses_on_its_own(tmp_path: Path, template: str) -> None:
    (tmp_path / "secret.txt").write_text("s3cr3t\n")
    (tmp_path / "secret.csv").write_text("a\ns3cr3t\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    con = _sandbox()
    with pytest.raises(OpscopeError) as e:
        sqlsafe.execute(con, template.format(p=tmp_path), limit=10, tables=["events"])
    assert "s3cr3t" not in str(e.value) and "\n" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    settings = con.sql(
        "SELECT current_setting('enable_external_access'), current_setting('lock_configuration'),"
        " current_setting('python_enable_replacements'), current_setting('temp_directory')"
    ).fetchall()
    assert settings == [(False, True, False, "")]


def test_no_secrets_are_read_or_kept(tmp_path: Path) -> None:
    con = _sandbox()  # persistent secrets off: the secret folder is never read
    assert con.sql("SELECT * FROM duckdb_secrets()").fetchall() == []
    assert con.sql("SELECT * FROM which_secret('s3://b/k', 's3')").fetchall() == []


def test_the_connection_refusals_say_the_sandbox(tmp_path: Path) -> None:
    con = _sandbox()
    with pytest.raises(OpscopeError, match=r"refused by the sandbox, opscope's SQL has no file"):
        sqlsafe.execute(con, f"SELECT * FROM read_text('{tmp_path}')", limit=1)
    with pytest.raises(OpscopeError, match=r"refused by the sandbox, its configuration is locked"):
        sqlsafe.execute(con, "SET threads = 1", limit=1)


def test_the_sandbox_configuration(tmp_path: Path) -> None:
    config = sqlsafe.sandbox_config()
    assert list(config)[-1] == "lock_configuration"
    # at connect time the order does not matter: the lock given first still lets the rest apply
    first = duckdb.connect(":memory:", config={"lock_configuration": True, "threads": 1})
    assert first.sql("SELECT current_setting('threads')").fetchall() == [(1,)]
    con = _sandbox()
    got = dict(
        con.sql(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access',"
            " 'autoload_known_extensions', 'autoinstall_known_extensions',"
            " 'allow_community_extensions', 'lock_configuration', 'python_enable_replacements',"
            " 'threads')"
        ).fetchall()
    )
    assert got == {
        "enable_external_access": "false",
        "autoload_known_extensions": "false",
        "autoinstall_known_extensions": "false",
        "allow_community_extensions": "false",
        "lock_configuration": "true",
        "python_enable_replacements": "false",
        "threads": str(config["threads"]),
    }
    # Arrow tables still register on the locked connection (ops and kernels do so lazily)
    con.register("later", pa.table({"x": [7]}))
    assert con.sql("SELECT x FROM later").fetchall() == [(7,)]


def _scan_local(con: duckdb.DuckDBPyConnection) -> Any:
    hidden = pa.table({"secret": ["s3cr3t"]})  # a local of the frame that runs the query
    assert hidden.num_rows == 1
    return con.sql("SELECT * FROM hidden").fetchall()


def test_no_python_variable_is_visible_by_name(trace: Trace) -> None:
    assert _scan_local(duckdb.connect()) == [("s3cr3t",)]  # DuckDB's default would show it
    for sandboxed in (True, False):
        with pytest.raises(duckdb.CatalogException):
            _scan_local(sqlsafe.connect(sandboxed=sandboxed))
    hidden = pa.table({"secret": ["s3cr3t"]})
    assert hidden.num_rows == 1
    for allow_external in (False, True):
        with pytest.raises(OpscopeError, match="hidden does not exist"):
            trace.query("SELECT * FROM hidden", limit=1, allow_external=allow_external)


# -- what is allowed --------------------------------------------------------------------------

ALLOWED_QUERIES = [
    ("SELECT count(*) AS n FROM events", [{"n": 5}]),
    ("FROM events SELECT count(*) AS n", [{"n": 5}]),
    ("WITH k AS (SELECT * FROM kernels) SELECT count(*) AS n FROM k", [{"n": 1}]),
    ("VALUES (1, 'a')", [{"col0": 1, "col1": "a"}]),
    ("SELECT 1 AS x UNION ALL SELECT 2 ORDER BY x", [{"x": 1}, {"x": 2}]),
    ("SELECT 1 AS x INTERSECT SELECT 1", [{"x": 1}]),
    ('WITH "a.b" AS (SELECT 1 AS x) FROM "a.b"', [{"x": 1}]),  # a CTE, not a file
    ("FROM histogram(events, dur_ns)", None),
    ("TABLE kernels", None),
    ("-- a comment\nSELECT 1 AS x;", [{"x": 1}]),
    ("SELECT unnest([1, 2]) AS x", [{"x": 1}, {"x": 2}]),
    ("SELECT count(*) AS n FROM range(10)", [{"n": 10}]),
    ("SELECT count(*) AS n FROM pragma_table_info('events')", None),
    ("PIVOT (SELECT 'a' AS k, 1 AS v) ON k IN ('a', 'b') USING sum(v)", [{"a": 1, "b": None}]),
    ("DESCRIBE events", None),
    ("DESCRIBE SELECT 1 AS x", None),
    ("SUMMARIZE kernels", None),
    ("SHOW events", None),
    ("EXPLAIN SELECT count(*) FROM events", None),
    ("EXPLAIN ANALYZE SELECT count(*) FROM events", None),
    ("/* why */ EXPLAIN (FORMAT json) SELECT 1", None),
    ("SELECT current_setting('enable_external_access') AS e", [{"e": False}]),
    ("SELECT name FROM events WHERE name = 'read_csv(''/etc/passwd'')'", []),  # only a string
]


@pytest.mark.parametrize(("query", "rows"), ALLOWED_QUERIES)
def test_read_only_queries_run(trace: Trace, query: str, rows: list[dict[str, Any]] | None) -> None:
    got = trace.query(query, limit=100)
    assert got.row_count > 0 or rows == []
    if rows is not None:
        assert got.table.to_pylist() == rows


def test_show_tables_lists_every_table(trace: Trace) -> None:
    got = trace.query("SHOW TABLES", limit=10).table.column(0).to_pylist()
    assert set(got) == {"events", "ops", "kernels"}


def test_ops_and_kernels_are_built_only_when_named(trace: Trace) -> None:
    trace.query("SELECT count(*) FROM events", limit=1)
    assert trace._ops is None and trace._kernels is None
    trace.query("SELECT count(*) FROM ops", limit=1)
    assert trace._ops is not None and trace._kernels is None


# -- the time limit ---------------------------------------------------------------------------


def test_a_slow_query_is_stopped_at_the_time_limit(trace: Trace) -> None:
    t0 = time.monotonic()
    with pytest.raises(OpscopeError) as e:
        trace.query(SLOW, limit=10, timeout_s=0.2)
    assert time.monotonic() - t0 < 60  # generous: the point is that it stops
    text = str(e.value)
    assert text.startswith("SQL: the query ran past the 0.2 s time limit and was stopped")
    assert "aggregate" in text and "LIMIT" in text
    # the interrupt is spent: the next query runs, and a fast one under a limit is not stopped
    assert trace.query("SELECT 42 AS x", limit=1, timeout_s=30).table.to_pylist() == [{"x": 42}]
    assert trace.query("SELECT 43 AS x", limit=1).table.to_pylist() == [{"x": 43}]


def test_the_time_limit_must_be_positive(trace: Trace) -> None:
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(OpscopeError, match="time limit must be a positive"):
            trace.query("SELECT 1", limit=1, timeout_s=bad)


# -- the row cap, offset and next_offset --------------------------------------------------------


def test_pages_of_a_large_result(big: Trace) -> None:
    first = big.query("SELECT id FROM events ORDER BY id", limit=1000)
    assert (first.row_count, first.truncated, first.offset, first.next_offset) == (
        1000,
        True,
        0,
        1000,
    )
    assert first.columns == ["id"]
    ids: list[int] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        page = big.query("SELECT id FROM events ORDER BY id DESC", limit=30_000, offset=offset)
        ids += page.table.column("id").to_pylist()
        offset = page.next_offset
        pages += 1
    assert pages == 4 and ids == list(range(99_999, -1, -1))
    exact = big.query("SELECT id FROM events", limit=50_000, offset=50_000)
    assert (exact.row_count, exact.truncated, exact.next_offset) == (50_000, False, None)
    past = big.query("SELECT id FROM events", limit=10, offset=200_000)
    assert (past.row_count, past.truncated, past.next_offset) == (0, False, None)
    none = big.query("SELECT id FROM events", limit=0)
    assert (none.row_count, none.truncated, none.next_offset) == (0, True, 0)
    assert big.sql("SELECT id FROM events").num_rows == 100_000  # Trace.sql: every row
    with pytest.raises(OpscopeError, match="offset must be 0 or more"):
        big.query("SELECT 1", limit=1, offset=-1)
    with pytest.raises(OpscopeError, match="limit must be 0 or more"):
        big.query("SELECT 1", limit=-1)


def test_only_the_page_is_computed(big: Trace) -> None:
    # a trillion rows: answers at once because only limit + 1 are fetched
    page = big.query("SELECT * FROM range(1000000000000)", limit=5, timeout_s=30)
    assert page.truncated and page.table.column(0).to_pylist() == [0, 1, 2, 3, 4]
    top = big.query("SELECT id FROM events ORDER BY id DESC", limit=3, offset=1, timeout_s=30)
    assert top.table.column("id").to_pylist() == [99_998, 99_997, 99_996]


# -- lifting the sandbox ------------------------------------------------------------------------


def test_allow_external_lifts_the_sandbox_on_its_own_connection(
    trace: Trace, tmp_path: Path
) -> None:
    out = tmp_path / "events.csv"
    copy = f"COPY (SELECT name FROM events ORDER BY id) TO '{out}'"
    with pytest.raises(OpscopeError, match="COPY refused"):
        trace.query(copy, limit=None)
    assert not out.exists()
    trace.query(copy, limit=None, allow_external=True)
    assert out.read_text().splitlines()[0] == "name" and "ProfilerStep#1" in out.read_text()
    read = f"SELECT count(*) AS n FROM read_csv('{out}')"
    assert trace.sql(read, allow_external=True).to_pylist() == [{"n": 5}]
    with pytest.raises(OpscopeError, match=r"read_csv\(\) refused"):
        trace.sql(read)  # the sandbox stays locked beside it
    setting = "SELECT current_setting('enable_external_access') AS e"
    assert trace.sql(setting).to_pylist() == [{"e": False}]
    assert trace.sql(setting, allow_external=True).to_pylist() == [{"e": True}]
    trace.close()
    assert trace.sql(setting).to_pylist() == [{"e": False}]  # reopened on demand


# -- JSON-safe rows -----------------------------------------------------------------------------


def test_workspace_rows_are_json_safe_over_odd_types(trace_file: Path) -> None:
    ws = Workspace()
    ws.open(trace_file)
    out = ws.sql("SELECT * FROM test_all_types()")
    json.dumps(out, allow_nan=False)  # every DuckDB type, extremes included
    assert out["row_count"] == 3 and len(out["columns"]) == len(out["rows"][0])
    odd = ws.sql(
        "SELECT 1.50::DECIMAL(4, 2) AS d, 'nan'::DOUBLE AS nan, '-inf'::DOUBLE AS ninf,"
        " '\\x00\\xff'::BLOB AS b, repeat('x', 300)::BLOB AS big_blob,"
        " TIMESTAMP '2024-01-02 03:04:05' AS ts, make_timestamp_ns(1500) AS ts_ns,"
        " DATE '2024-01-02' AS day, INTERVAL 1 DAY + INTERVAL 2 MONTH AS i, [1, 2] AS l,"
        " {'a': 1, 'b': [TIMESTAMP '2024-01-02']} AS s, MAP {'k': 1} AS m,"
        " '00000000-0000-0000-0000-000000000001'::UUID AS u,"
        " 170141183460469231731687303715884105727::HUGEINT AS h, 18446744073709551615::UBIGINT"
        " AS ub, 12::HUGEINT AS small_h, 1 AS dup, 2 AS dup"
    )
    json.dumps(out, allow_nan=False)
    (row,) = odd["rows"]
    assert odd["columns"] == [*row]  # duplicate names made unique, rows keyed alike
    assert sqlrows.unique_columns(["a", "a", "a_2", "b"]) == ["a", "a_2", "a_2_2", "b"]
    assert row == {
        "d": 1.5,
        "nan": "NaN",
        "ninf": "-Infinity",
        "b": "0x00ff",
        "big_blob": "<300 bytes>",
        "ts": "2024-01-02 03:04:05.000000",
        "ts_ns": "1970-01-01 00:00:00.000001500",
        "day": "2024-01-02",
        "i": {"months": 2, "days": 1, "nanoseconds": 0},
        "l": [1, 2],
        "s": {"a": 1, "b": ["2024-01-02 00:00:00.000000"]},
        "m": [["k", 1]],
        "u": "00000000-0000-0000-0000-000000000001",
        "h": "170141183460469231731687303715884105727",
        "ub": 18446744073709551615,
        "small_h": 12,
        "dup": 1,
        "dup_1": 2,
    }


def test_workspace_sql_is_sandboxed_capped_and_timed(trace_file: Path) -> None:
    ws = Workspace()
    ws.open(trace_file)
    page = ws.sql("SELECT id FROM events ORDER BY id", limit=2, offset=1)
    assert set(page) == {"columns", "rows", "row_count", "truncated", "offset", "next_offset"}
    assert (page["row_count"], page["truncated"], page["offset"], page["next_offset"]) == (
        2,
        True,
        1,
        3,
    )
    with pytest.raises(OpscopeError, match="COPY refused"):
        ws.sql("COPY events TO '/tmp/opscope-never.csv'")
    with pytest.raises(OpscopeError, match="time limit"):
        ws.sql(SLOW, timeout_s=0.2)
    for kwargs, message in [
        ({"limit": 0}, "limit must be between 1 and 5000"),
        ({"limit": 5001}, "results should be aggregates"),
        ({"offset": -1}, "offset must be 0 or more"),
        ({"timeout_s": 0}, "timeout_s must be more than 0"),
        ({"timeout_s": 301}, "at most 300"),
    ]:
        with pytest.raises(ServiceError, match=message):
            ws.sql("SELECT 1", **kwargs)


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_is_sandboxed_unless_allow_external(
    trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from opscope.cli.main import main

    out = tmp_path / "k.csv"
    for query in (
        f"COPY kernels TO '{out}'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "INSTALL httpfs",
    ):
        assert main(["sql", str(trace_file), query]) == 1
        err = capsys.readouterr().err
        assert err.startswith("opscope sql: error: SQL: only one read-only SELECT is allowed (")
        assert err.count("\n") == 1
    assert not out.exists()
    assert main(["sql", str(trace_file), f"COPY kernels TO '{out}'", "--allow-external"]) == 0
    assert out.read_text().startswith("id,")
    assert main(["sql", str(trace_file), SLOW, "--timeout", "0.2"]) == 1
    err = capsys.readouterr().err
    assert "ran past the 0.2 s time limit" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as e:
        main(["sql", str(trace_file), "SELECT 1", "--timeout", "0"])
    assert e.value.code == 2


def test_cli_pages_with_limit_and_offset(
    trace_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from opscope.cli.main import main

    q = "SELECT id FROM events ORDER BY id"
    page = ["--format", "csv", "--limit", "2", "--offset", "1"]
    assert main(["sql", str(trace_file), q, *page]) == 0
    got = capsys.readouterr()
    assert got.out == "id\n1\n2\n"
    assert "more rows exist (--offset 3 for the next page)" in got.err
    assert main(["sql", str(trace_file), q, "--format", "json", "--offset", "3"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out) == [{"id": 3}, {"id": 4}] and "more rows" not in got.err
    assert main(["sql", str(trace_file), q, "--offset", "-1"]) == 1
    assert "--offset must be 0 or more" in capsys.readouterr().err


def test_queries_from_several_threads_take_turns(big: Trace) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def ask(i: int) -> int:
        page = big.query(f"SELECT count(*) AS n FROM events WHERE id % 7 = {i % 7}", limit=1)
        return int(page.table.column("n")[0].as_py())

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(ask, range(28)))
    assert sum(got) == 4 * 100_000
