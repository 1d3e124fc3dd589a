"""``opscope mcp``: the analysis as MCP tools for LLM agents, over stdio (thin: see
:mod:`opscope.mcp`)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "serve opscope's analysis to LLM agents (Model Context Protocol over stdio)"

DESCRIPTION = """\
Serve opscope's analysis as MCP tools over stdin/stdout, for an MCP client (an agent, an IDE)
to launch.  The server keeps the traces it opened; the last one is the default of every tool.

Tools: open_trace, summary, list_traces, close_trace, findings, finding, ops, kernels,
roofline, lanes, events, event, chain, critical_path, what_if, distributed, collective, sql,
tables, compare.  Every result is short Markdown plus structured content matching the tool's
output schema, under a size cap; SQL is read-only with no file or network access.

Needs the MCP SDK: pip install 'opscope[mcp]'.  Guide: docs/agents.md.

example (a client's server configuration):
  {"mcpServers": {"opscope": {"command": "opscope", "args": ["mcp"]}}}
  opscope mcp --root ~/traces        # open_trace may read only under ~/traces
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        action="append",
        metavar="DIR",
        default=None,
        help="a folder open_trace and compare may read (repeatable; default: any path)",
    )


def run(args: argparse.Namespace) -> int:
    import importlib.util

    from opscope.errors import OpscopeError

    if importlib.util.find_spec("mcp") is None:
        raise OpscopeError("the MCP SDK is not installed: pip install 'opscope[mcp]'")
    roots: tuple[Path, ...] | None = None
    if args.root:
        resolved = [Path(r).expanduser().resolve() for r in args.root]
        missing = [str(r) for r in resolved if not r.is_dir()]
        if missing:
            raise OpscopeError(f"--root {missing[0]}: not a folder")
        roots = tuple(resolved)
    from opscope.mcp.server import run_stdio

    run_stdio(roots=roots)
    return 0
