"""opscope demo: the RMSNorm profiling study, end to end, on the device at hand."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opscope.analysis.report import Report
    from opscope.bench.compare import VariantOutcome
    from opscope.study.rmsnorm import StudyResult

HELP = "run the RMSNorm study (naive vs torch.rms_norm vs torch.compile) on this device"
DESCRIPTION = """\
Reproduce the reference profiling study on the device at hand: RMSNorm three ways -
naive eager ops, torch.rms_norm, and torch.compile of the naive function - on identical
inputs, at the study's shape (4x512 bf16) and a large one (4096x4096 fp32).  Each variant is
checked against naive, timed in steady state (median ± IQR), and profiled with the same
schedule (wait 2, warmup 1, active 1); compile time is reported apart.  Each variant's run
folder holds run.json, trace.json.gz, report.json and report.html.

examples:
  opscope demo
  opscope demo --shape 4x512:bf16 --shape 8192x8192:fp32 --out /tmp/runs
  opscope demo --device cuda --format json > demo.json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from opscope.cli.output import add_format

    p.add_argument("--device", help="cpu, cuda, cuda:1, xpu, mtia, neuron, ... (default: auto)")
    p.add_argument(
        "--shape",
        action="append",
        metavar="RxC[:dtype]",
        help="a shape to study, repeatable (default: 4x512:bf16 and 4096x4096:fp32)",
    )
    p.add_argument(
        "--out", default="opscope-runs", help="where run folders go (default: %(default)s)"
    )
    add_format(p, "demo", output=False)
    p.add_argument(
        "--variants",
        default="naive,builtin,compiled",
        help="comma-separated subset of naive,builtin,compiled (default: all three)",
    )
    p.add_argument(
        "--min-time",
        type=float,
        default=0.3,
        help="seconds of timed calls per variant for the latency statistics (default: %(default)s)",
    )


class _ReportWriter:
    """Writes each variant's report.json/report.html as soon as it is analysed (so a later
    failure loses nothing), then rewrites them once the whole study is known, adding the
    comparison table and its reading."""

    def __init__(self) -> None:
        self.reports: dict[str, Report] = {}

    def __call__(self, report: Report, run_dir: Path, variant: VariantOutcome) -> None:
        self.reports[str(run_dir)] = report
        self._write(report, run_dir, {"variant": variant.name})

    @staticmethod
    def _write(report: Report, run_dir: Path, study: dict[str, Any]) -> None:
        from opscope.capture.runfolder import write_json
        from opscope.explorer import static_html

        data = report.to_dict()
        data["study"] = study
        write_json(run_dir / "report.json", data)
        (run_dir / "report.html").write_text(
            static_html.render_html(data, trace=report.trace), encoding="utf-8"
        )

    def finish(self, result: StudyResult) -> None:
        from opscope.study.rmsnorm import reading

        lines = reading(result)
        for i, shape in enumerate(result.shapes):
            study = shape.to_dict()
            study["reading"] = [lines[i]] if i < len(lines) else []
            for v in shape.variants:
                report = self.reports.get(v.run_dir or "")
                if report is not None and v.run_dir:
                    self._write(report, Path(v.run_dir), {**study, "variant": v.name})


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from opscope.errors import OpscopeError
    from opscope.study.rmsnorm import DEFAULT_SHAPES, VARIANTS, parse_shape, run_study

    shapes = tuple(parse_shape(s) for s in args.shape) if args.shape else DEFAULT_SHAPES
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or "naive" not in variants:
        raise OpscopeError(
            f"--variants must include naive and only {', '.join(VARIANTS)} (got {args.variants})"
        )
    writer = _ReportWriter()
    err = Console(stderr=True)
    with err.status("starting", spinner="dots") as status:

        def progress(msg: str) -> None:
            status.update(msg)
            if not err.is_terminal:
                print(f"opscope demo: {msg}", file=sys.stderr, flush=True)

        result = run_study(
            device=args.device,
            shapes=shapes,
            out=args.out,
            variants=variants,
            progress=progress,
            min_run_s=args.min_time,
            on_report=writer,
        )
    writer.finish(result)
    from opscope.cli.output import chosen_format, write_output
    from opscope.render.registry import renderer

    chosen = renderer("demo", chosen_format(args, "demo"))
    if chosen.console is not None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=100)
        chosen.print_to(console, result.to_dict())
    else:
        write_output(chosen.render(result.to_dict()), None)
    return 0 if all(v.error is None for s in result.shapes for v in s.variants) else 1
