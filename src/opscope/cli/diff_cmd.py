"""opscope diff: diff two traces or run folders (``opscope compare``, its former name, still works
for one release)."""

from __future__ import annotations

import argparse
from pathlib import Path

from opscope.cli.output import (
    add_format,
    add_max_inflate,
    chosen_format,
    positive_int,
    text_width,
)

HELP = "diff two traces or run folders: per op, per kernel, timeline and findings"
DESCRIPTION = """\
Diff two traces (files, run folders, or folders of ranks): per op - calls, device self time and
CPU self time in A and B and the deltas (which add up to the difference of the totals) - ops only
in A or only in B, kernels likewise, the timeline summary's deltas, and the findings resolved and
new.  Traces from different devices may be diffed; the output says so.  ('opscope compare' is
this command's former name, accepted for one release; opscope.compare() in Python benchmarks
variants of a function.)

examples:
  opscope diff opscope-runs/...-naive opscope-runs/...-compiled
  opscope diff before.json.gz after.json.gz --format json > diff.json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="baseline: trace file, run folder, or folder of ranks")
    p.add_argument("b", help="the changed run")
    add_format(p, "diff")
    add_max_inflate(p)
    p.add_argument(
        "--top", type=positive_int, default=20, help="rows per table (default: %(default)s)"
    )


def run(args: argparse.Namespace) -> int:
    from opscope.cli.prepare import prepare
    from opscope.render.registry import renderer
    from opscope.service import Workspace

    chosen = renderer("diff", chosen_format(args, "diff"))
    prepare(args.a, args.b, command="diff")
    ws = Workspace()
    for handle, path in (("a", args.a), ("b", args.b)):
        # the diff reads the two reports, not the events: each trace's args text is kept
        # packed while it is analysed (Trace.pack_args)
        ws.open(Path(path), handle=handle).pack_args = True
    data = ws.diff("a", "b")
    options = (
        {"top": args.top} if chosen.format != "text" else {"top": args.top, "width": text_width()}
    )
    from opscope.cli.output import write_output

    write_output(chosen.render(data, **options), args.output)
    return 0
