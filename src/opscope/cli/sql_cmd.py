"""``opscope sql``: run SQL over a trace's event table (thin: all work is in opscope.trace)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from opscope.cli.output import add_max_inflate, apply_max_inflate

HELP = "run SQL (DuckDB) over a trace's events, ops and kernels tables"

DESCRIPTION = """\
Run a SQL query (DuckDB dialect) over a trace file, run folder or folder of per-rank traces.

Tables: events (one row per timed event; columns in docs/trace-engine.md), ops (one row per
framework op, with self and device times) and kernels (one row per device execution, with the
op that launched it).  Times are integer nanoseconds.

example:
  opscope sql trace.json.gz "SELECT name, count(*) AS n, sum(dur_ns)/1e3 AS us
                             FROM kernels GROUP BY name ORDER BY us DESC LIMIT 10"
  opscope sql run/ "SELECT op_name, sum(dur_ns) FROM kernels GROUP BY 1" --format csv
"""

FORMATS = ("table", "csv", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="trace file, run folder, or folder of per-rank traces")
    parser.add_argument("query", help="the SQL query (tables: events, ops, kernels)")
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
        help="print at most N rows (default: all for csv/json, 100 for table)",
    )


def _cell(v: Any) -> str:
    if v is None:
        return ""
    return str(v)


def run(args: argparse.Namespace) -> int:
    apply_max_inflate(args.max_inflate)
    from opscope.cli.prepare import prepare
    from opscope.errors import OpscopeError
    from opscope.service import Workspace

    if args.limit is not None and args.limit < 0:
        raise OpscopeError("--limit must be 0 or more")
    prepare(args.path, command="sql")
    trace = Workspace().open(args.path, cache=not args.no_cache).trace
    result = trace.sql(args.query)
    limit = args.limit if args.limit is not None else (100 if args.format == "table" else None)
    total = result.num_rows
    shown = result.slice(0, limit) if limit is not None else result
    if args.format == "csv":
        import csv

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(shown.column_names)
        for row in shown.to_pylist():
            writer.writerow([_cell(row[c]) for c in shown.column_names])
    elif args.format == "json":
        import orjson

        sys.stdout.write(
            orjson.dumps(shown.to_pylist(), default=str, option=orjson.OPT_INDENT_2).decode() + "\n"
        )
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(show_lines=False)
        for name in shown.column_names:
            table.add_column(name, overflow="fold")
        for row in shown.to_pylist():
            table.add_row(*[_cell(row[c]) for c in shown.column_names])
        console = Console()
        console.print(table)
        note = f"{total} row{'s' if total != 1 else ''}"
        if shown.num_rows < total:
            note += f" ({shown.num_rows} shown; --limit N for more)"
        console.print(note, style="dim")
    for warning in trace.meta.warnings:
        print(f"opscope sql: warning: {warning}", file=sys.stderr)
    return 0
