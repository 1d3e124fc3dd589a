"""SQL over a trace's tables that is safe on untrusted queries.

A query may come from an agent steered by a hostile trace (instructions hidden in op names),
so by default SQL runs in a sandbox with two layers, each enough on its own to keep files and
the network out of reach:

1. **Checks before a query runs** (:func:`check_query`): exactly one statement, and a read-only
   one: ``SELECT`` (with ``WITH``, ``VALUES``, ``FROM``-first, ``UNION``...), ``EXPLAIN`` of a
   ``SELECT``, ``DESCRIBE``, ``SUMMARIZE``, ``SHOW``; in its parse tree no function that reads
   files or runs SQL the checks cannot see (``read_csv``, ``glob``, ``query``...) and no
   ``FROM 'a/path'``.  ``COPY``, ``ATTACH``, ``INSTALL``, ``LOAD``, ``SET``, ``PRAGMA``,
   ``CREATE`` and the other statements are refused with a message that says what is allowed.
2. **The connection** (:func:`sandbox_config`): DuckDB with external access disabled (no file
   or network access, no extension loading), no extension auto-install or auto-load, no
   community extensions, no scans of Python variables by name, no spilling to disk, a memory
   limit and a thread count for a shared machine, and the configuration locked, so that
   ``SET``/``RESET``/``PRAGMA`` cannot lift any of it.

Every query may have a time limit (a timer thread interrupts DuckDB) and fetches at most
``limit + 1`` rows past ``offset``, so ``SELECT * FROM events`` over millions of events answers
at once with ``truncated``.

``allow_external=True`` (``opscope sql --allow-external``) runs on a second, unlocked connection
without the checks, for a user who wants DuckDB's file functions (``COPY ... TO``).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from opscope.errors import OpscopeError, UsageError
from opscope.trace.sqlrows import json_rows

if TYPE_CHECKING:
    import duckdb

# What the sandbox allows, as the refusals say it.
ALLOWED = "SELECT (WITH, VALUES, FROM-first, UNION...), EXPLAIN, DESCRIBE, SUMMARIZE, SHOW"
NO_FILES = "opscope's SQL has no file or network access"
EXPORT_HINT = "export with opscope sql --format csv or json and a redirect"

# The sandbox's share of the machine: DuckDB's own default is 80% of memory and every core.
MEMORY_FRACTION = 0.25
MIN_MEMORY_BYTES = 512 << 20
MAX_THREADS = 8

# Why a statement type is refused (DuckDB's StatementType names).
_REFUSED_BECAUSE = {
    "COPY": f"{NO_FILES}; {EXPORT_HINT}",
    "COPY_DATABASE": NO_FILES,
    "EXPORT": f"{NO_FILES}; {EXPORT_HINT}",
    "ATTACH": "no other database can be opened",
    "DETACH": "no other database can be opened",
    "LOAD": "extensions cannot be installed or loaded",
    "EXTENSION": "extensions cannot be installed or loaded",
    "UPDATE_EXTENSIONS": "extensions cannot be installed or loaded",
    "SET": "the configuration is locked",
    "VARIABLE_SET": "the configuration is locked",
    "PRAGMA": "the configuration is locked; the pragma_* table functions work in a SELECT",
    "CALL": "use SELECT * FROM f(...) instead",
    "CREATE": "the tables are read-only; name intermediate results with WITH x AS (...)",
    "CREATE_FUNC": "the tables are read-only; name intermediate results with WITH x AS (...)",
    "INSERT": "the tables are read-only",
    "UPDATE": "the tables are read-only",
    "DELETE": "the tables are read-only",
    "DROP": "the tables are read-only",
    "ALTER": "the tables are read-only",
    "MERGE_INTO": "the tables are read-only",
    "MULTI": "it runs several statements; list the values: PIVOT t ON col IN ('a', 'b') USING ...",
}
# How a refused statement type is named in the message, where DuckDB's name is not the SQL.
_SHOWN_AS = {
    "LOAD": "INSTALL/LOAD",
    "MULTI": "PIVOT without IN (...)",
    "UNKNOWN": "this statement",
    "VARIABLE_SET": "SET VARIABLE",
    "CREATE_FUNC": "CREATE FUNCTION",
}

# Functions refused by the checks (the locked connection refuses what they do anyway).
_FILE_FUNCTION = re.compile(
    r"(read_\w+|\w+_scan|parquet_\w+|sniff_csv|glob|which_secret|duckdb_secrets"
    r"|iceberg_\w+|delta_\w+|st_read\w*|sqlite_\w+|postgres_\w+|mysql_\w+)",
    re.IGNORECASE,
)
_OPAQUE_FUNCTION = re.compile(
    r"(query|query_table|json_execute_serialized_sql|python_\w+|\w*external_resource\w*)",
    re.IGNORECASE,
)
_CONFIG_FUNCTION = re.compile(
    r"(enable_\w+|disable_\w+|truncate_duckdb_logs|\w+_grammar_extension|checkpoint"
    r"|force_checkpoint)",
    re.IGNORECASE,
)
_PATH_LIKE = re.compile(r"[/\\:.*?]")
_EXPLAIN = re.compile(
    r"EXPLAIN\s+(?:ANALY[SZ]E\s+)?(?:\((?:[^()']|'[^']*')*\)\s*)?(?=\S)", re.IGNORECASE
)
_LEADING_COMMENTS = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.DOTALL)
# A query that lists the tables: every table is registered first, so that all are listed.
_CATALOG_WORDS = re.compile(
    r"\bshow\s+(?:all\s+)?tables\b|^\s*(?:show|describe)\s*;?\s*$"
    r"|\b(?:duckdb_tables|duckdb_views|duckdb_columns|information_schema|pragma_show_tables\w*)\b",
    re.IGNORECASE,
)

TableSource = Callable[[], pa.Table]
DuckConfigValue = str | bool | int | float | list[str]


@dataclass(frozen=True)
class SqlResult:
    """One page of a query's rows.

    ``table`` holds at most ``limit`` rows starting at row ``offset`` of the result;
    ``truncated`` says more rows follow, and ``next_offset`` is where the next page starts
    (``None`` when this page is the last).  How many rows the whole result has is not known:
    counting them would run the whole query.
    """

    table: pa.Table
    columns: list[str]
    truncated: bool
    offset: int
    next_offset: int | None

    @property
    def row_count(self) -> int:
        """The rows in this page."""
        return int(self.table.num_rows)

    def json_rows(self) -> list[dict[str, Any]]:
        """The rows as JSON-safe objects (see :func:`json_rows`)."""
        return json_rows(self.table)


def _memory_limit() -> str:
    """The sandbox's memory limit: a quarter of the machine's memory (or of the cgroup's)."""
    total = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            raw = f.read().strip()
        if raw.isdigit():
            total = min(total or int(raw), int(raw))
    except OSError:
        pass
    if not total:
        return "2GiB"
    return f"{max(MIN_MEMORY_BYTES, int(total * MEMORY_FRACTION)) >> 20}MiB"


def sandbox_config() -> dict[str, DuckConfigValue]:
    """The DuckDB configuration of the sandboxed connection, given to ``duckdb.connect``.

    DuckDB 2.0.1 accepts every key at connect time and applies them all before the lock
    takes effect, whatever their order (it matters only for ``SET``, where
    ``lock_configuration`` must come last); it is kept last here for the reader."""
    return {
        "enable_external_access": False,
        "autoload_known_extensions": False,
        "autoinstall_known_extensions": False,
        "allow_community_extensions": False,
        "allow_unsigned_extensions": False,
        "allow_persistent_secrets": False,
        "python_enable_replacements": False,
        "temp_directory": "",
        "threads": max(1, min(MAX_THREADS, os.cpu_count() or 1)),
        "memory_limit": _memory_limit(),
        "lock_configuration": True,
    }


def connect(*, sandboxed: bool) -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection: the sandbox, or an unlocked one that still never
    scans Python variables by name."""
    import duckdb

    config: dict[str, DuckConfigValue] = (
        sandbox_config() if sandboxed else {"python_enable_replacements": False}
    )
    return duckdb.connect(":memory:", config=config)


def tables_note(tables: Mapping[str, object] | list[str]) -> str:
    """``tables: events, ops, kernels`` (and the ``neuron_*`` ones present)."""
    return "tables: " + ", ".join(tables)


def _refuse(what: str, reason: str, tables: list[str]) -> OpscopeError:
    return OpscopeError(
        f"SQL: only one read-only SELECT is allowed ({what} refused: {reason}); "
        f"allowed: {ALLOWED}; {tables_note(tables)}"
    )


def _statement_type(statement: Any) -> str:
    try:
        return str(statement.type.name)
    except ValueError:  # a type the Python client has no name for (UPDATE EXTENSIONS ...)
        return "UNKNOWN"


def _function_refusal(name: str) -> str | None:
    if _FILE_FUNCTION.fullmatch(name):
        return NO_FILES
    if _OPAQUE_FUNCTION.fullmatch(name):
        return "it runs SQL or functions the checks cannot see; write the query out"
    if _CONFIG_FUNCTION.fullmatch(name):
        return "the configuration is locked"
    return None


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _check_tree(con: duckdb.DuckDBPyConnection, query: str, tables: list[str]) -> None:
    """Refuse file-reading and opaque functions, and ``FROM 'a/path'``, in a SELECT's parse
    tree (DuckDB's ``json_serialize_sql``; a plain scan of the words where that fails)."""
    import duckdb

    try:
        rows = con.execute("SELECT json_serialize_sql(?)", [query]).fetchall()
        tree = json.loads(rows[0][0]) if rows else {"error": True}
    except (duckdb.Error, ValueError):
        tree = {"error": True}
    if tree.get("error"):
        for word in re.findall(r"\b(\w+)\b\"?\s*\(", query):
            reason = _function_refusal(word)
            if reason:
                raise _refuse(f"{word.lower()}()", reason, tables)
        return
    nodes = list(_walk(tree.get("statements")))
    ctes = {
        str(entry.get("key"))
        for node in nodes
        if isinstance(node.get("cte_map"), dict)
        for entry in node["cte_map"].get("map") or []
        if isinstance(entry, dict)
    }
    for node in nodes:
        name = node.get("function_name")
        if isinstance(name, str):
            reason = _function_refusal(name)
            if reason:
                raise _refuse(f"{name.lower()}()", reason, tables)
        if node.get("type") == "BASE_TABLE":
            table = str(node.get("table_name") or "")
            if _PATH_LIKE.search(table) and table not in ctes:
                raise _refuse(f"FROM '{table}'", NO_FILES, tables)


def _explained(con: duckdb.DuckDBPyConnection, query: str, tables: list[str]) -> str:
    """The SELECT an ``EXPLAIN [ANALYZE] [(options)]`` statement explains (refused unless it
    is one SELECT: ``EXPLAIN ANALYZE`` runs what it explains)."""
    import duckdb

    start = _LEADING_COMMENTS.match(query)
    text = query[start.end() if start else 0 :]
    head = _EXPLAIN.match(text)
    inner: list[Any] = []
    if head:
        try:
            inner = con.extract_statements(text[head.end() :])
        except (duckdb.Error, ValueError):
            inner = []
    if head is None or len(inner) != 1 or _statement_type(inner[0]) != "SELECT":
        raise _refuse("EXPLAIN of anything but a SELECT", "only queries run here", tables)
    return text[head.end() :]


def check_query(con: duckdb.DuckDBPyConnection, query: str, tables: list[str]) -> None:
    """Raise :class:`OpscopeError` unless ``query`` is one read-only statement the sandbox
    allows (see the module's docstring); ``tables`` are named in the message."""
    import duckdb

    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise OpscopeError(f"SQL: {str(exc).splitlines()[0]}") from None
    except ValueError:  # a statement type the Python client cannot name
        raise _refuse(_SHOWN_AS["UNKNOWN"], "it is not a query", tables) from None
    if not statements:  # a usage error on the command line, as several statements are
        raise UsageError(f"SQL: the query is empty; allowed: {ALLOWED}; {tables_note(tables)}")
    if len(statements) > 1:
        several = _refuse(f"{len(statements)} statements", "send one statement at a time", tables)
        raise UsageError(str(several))
    kind = _statement_type(statements[0])
    if kind == "EXPLAIN":
        _check_tree(con, _explained(con, query, tables), tables)
        return
    if kind != "SELECT":
        reason = _REFUSED_BECAUSE.get(kind, "it is not a query")
        raise _refuse(_SHOWN_AS.get(kind, kind.replace("_", " ")), reason, tables)
    _check_tree(con, query, tables)


class _Watchdog:
    """Interrupts the connection's query after ``timeout_s`` (never after the query is over:
    the interrupt and the end of the query take the same lock)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, timeout_s: float | None) -> None:
        self._con = con
        self._timeout_s = timeout_s
        self._guard = threading.Lock()
        self._done = False
        self._timer: threading.Timer | None = None
        self.fired = False

    def _fire(self) -> None:
        with self._guard:
            if not self._done:
                self.fired = True
                self._con.interrupt()

    def __enter__(self) -> _Watchdog:
        if self._timeout_s is not None:
            self._timer = threading.Timer(self._timeout_s, self._fire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._guard:
            self._done = True
        if self._timer is not None:
            self._timer.cancel()


def _error(
    exc: Exception, *, sandboxed: bool, timed_out: float | None, tables: list[str]
) -> OpscopeError:
    """DuckDB's error as one line that says what to do."""
    import duckdb

    lines = str(exc).splitlines()
    first = lines[0] if lines else type(exc).__name__
    # DuckDB's hints ("Candidate bindings: ...", "Did you mean ...?") on the same line; a
    # table it suggests must be one of the trace's (not one of its own catalog's)
    hints = [ln.strip() for ln in lines[1:] if ln.startswith("Candidate bindings")]
    for ln in lines[1:]:
        m = re.match(r'Did you mean "([^"]+)"', ln)
        if m and m.group(1) in tables:
            hints.append(ln.strip())
    missing = re.match(r"Catalog Error: Table with name (\S+) does not exist", first)
    if missing and not any(h.startswith("Did you mean") for h in hints):
        close = difflib.get_close_matches(missing.group(1), tables, n=1)
        if close:
            hints.append(f'Did you mean "{close[0]}"?')
    if hints:
        first = f"{first} {' '.join(hints)}"
    if timed_out is not None and isinstance(exc, duckdb.InterruptException):
        return OpscopeError(
            f"SQL: the query ran past the {timed_out:g} s time limit and was stopped; ask for "
            "less: an aggregate (GROUP BY with count/sum), a narrower WHERE, or a LIMIT"
        )
    if isinstance(exc, duckdb.OutOfMemoryException):
        return OpscopeError(
            f"SQL: the query needed more memory than it may use ({first}); aggregate, "
            "filter or add a LIMIT"
        )
    if sandboxed and isinstance(exc, duckdb.PermissionException):
        return OpscopeError(f"SQL: refused by the sandbox, {NO_FILES} ({first})")
    if sandboxed and "configuration has been locked" in first:
        return OpscopeError(f"SQL: refused by the sandbox, its configuration is locked ({first})")
    if isinstance(exc, duckdb.CatalogException) and "does not exist" in first:
        return OpscopeError(f"SQL: {first} ({tables_note(tables)})")
    return OpscopeError(f"SQL: {first}")


_ALL_ROWS = (1 << 63) - 1


def execute(
    con: duckdb.DuckDBPyConnection,
    query: str,
    *,
    limit: int | None,
    offset: int = 0,
    timeout_s: float | None = None,
    sandboxed: bool = True,
    tables: list[str] | None = None,
) -> SqlResult:
    """Run ``query`` on ``con`` (already checked when sandboxed) and fetch at most ``limit``
    rows past ``offset`` (``None``: all), stopping it after ``timeout_s`` seconds."""
    import duckdb

    if limit is not None and limit < 0:
        raise OpscopeError("SQL: the row limit must be 0 or more")
    if offset < 0:
        raise OpscopeError("SQL: the offset must be 0 or more")
    if timeout_s is not None and not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise OpscopeError("SQL: the time limit must be a positive number of seconds")
    watchdog = _Watchdog(con, timeout_s)
    try:
        with watchdog:
            rel = con.sql(query)
            if rel is None:  # a statement without rows (COPY ... TO with --allow-external)
                table = pa.table({})
            else:
                if limit is not None:
                    rel = rel.limit(limit + 1, offset)
                elif offset:
                    rel = rel.limit(_ALL_ROWS, offset)
                table = rel.to_arrow_table()
    except duckdb.Error as exc:
        raise _error(
            exc,
            sandboxed=sandboxed,
            timed_out=timeout_s if watchdog.fired else None,
            tables=tables or [],
        ) from None
    truncated = limit is not None and table.num_rows > limit
    if truncated:
        assert limit is not None
        table = table.slice(0, limit)
    return SqlResult(
        table=table,
        columns=list(table.column_names),
        truncated=truncated,
        offset=offset,
        next_offset=offset + table.num_rows if truncated else None,
    )


class TraceSql:
    """The DuckDB connections over one trace's tables: the sandbox, made on first use, and an
    unlocked one made only when asked for.

    ``sources`` gives the tables by SQL name, each as a function that builds it: ``events``
    is registered at once, the others (``ops``, ``kernels``, ``neuron_*``; building them costs
    time) when a query names them.  DuckDB accepts ``register`` on a locked connection, so the
    laziness costs the sandbox nothing.  Queries on one trace run one at a time.
    """

    def __init__(self, sources: Callable[[], Mapping[str, TableSource]]) -> None:
        self._sources = sources
        self._cons: dict[bool, duckdb.DuckDBPyConnection] = {}
        self._registered: dict[bool, set[str]] = {}
        self._lock = threading.Lock()

    def _connection(self, sandboxed: bool, query: str) -> duckdb.DuckDBPyConnection:
        con = self._cons.get(sandboxed)
        if con is None:
            con = self._cons[sandboxed] = connect(sandboxed=sandboxed)
            self._registered[sandboxed] = set()
        done = self._registered[sandboxed]
        everything = bool(_CATALOG_WORDS.search(query))
        for name, build in self._sources().items():
            if name in done:
                continue
            if name == "events" or everything or re.search(rf"\b{re.escape(name)}\b", query, re.I):
                con.register(name, build())
                done.add(name)
        return con

    def run(
        self,
        query: str,
        *,
        limit: int | None,
        offset: int = 0,
        timeout_s: float | None = None,
        allow_external: bool = False,
    ) -> SqlResult:
        sandboxed = not allow_external
        with self._lock:
            tables = list(self._sources())
            con = self._connection(sandboxed, query)
            if sandboxed:
                check_query(con, query, tables)
            return execute(
                con,
                query,
                limit=limit,
                offset=offset,
                timeout_s=timeout_s,
                sandboxed=sandboxed,
                tables=tables,
            )

    def close(self) -> None:
        with self._lock:
            for con in self._cons.values():
                con.close()
            self._cons.clear()
            self._registered.clear()
