"""opscope report: op tables, time breakdown and findings for any trace."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opscope.cli.output import (
    add_format,
    add_max_inflate,
    chosen_format,
    peaks_file,
    positive_int,
)

if TYPE_CHECKING:
    from rich.progress import TaskID

    from opscope.analysis.report import Report
    from opscope.service import Workspace

HELP = "analyse a trace file, run folder or folder of ranks"
DESCRIPTION = """\
Analyse a trace (Kineto JSON, .json.gz, a run folder, or a folder of per-rank traces): the
key-averages op table (calls, CPU self/total, device self/total, share), the device kernels,
the timeline summary (busy/idle), the critical path (what bounds each step: host, device,
launches, syncs, a peer rank) and the findings, ranked by the step time their fix can save.

By default the whole trace is the window; --steps 2:4 selects profiler steps 2 to 4 inclusive.
Each op also gets FLOPs, bytes and a roofline bound (compute, memory or overhead) against the
device's peaks; --roofline prints that table; --peaks FILE overrides the peaks.
The HTML format is the explorer's UI in one self-contained file (opscope explore serves it live).
On a terminal, stderr shows how far it has got (file read, link, analysis) until the report
is written; not with --format json or when stderr is not a terminal.

examples:
  opscope report opscope-runs/20261129-101500-naive
  opscope report trace.json.gz --format html -o report.html
  opscope report trace.json.gz --format json --steps 3:3 | jq '.ops[:5]'
  opscope report trace.json.gz --roofline
  opscope report trace.json.gz --critical-path
  opscope report trace.json.gz --what-if "aten::mul=0.5"
  opscope report ranks/ --format json | jq '.critical_path.bound_by_us'
  opscope report ranks/ --cluster local:8 --store ranks-events/
  opscope report 'ranks/*.json.gz' --cluster tcp://scheduler:8786
  opscope report s3://bucket/job/ --cluster local      # rank files by URL (fsspec)
  opscope report vllm/graph_execution.json.gz --graph-capture vllm/capture_traces/
  opscope report run/trace.json --loader-traces 'run/workers/*.json'

CUDA/HIP graph replays are one launch on the host and the whole graph on the device: a trace
recorded while the graphs were captured attributes each replayed kernel to the op, module and
call stack that launched it (--graph-capture FILE or FOLDER; a capture_traces/ folder beside
the trace, and captures recorded in the trace itself, are used unless --no-graph-capture).
Without one, each graph is a unit of the kernel table (replays, time per replay, kernels
grouped by name, idle between replays); see docs/cuda-graphs.md.

--cluster runs the per-rank analysis of a job on Dask (the opscope[cluster] extra): local
(a cluster of this machine's cores), local:N (N workers) or a scheduler's address; without a
value, $OPSCOPE_DASK_SCHEDULER.  The report is the local one, the job's critical path and
its findings' savings included, with source.engine added; see docs/scale.md.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        help="trace file, run folder, folder or glob of per-rank traces (with --cluster, also "
        "a URL: s3://, gs://, file://)",
    )
    add_format(p, "report")
    p.add_argument("--steps", help="profiler steps to analyse, e.g. 3 or 2:4 (default: all)")
    p.add_argument(
        "--top", type=positive_int, default=20, help="rows per table (default: %(default)s)"
    )
    p.add_argument("--roofline", action="store_true", help="print the roofline table (text format)")
    p.add_argument(
        "--peaks", metavar="FILE", type=peaks_file, help="JSON file overriding device peaks"
    )
    p.add_argument(
        "--rank", type=int, metavar="N", help="a job's rank N only (default: every rank)"
    )
    p.add_argument(
        "--critical-path",
        action="store_true",
        help="print the critical path in full: breakdown, per step, biggest pieces (text format)",
    )
    p.add_argument(
        "--what-if",
        metavar="NAME=FACTOR",
        help="project the critical path with some time scaled, e.g. 'aten::mul=0.5' (an op's "
        "device time halved) or 'launch_overhead=0'; several separated by commas (with --cluster "
        "too: the workers project their ranks)",
    )
    p.add_argument(
        "--finding",
        metavar="ID",
        help="print one finding in full (text or json): its evidence, details and next step, "
        "e.g. F1 (the brief names them)",
    )
    p.add_argument(
        "--cluster",
        nargs="?",
        const="",
        metavar="SCHEDULER",
        help="analyse the ranks on Dask: local, local:N or tcp://host:port (no value: "
        "$OPSCOPE_DASK_SCHEDULER)",
    )
    p.add_argument(
        "--store",
        metavar="DIR",
        help="with --cluster: write each rank's event table there as Parquet (rank<N>.parquet)",
    )
    add_graph_capture(p)
    p.add_argument(
        "--loader-traces",
        nargs="+",
        metavar="PATH",
        help="the traces of the DataLoader's worker processes (files, folders or globs; "
        "opscope.capture.profile_loader_workers writes them): break the critical path's "
        "data_loading down by the workers' own events (default: a loader_traces/ folder "
        "beside the trace)",
    )
    p.add_argument(
        "--no-loader-traces",
        action="store_true",
        help="leave a loader_traces/ folder beside the trace unread",
    )
    add_max_inflate(p)
    p.add_argument(
        "--no-cache", action="store_true", help="re-read the trace, bypassing the ingest cache"
    )


def add_graph_capture(p: argparse.ArgumentParser) -> None:
    """``--graph-capture PATH`` and ``--no-graph-capture`` (report, explore)."""
    p.add_argument(
        "--graph-capture",
        metavar="PATH",
        help="a trace recorded while the CUDA/HIP graphs were captured, or a folder of them: "
        "attributes the replayed kernels to the captured ops (default: a capture_traces/ "
        "folder beside the trace, and captures in the trace itself)",
    )
    p.add_argument(
        "--no-graph-capture",
        action="store_true",
        help="leave graph replays unattributed (each graph a unit of the kernel table)",
    )


def graph_capture_arg(args: argparse.Namespace) -> str | bool | None:
    """What --graph-capture / --no-graph-capture ask for (see Workspace.open)."""
    from opscope.errors import UsageError

    if args.no_graph_capture and args.graph_capture is not None:
        raise UsageError("--graph-capture and --no-graph-capture: give one of them")
    if args.no_graph_capture:
        return False
    value: str | None = args.graph_capture
    return value


def loader_traces_arg(args: argparse.Namespace) -> list[str | Path] | bool | None:
    """What --loader-traces / --no-loader-traces ask for."""
    from opscope.errors import UsageError

    given: list[str] | None = args.loader_traces
    if args.no_loader_traces and given is not None:
        raise UsageError("--loader-traces and --no-loader-traces: give one of them")
    if args.no_loader_traces:
        return False
    return list(given) if given is not None else None


def parse_steps(text: str | None) -> tuple[int, int] | None:
    from opscope.errors import OpscopeError

    if text is None:
        return None
    lo, sep, hi = text.partition(":")
    try:
        first = int(lo)
        last = int(hi) if sep else first
    except ValueError:
        raise OpscopeError(f"--steps {text!r}: expected N or FIRST:LAST, e.g. 2:4") from None
    if last < first:
        raise OpscopeError(f"--steps {text!r}: the last step comes before the first")
    return first, last


def warn_unreadable(data: dict[str, Any], command: str) -> None:
    """The job's rank files left out (they cannot be read), one warning each on stderr: the
    report goes on without them, whatever its format."""
    from opscope.trace.parts import unreadable_warning

    for entry in data.get("source", {}).get("unreadable") or []:
        print(f"opscope {command}: warning: {unreadable_warning(entry)}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from opscope.cli.prepare import prepare
    from opscope.cli.stages import stages
    from opscope.errors import OpscopeError
    from opscope.service import Workspace
    from opscope.service.workspace import StepsError

    steps = parse_steps(args.steps)
    chosen_format(args, "report")
    if args.peaks and not Path(args.peaks).is_file():
        raise OpscopeError(f"--peaks {args.peaks}: no such file")
    capture = graph_capture_arg(args)
    if args.cluster is not None:
        if isinstance(capture, str):
            raise OpscopeError(
                "--graph-capture needs the events in this process: run without --cluster"
            )
        if args.loader_traces is not None:
            raise OpscopeError(
                "--loader-traces reads one process's trace here: run without --cluster"
            )
        return _run_cluster(args, steps)
    if args.store is not None:
        raise OpscopeError("--store needs --cluster (the workers write the event tables)")
    prepare(args.path, command="report")
    workspace = Workspace()
    try:
        with stages(Path(str(args.path)).name, quiet=args.format == "json"):
            opened = workspace.open(
                args.path,
                steps=steps,
                cache=not args.no_cache,
                peaks=args.peaks,
                rank=args.rank,
                graph_capture=capture,
                loader_traces=loader_traces_arg(args),
            )
            # the report reads the trace once: its args text is kept packed meanwhile
            opened.pack_args = True
            report, data = opened.report, opened.data  # the analysis, while its stage shows
    except StepsError as exc:  # the service names the argument; here it is a flag
        raise OpscopeError(f"--{exc}") from None
    return _emit(args, report, data, workspace)


def _run_cluster(args: argparse.Namespace, steps: tuple[int, int] | None) -> int:
    from opscope.analysis.api import analyze
    from opscope.errors import OpscopeError

    if args.rank is not None:
        raise OpscopeError("--rank needs the events in this process: run without --cluster")
    from opscope.analysis.critical.section import WhatIfError

    with _progress(quiet=args.format == "json") as progress, _what_if_errors(WhatIfError):
        report = analyze(
            args.path,
            steps,
            peaks=args.peaks,
            cluster=args.cluster or True,
            store=args.store,
            cache=not args.no_cache,
            progress=progress,
            what_if=args.what_if,
        )
    return _emit(args, report, report.to_dict(lazy=True), None)


@contextlib.contextmanager
def _progress(*, quiet: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """A progress bar over the ranks on stderr, with an ETA (none when ``quiet`` or when
    stderr is not a terminal)."""
    from rich.console import Console

    console = Console(stderr=True)
    if quiet or not console.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ranks"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        tasks: dict[str, TaskID] = {}

        def tell(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done)

        yield tell


@contextlib.contextmanager
def _what_if_errors(kind: type[Exception]) -> Iterator[None]:
    """A bad ``--what-if`` spec (raised here or on a worker) as the one-line error the local
    path gives."""
    from opscope.errors import OpscopeError

    try:
        yield
    except kind as exc:
        raise OpscopeError(str(exc)) from None


def _emit(
    args: argparse.Namespace, report: Report, data: dict[str, Any], workspace: Workspace | None
) -> int:
    """Write the report in the format asked for."""
    warn_unreadable(data, "report")
    if args.finding is not None:
        return _emit_finding(args, data)
    from opscope.service.brief import brief as make_brief
    from opscope.service.brief import report_args

    where = report_args(
        str(args.path),
        steps=parse_steps(args.steps),
        rank=args.rank,
        peaks=args.peaks,
        graph_capture=graph_capture_arg(args),
    )
    brief = make_brief(data, trace=where)
    answer = data.get("what_if")  # a cluster run's, answered on its workers
    if args.what_if is not None and workspace is not None:
        answer = workspace.what_if(args.what_if)
        data = {**data, "what_if": answer}
    from opscope.cli.output import write_output
    from opscope.render.registry import renderer

    chosen = renderer("report", args.format)
    options = {
        "top": args.top,
        "critical_path": args.critical_path,
        "brief": brief,
        "what_if": answer,
        "roofline": args.roofline,
        "trace": report.trace,
    }
    if chosen.console is not None and args.output is None:
        from rich.console import Console

        console = Console()
        if not console.is_terminal:
            console = Console(width=100)
        chosen.print_to(console, data, **options)
        return 0
    write_output(chosen.render(data, **options), args.output)
    return 0


def _emit_finding(args: argparse.Namespace, data: dict[str, Any]) -> int:
    """``--finding ID``: one finding in full, as text or JSON."""
    from opscope.cli.output import write_output
    from opscope.errors import UsageError

    if args.format not in ("text", "json"):
        raise UsageError(f"--finding prints text or json, not {args.format}")
    findings = data.get("findings") or []
    found = next((f for f in findings if f.get("id") == args.finding), None)
    if found is None:
        ids = ", ".join(str(f.get("id")) for f in findings[:30]) or "none"
        raise UsageError(f"--finding {args.finding}: no such finding (this report has: {ids})")
    if args.format == "json":
        import orjson

        from opscope.analysis.critical.path import json_default

        text = orjson.dumps(found, default=json_default, option=orjson.OPT_INDENT_2).decode()
    else:
        from opscope.render.text import finding_lines

        text = "\n".join(finding_lines(found))
    write_output(text + "\n", args.output)
    return 0
