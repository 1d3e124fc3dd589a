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
interval, device ops per call.  Each rewrite comes with a unified diff of your file; the
file is changed only with --write (a .orig backup is kept), and only by a verified, faster
rewrite.

NAME is a function, an nn.Module subclass built without arguments, or a factory returning a
module; --example FILE.py:FUNC names a function returning the input tuple, or --inputs gives
shapes (random inputs, seeded).

examples:
  opscope optimize model.py:RMSNorm --inputs 4096x4096:fp32
  opscope optimize model.py:attention --example model.py:example_inputs --format json
  opscope optimize model.py:Block --inputs 8x512 --budget 300 --write
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", metavar="FILE.py:NAME", help="the function or module to optimize")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--example", metavar="FILE.py:FUNC", help="a function returning the inputs")
    src.add_argument(
        "--inputs", metavar="SHAPE[:dtype],...", help="input shapes, e.g. 4x512:bfloat16,512"
    )
    p.add_argument("--device", help="cpu, cuda, cuda:1, xpu, neuron, ... (default: auto)")
    p.add_argument("--format", choices=("text", "json", "md"), default="text")
    p.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="time for all candidates; the cheap ones go first (default: 120)",
    )
    p.add_argument("--min-time", type=float, default=0.2, help="seconds of timed calls per variant")
    p.add_argument(
        "--write",
        action="store_true",
        help="apply the best verified rewrite to the file (keeps FILE.orig)",
    )
    p.add_argument("-o", "--output", help="write the document to this file")


def run(args: argparse.Namespace) -> int:
    from opscope.cli.output import write_output
    from opscope.errors import OpscopeError
    from opscope.experiment import optimize
    from opscope.optimize.loop import DEFAULT_BUDGET_S, load_object, load_target, parse_inputs

    target, file, _is_module = load_target(args.target)
    if args.example:
        fn, _ = load_object(args.example)
        inputs = fn()
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
        _write(result, file)
    if args.format == "json":
        import orjson

        text = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    elif args.format == "md":
        text = result.to_markdown()
    else:
        text = str(result)
    write_output(text, args.output)
    if doc["best"] is None and not doc["candidates"]:
        raise OpscopeError("no candidate could be tried (see the notes above)")
    return 0


def _write(result: object, file: str) -> None:
    """Apply the best candidate's rewrites to ``file`` (a .orig backup first)."""
    from opscope.optimize.patch import write_patched

    data = result.data  # type: ignore[attr-defined]
    best = data.candidate(data.best) if data.best else None
    if best is None:
        print(
            "opscope optimize: --write: no candidate was faster and correct; the file is unchanged",
            file=sys.stderr,
        )
        return
    hunks = [h for h in data.hunks if h.file == file and h.pattern in best.patterns]
    if not hunks:
        print(
            f"opscope optimize: --write: the best is {best.name}, which changes no source "
            f"line; add where the model is built:\n  {best.patch}",
            file=sys.stderr,
        )
        return
    backup = write_patched(file, hunks)
    print(
        f"opscope optimize: wrote {file} ({best.name}); the original is {backup}", file=sys.stderr
    )
