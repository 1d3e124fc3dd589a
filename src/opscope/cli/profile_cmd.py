"""opscope profile: run any PyTorch program under the profiler, get a run folder and a report."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from opscope.cli.output import positive_int

HELP = "run a PyTorch program under the profiler (like python -m cProfile)"
DESCRIPTION = """\
Run a PyTorch program under opscope, as `python script.py` or `python -m module` would run it
(same sys.argv, __name__ == "__main__", stdout, stderr and exit code), capture a window of its
steps into a run folder, and print the report on stderr when the program ends.

Steps: each optimizer.step() ends a step.  A program without an optimizer names its step
function (--step-fn module:function, --step-fn script.py:function, Class.method and
outer.<locals>.inner work too) or calls opscope.step() once per iteration.

Window: by default the schedule --skip-first/--wait/--warmup/--active/--repeat counted from the
start.  --delay S --duration D starts recording at the first step after S seconds and takes
every step that starts within D seconds of that; --delay S alone records --warmup then
--active steps from the first step after S seconds.
`kill -USR2 <pid>` (the command is printed at start) records --warmup then --active steps
from the next step into a new run folder; --on-demand records only then.

Several ranks: run it under torchrun (torchrun --nproc-per-node 2 -m opscope profile --
train.py), or use --nproc N: every rank records the same steps into one run folder
(traces/rank<N>.json.gz); rank 0 writes run.json.

DataLoader workers: --loader-workers profiles each worker process of every DataLoader with
num_workers > 0 (its whole life, CPU only) into the run folder's loader_traces/, which the
report reads by itself: data_loading on the critical path is broken down by worker.  A loader
with persistent_workers=True writes its workers' traces when it is deleted.

If the program fails or is interrupted, what was recorded so far is still exported and the
exit code is the program's (1 for an uncaught exception, 130 for Ctrl-C).

examples:
  opscope profile -- train.py --epochs 1
  opscope profile --wait 5 --active 3 -m mypkg.train --config small.yaml
  opscope profile --step-fn infer.py:run_batch -- infer.py
  opscope profile --delay 600 --duration 5 --no-report -- long_job.py
  opscope profile --nproc 2 -- train_ddp.py
  opscope profile --loader-workers -- train.py
  python -m opscope profile --device cuda:1 --memory -- train.py
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    steps = p.add_argument_group("steps and window")
    steps.add_argument("--wait", type=int, default=2, help="steps to skip per cycle (default 2)")
    steps.add_argument(
        "--warmup", type=int, default=1, help="steps the profiler warms up (default 1)"
    )
    steps.add_argument(
        "--active",
        type=int,
        default=None,
        help=(
            "steps recorded (default 1; 5 with --nproc N > 1 or under a launcher, enough to "
            "tell a straggler from noise)"
        ),
    )
    steps.add_argument("--repeat", type=int, default=1, help="cycles to record (default 1)")
    steps.add_argument(
        "--skip-first", type=int, default=0, help="steps to skip before the first cycle"
    )
    steps.add_argument(
        "--step-fn",
        metavar="MODULE:FUNCTION",
        help="each call of this function is a step (MODULE:FUNCTION or PATH.py:FUNCTION)",
    )
    steps.add_argument(
        "--delay", type=float, metavar="SECONDS", help="open the capture window after S seconds"
    )
    steps.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="record every step that starts within this many seconds of the window's opening",
    )
    steps.add_argument(
        "--on-demand",
        action="store_true",
        help="record only when the process gets SIGUSR2 (kill -USR2 PID)",
    )
    what = p.add_argument_group("what to record")
    what.add_argument("--device", help="cpu, cuda, cuda:1, xpu, mtia, neuron… (default: auto)")
    what.add_argument(
        "--record-shapes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="record input shapes (default: on)",
    )
    what.add_argument("--with-stack", action="store_true", help="record Python stacks")
    what.add_argument("--memory", action="store_true", help="record memory (profile_memory)")
    what.add_argument(
        "--loader-workers",
        action="store_true",
        help="profile each DataLoader worker process too (num_workers > 0), into the run "
        "folder's loader_traces/: the report breaks data_loading down by worker",
    )
    what.add_argument(
        "--neuron-config",
        action="append",
        nargs="+",
        metavar="KEY=VALUE",
        default=None,
        help="NeuronConfig keywords on a Neuron device (values as JSON, or a,b for lists)",
    )
    out = p.add_argument_group("output")
    out.add_argument(
        "--out", default="opscope-runs", help="parent of run folders (default: %(default)s)"
    )
    out.add_argument("--label", help="run folder label (default: the script or module name)")
    out.add_argument(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="print the report on stderr when the program ends (default: on)",
    )
    out.add_argument(
        "--top", type=positive_int, default=10, help="rows per report table (default 10)"
    )
    p.add_argument(
        "--nproc",
        type=int,
        metavar="N",
        help="launch N local ranks with torch.distributed.run (one node, 127.0.0.1)",
    )
    p.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        metavar="MODULE ARGS",
        help="run a module as python -m does (the rest of the line is its arguments)",
    )
    p.add_argument(
        "program",
        nargs=argparse.REMAINDER,
        help="-- script.py [args…]  (the program and its arguments)",
    )


class UsageError(Exception):
    """Bad command line: printed with exit code 2."""


def program_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~opscope.capture.program.Program` the command line names."""
    from opscope.capture.program import Program

    words = list(args.program or [])
    if words and words[0] == "--":
        words = words[1:]
    module = args.module
    if module is None and words and words[0] == "-m":
        module, words = words[1:], []
    if module is not None:
        if words:
            raise UsageError("give either -m MODULE or a script, not both")
        if not module or module[0].startswith("-"):
            raise UsageError("-m needs a module name")
        return Program(kind="module", target=module[0], args=tuple(module[1:]))
    if not words:
        raise UsageError("no program given: opscope profile [options] -- script.py [args…]")
    if words[0].startswith("-"):
        raise UsageError(f"unknown option {words[0]!r} (put the program after `--`)")
    return Program(kind="script", target=words[0], args=tuple(words[1:]))


def parse_neuron_config(items: list[list[str]] | None) -> dict[str, Any] | None:
    """``KEY=VALUE`` pairs: the value as JSON when it parses, a list for ``a,b``, else text."""
    if not items:
        return None
    config: dict[str, Any] = {}
    for item in (x for group in items for x in group):
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"--neuron-config {item!r}: expected KEY=VALUE (put the program after `--`)"
            )
        value: Any
        try:
            value = json.loads(text)
        except ValueError:
            value = [v.strip() for v in text.split(",")] if "," in text else text
        config[key.strip()] = value
    return config


def default_active(nproc: int | None) -> int:
    """Steps recorded when --active is not given: one, or for a job of several ranks (--nproc
    N > 1, or a launcher's WORLD_SIZE > 1) enough collectives to tell a straggler or an
    imbalance from noise."""
    from opscope.analysis.job_findings import MULTI_RANK_ACTIVE

    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        world = 1
    return MULTI_RANK_ACTIVE if (nproc or 1) > 1 or world > 1 else 1


def child_options(args: argparse.Namespace, label: str) -> list[str]:
    """The ``opscope profile`` options each rank gets from ``--nproc`` (no report: the
    launching process reports once, on all ranks)."""
    opts = [
        *("--wait", str(args.wait), "--warmup", str(args.warmup)),
        *("--active", str(args.active), "--repeat", str(args.repeat)),
        *("--skip-first", str(args.skip_first)),
        "--record-shapes" if args.record_shapes else "--no-record-shapes",
        *("--out", str(args.out), "--label", label),
        "--no-report",
    ]
    if args.step_fn:
        opts += ["--step-fn", args.step_fn]
    if args.delay is not None:
        opts += ["--delay", repr(args.delay)]
    if args.duration is not None:
        opts += ["--duration", repr(args.duration)]
    if args.on_demand:
        opts.append("--on-demand")
    if args.device:
        opts += ["--device", args.device]
    if args.with_stack:
        opts.append("--with-stack")
    if args.memory:
        opts.append("--memory")
    for group in args.neuron_config or []:
        for item in group:
            opts += ["--neuron-config", item]
    return opts


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _remove_empty_run(run_dir: Path) -> None:
    """Remove a run folder opscope made that holds no trace (its run.json and empty folders
    only); anything else in it stays, and so does the folder."""
    import contextlib

    for name in ("run.json",):
        with contextlib.suppress(OSError):
            (run_dir / name).unlink()
    for sub in sorted(run_dir.rglob("*"), reverse=True):
        if sub.is_dir():
            with contextlib.suppress(OSError):
                sub.rmdir()
    with contextlib.suppress(OSError):
        run_dir.rmdir()


def _has_traces(run_dir: Path) -> bool:
    return (run_dir / "trace.json.gz").is_file() or any((run_dir / "traces").glob("rank*.json.gz"))


def print_reports(run_dirs: list[Path], top: int) -> None:
    """The text report of each run folder on stderr (the program's stdout stays its own)."""
    from rich.console import Console

    from opscope.analysis.pipeline import analyze
    from opscope.cli.prepare import prepare
    from opscope.render.text import print_text

    console = Console(stderr=True)
    if not console.is_terminal:
        console = Console(stderr=True, width=100)
    for run_dir in run_dirs:
        if not _has_traces(run_dir):
            continue
        prepare(run_dir, command="profile")
        try:
            data = analyze(run_dir).to_dict()
        except Exception as exc:  # the run folder stays; the report can be made later
            _say(f"opscope profile: cannot report on {run_dir}: {type(exc).__name__}: {exc}")
            continue
        console.rule(f"opscope report: {run_dir}")
        print_text(console, data, top)
        _say(f"opscope: run folder {run_dir} (opscope report {run_dir} --format html -o …)")


def _rank_exit_code(run_dir: Path) -> int | None:
    """The first non-zero program exit code the ranks recorded, in rank order."""
    from opscope.capture.runfolder import RANKS_DIR

    codes: list[tuple[int, int]] = []
    for doc in (run_dir / RANKS_DIR).glob("rank*.json"):
        try:
            data = json.loads(doc.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        rank = data.get("rank") if isinstance(data, dict) else None
        program = data.get("program") if isinstance(data, dict) else None
        code = program.get("exit_code") if isinstance(program, dict) else None
        if isinstance(rank, int) and isinstance(code, int):
            codes.append((rank, code))
    nonzero = [code for _, code in sorted(codes) if code != 0]
    return nonzero[0] if nonzero else None


def run_nproc(args: argparse.Namespace, program: Any) -> int:
    """``--nproc N``: launch N ranks of ``opscope profile`` sharing one run folder."""
    from opscope.capture.distributed import (
        RUN_DIR_ENV,
        detect,
        free_port,
        launcher_command,
    )
    from opscope.capture.runfolder import new_run_dir

    if args.nproc < 1:
        raise UsageError(f"--nproc must be >= 1, got {args.nproc}")
    if detect() is not None:
        raise UsageError("--nproc: this process is already a rank of a launcher (RANK is set)")
    label = args.label or program.label
    run_dir = new_run_dir(args.out, label)
    words = [program.target, *program.args]
    if program.kind == "module":
        words = ["-m", *words]
    cmd = launcher_command(args.nproc, child_options(args, label), words, port=free_port())
    env = {**os.environ, RUN_DIR_ENV: str(run_dir.resolve())}
    if sys.platform.startswith("linux"):
        # one node: gloo's sockets on the loopback, like the rendezvous (unless the user chose)
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    _say(f"opscope: launching {args.nproc} ranks into {run_dir}")
    proc = subprocess.Popen(cmd, env=env)
    interrupted = False
    while True:
        try:
            rc = proc.wait()
            break
        except KeyboardInterrupt:  # the ranks got the Ctrl-C too: let them export and exit
            interrupted = True
    code = _rank_exit_code(run_dir)
    if args.report:
        print_reports([run_dir], args.top)
    if interrupted:
        return 130
    return code if code is not None else rc


def run(args: argparse.Namespace) -> int:
    try:
        program = program_from_args(args)
        neuron_config = parse_neuron_config(args.neuron_config)
        if args.active is None:
            args.active = default_active(args.nproc)
        if args.nproc is not None:
            return run_nproc(args, program)
        from opscope.capture.runner import RunnerOptions
        from opscope.capture.schedule import Schedule, ScheduleArgumentError

        try:
            schedule = Schedule(
                wait=args.wait,
                warmup=args.warmup,
                active=args.active,
                repeat=args.repeat,
                skip_first=args.skip_first,
            )
        except ScheduleArgumentError as exc:
            raise UsageError(str(exc)) from None
        if args.top < 1:
            raise UsageError("--top must be >= 1")
        options = RunnerOptions(
            device=args.device,
            schedule=schedule,
            record_shapes=args.record_shapes,
            with_stack=args.with_stack,
            profile_memory=args.memory,
            out=Path(args.out),
            label=args.label,
            neuron_config=neuron_config,
            step_fn=args.step_fn,
            delay_s=args.delay,
            duration_s=args.duration,
            on_demand=args.on_demand,
            command=tuple(sys.argv),
            loader_workers=args.loader_workers,
        )
    except UsageError as exc:
        _say(f"opscope profile: error: {exc}")
        return 2
    return _run_here(args, program, options)


def _run_here(args: argparse.Namespace, program: Any, options: Any) -> int:
    from opscope.capture.distributed import wait_for_ranks
    from opscope.capture.runner import profile_program

    result = profile_program(program, options, _say)
    result.print_exception()
    for message in result.messages:
        _say(f"opscope profile: {message}")
    if result.exit_code == 0 and not any(c.recorded for c in result.captures):
        # nothing recorded: no success, and no run folder that holds no trace left behind
        for c in result.captures:
            if not _has_traces(c.run_dir):
                _remove_empty_run(c.run_dir)
        _say("opscope profile: no trace was recorded (see above); exit status 1")
        return 1
    if args.report:
        dirs = [c.run_dir for c in result.captures if c.recorded]
        world = result.world
        if world is not None and world.multi:
            if world.rank != 0:
                dirs = []  # rank 0 reports on the shared folder
            for run_dir in dirs:
                missing = wait_for_ranks(run_dir, world.world_size, timeout_s=60.0)
                if missing:
                    _say(f"opscope profile: {run_dir}: no run document yet from ranks {missing}")
        print_reports(dirs, args.top)
    return result.exit_code
