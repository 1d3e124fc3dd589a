"""``opscope sql``: run SQL over a trace's event table (thin: all work is in opscope.trace)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from opscope.cli.output import add_max_inflate

HELP = "run SQL (DuckDB) over a trace's events, ops and kernels tables"

DESCRIPTION = """\
Run a SQL query (DuckDB dialect) over a trace file, run folder or folder of per-rank traces,
or the event store `opscope report --cluster --store DIR` writes (DIR/rank<N>.parquet: every
rank in one events table).

Tables: events (one row per timed event; columns in docs/trace-engine.md), ops (one row per
framework op, with self and device times) and kernels (one row per device execution, with the
op that launched it); a Neuron profile adds neuron_* tables.  Times are integer nanoseconds.

The query runs in a sandbox, because trace contents (op names, args) are untrusted and agents
drive this command too: one read-only statement (SELECT, WITH, VALUES, EXPLAIN, DESCRIBE,
SUMMARIZE, SHOW), no file or network access (read_csv, COPY, ATTACH, INSTALL, SET, PRAGMA ...
are refused).  Export with --format csv or json and a redirect; --allow-external lifts the
sandbox for DuckDB's own file functions.  Only the rows printed are computed.

example:
  opscope sql trace.json.gz "SELECT name, count(*) AS n, sum(dur_ns)/1e3 AS us
                             FROM kernels GROUP BY name ORDER BY us DESC LIMIT 10"
  opscope sql run/ "SELECT op_name, sum(dur_ns) FROM kernels GROUP BY 1" --format csv > k.csv
  opscope sql trace.json.gz "SELECT * FROM events ORDER BY dur_ns DESC" --limit 20 --offset 20
  opscope sql trace.json.gz "COPY kernels TO 'kernels.parquet'" --allow-external
  opscope sql events/ "SELECT rank, count(*) FROM events GROUP BY 1"   # a --store folder
"""

FORMATS = ("table", "csv", "json")
TABLE_ROWS = 100  # rows the table format prints unless --limit


def _timeout(text: str) -> float:
    """An argparse type: a positive number of seconds (``--timeout``)."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a number of seconds above 0")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", help="trace file, run folder, folder of per-rank traces, or a --store folder"
    )
    parser.add_argument(
        "query", nargs="?", help="the SQL query (tables: events, ops, kernels); see --schema"
    )
    parser.add_argument(
        "--schema",
        action="store_true",
        help="print the tables and their columns (with their types) instead of running a query",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="table", help="output format (default: table)"
    )
    add_max_inflate(parser)
    parser.add_argument(
        "--no-cache", action="store_true", help="ingest afresh; neither read nor write the cache"
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help=f"print at most N rows (default: all for csv/json, {TABLE_ROWS} for table)",
    )
    parser.add_argument(
        "--offset",
        type=int,
        default=0,
        metavar="N",
        help="skip the first N rows of the result (with --limit: pages)",
    )
    parser.add_argument(
        "--timeout",
        type=_timeout,
        default=None,
        metavar="S",
        help="stop the query after S seconds (default: no time limit)",
    )
    parser.add_argument(
        "--allow-external",
        action="store_true",
        help="lift the sandbox: any statement, and DuckDB's file and network functions "
        "(read_csv, COPY ... TO, ATTACH); only for queries you wrote",
    )


def _cell(v: Any) -> str:
    """A JSON-safe value (:func:`opscope.trace.sqlsafe.json_rows`) as one CSV or table cell."""
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        import json

        return json.dumps(v, ensure_ascii=False)
    return str(v)


def _print_schema(tables: list[dict[str, Any]], fmt: str) -> int:
    """The SQL tables, their row counts and columns, in the chosen format."""
    if fmt == "json":
        import orjson

        sys.stdout.write(orjson.dumps(tables, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    if fmt == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(["table", "column", "type"])
        for t in tables:
            for c in t["columns"]:
                writer.writerow([t["name"], c["name"], c["type"]])
        return 0
    for t in tables:
        print(f"{t['name']} ({t['rows']} rows)")
        for c in t["columns"]:
            print(f"  {c['name']:<24} {c['type']}")
    return 0


def run(args: argparse.Namespace) -> int:
    from opscope.cli.prepare import prepare
    from opscope.errors import OpscopeError, UsageError
    from opscope.service import Workspace

    if args.schema and args.query is not None:
        raise UsageError("give a query or --schema, not both")
    if not args.schema and not (args.query or "").strip():
        raise UsageError("no query: give one (tables: events, ops, kernels), or --schema")
    if args.limit is not None and args.limit < 0:
        raise OpscopeError("--limit must be 0 or more")
    if args.offset < 0:
        raise OpscopeError("--offset must be 0 or more")
    prepare(args.path, command="sql")
    ws = Workspace()
    trace = ws.open(args.path, cache=not args.no_cache).trace
    if args.schema:
        return _print_schema(ws.tables(), args.format)
    limit = (
        args.limit if args.limit is not None else (TABLE_ROWS if args.format == "table" else None)
    )
    result = trace.query(
        args.query,
        limit=limit,
        offset=args.offset,
        timeout_s=args.timeout,
        allow_external=args.allow_external,
    )
    columns = result.columns
    rows = result.json_rows()
    keys = list(rows[0]) if rows else columns
    if args.format == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row[k]) for k in keys])
    elif args.format == "json":
        import orjson

        sys.stdout.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(show_lines=False)
        for name in columns:
            table.add_column(name, overflow="fold")
        for row in rows:
            table.add_row(*[_cell(row[k]) for k in keys])
        console = Console()
        console.print(table)
        n = len(rows)
        note = f"{n} row{'s' if n != 1 else ''}"
        if result.truncated:
            note += (
                f" shown; more rows exist (--limit N for more, --offset {result.next_offset} "
                "for the next page)"
            )
        console.print(note, style="dim")
    if args.format != "table" and result.truncated:
        print(
            f"opscope sql: {len(rows)} rows written; more rows exist "
            f"(--offset {result.next_offset} for the next page)",
            file=sys.stderr,
        )
    for warning in trace.meta.warnings:
        print(f"opscope sql: warning: {warning}", file=sys.stderr)
    return 0
