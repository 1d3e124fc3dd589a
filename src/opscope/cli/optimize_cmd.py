"""opscope optimize: find the fix for a block, apply it, prove it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opscope.experiment import Optimization

HELP = "find the fused built-in or compile mode that makes a block faster, and prove it"
DESCRIPTION = """\
Profile a function or nn.Module, capture its graph, match unfused patterns (RMSNorm,
LayerNorm, attention, tanh GELU, SiLU, matmul + bias) against the fused built-in that
computes the same thing, and compare each rewrite, all rewrites together, and torch.compile
(default, max-autotune-no-cudagraphs, reduce-overhead on CUDA) with the original: identical
inputs, numerics per dtype, compile time apart, interleaved timing, speedup with its 95%
interval, device ops per call.  Each rewrite comes with a unified diff of your file
(apply it with `patch -p1` or `git apply`), proven first: the patched file is imported, the
model built the same way with the original's weights, and its outputs compared on the
example inputs and on fresh inputs with every parameter perturbed.  When symbolic tracing
fails, the patterns are found in the graph torch.compile captures.  The file is changed only
with --write (a .orig backup is kept), and only by a proven, faster rewrite.

NAME is a function, an nn.Module class (constructor arguments with --init-args), or a
factory returning a module (its arguments with --init-args too); --example FILE.py:FUNC names
a function returning the input tuple, or --inputs gives shapes (random inputs, seeded).

examples:
  opscope optimize model.py:RMSNorm --inputs 4096x4096:fp32
  opscope optimize model.py:attention --example model.py:example_inputs --format json
  opscope optimize model.py:Block --init-args 'n_embd=512, n_head=8' --inputs 8x64x512
  opscope optimize model.py:make_model --inputs 8x512 --budget 300 --write
  opscope optimize model.py:Block --inputs 8x512 --no-compile   # the source rewrites only
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from opscope.cli.output import add_format

    p.add_argument("target", metavar="FILE.py:NAME", help="the function or module to optimize")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--example", metavar="FILE.py:FUNC", help="a function returning the inputs")
    src.add_argument(
        "--inputs", metavar="SHAPE[:dtype],...", help="input shapes, e.g. 4x512:bfloat16,512"
    )
    p.add_argument("--device", help="cpu, cuda, cuda:1, xpu, neuron, ... (default: auto)")
    add_format(p, "optimize", output=False)
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time for all candidates; the cheap ones go first (default: 120)",
    )
    p.add_argument(
        "--init-args",
        metavar="ARGS",
        help="constructor (or factory) arguments, as a call writes them: 'n_embd=64, n_head=4'",
    )
    p.add_argument("--min-time", type=float, default=0.2, help="seconds of timed calls per variant")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch.set_num_threads while optimizing (default: one fewer than the cores on a "
        "CPU of 2 to 4 cores, else unchanged)",
    )
    p.add_argument(
        "--no-compile",
        action="store_true",
        help="try the source rewrites only, no torch.compile modes",
    )
    p.add_argument(
        "--write",
        action="store_true",
        help="apply the best verified rewrite to the file (keeps FILE.orig)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the document to FILE (FILE.md, .json, .txt names the format)",
    )


def run(args: argparse.Namespace) -> int:
    from opscope.cli.output import chosen_format, write_output
    from opscope.errors import OpscopeError, UsageError
    from opscope.experiment import optimize
    from opscope.optimize.loop import DEFAULT_BUDGET_S
    from opscope.optimize.target import load_object, load_target, parse_inputs
    from opscope.render.registry import renderer

    chosen = renderer("optimize", chosen_format(args, "optimize"))
    if args.budget is not None and args.budget < 0:
        raise UsageError(f"--budget {args.budget:g}: a number of seconds, 0 or more")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads {args.threads}: 1 or more")
    target, _file = load_target(args.target, args.init_args)
    if args.example:
        fn, _ = load_object(args.example)
        if not callable(fn):
            raise UsageError(f"--example {args.example}: not a function")
        try:
            inputs = fn()
        except Exception as exc:
            raise OpscopeError(
                f"--example {args.example}: calling it failed: {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(inputs, tuple):
            inputs = (inputs,)
    else:
        inputs = parse_inputs(args.inputs)
    quiet = args.format == "json"

    def progress(msg: str) -> None:
        if not quiet:
            print(f"opscope optimize: {msg}", file=sys.stderr, flush=True)

    def search(told: Callable[[str], None] | None) -> Optimization:
        return optimize(
            target,
            inputs,
            args.device,
            budget_s=args.budget or DEFAULT_BUDGET_S,
            min_run_s=args.min_time,
            modes=() if args.no_compile else None,
            threads=args.threads,
            progress=told,
        )

    if quiet:
        result = search(None)
    else:
        from rich.console import Console

        err = Console(stderr=True)
        with err.status("starting", spinner="dots") as status:

            def show(msg: str) -> None:
                status.update(msg)
                if not err.is_terminal:
                    progress(msg)

            result = search(show)
    doc = result.to_dict()
    if args.write:
        _write(result)
    write_output(chosen.render(doc), args.output)
    timed = (doc.get("baseline") or {}).get("latency_us")
    if doc["best"] is None and not doc["candidates"] and not timed and args.budget != 0:
        raise OpscopeError("nothing could be tried or timed (see the notes above)")
    return 0


def _write(result: object) -> None:
    """Apply the best candidate's proven rewrites to their files (a .orig backup first)."""
    from opscope.optimize.patch import write_patched

    data = result.data  # type: ignore[attr-defined]
    best = data.candidate(data.best) if data.best else None
    if best is None:
        print(
            "opscope optimize: --write: no candidate was faster and correct; the file is unchanged",
            file=sys.stderr,
        )
        return
    if best.kind == "compile":
        print(
            f"opscope optimize: --write: the best is {best.name}, which changes no source line; "
            f"the file is unchanged. Add where the model is built:\n  {best.patch}",
            file=sys.stderr,
        )
        return
    if not best.patch_verified:  # never: the best's patch is proven
        print(
            "opscope optimize: --write: the best's patch is not proven; the file is unchanged",
            file=sys.stderr,
        )
        return
    hunks = [h for h in data.hunks if h.pattern in best.patterns]
    files = sorted({h.file for h in hunks})
    for f in files:
        backup = write_patched(f, [h for h in hunks if h.file == f])
        print(
            f"opscope optimize: wrote {f} ({best.name}); the original is {backup}",
            file=sys.stderr,
        )
    if best.name == "compile+rewrites":
        line = best.patch.rstrip("\n").splitlines()[-1] if best.patch else ""
        print(
            f"opscope optimize: --write: then add where the model is built:\n  {line}",
            file=sys.stderr,
        )
