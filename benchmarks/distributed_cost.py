"""What the distributed analysis adds to one rank's report: the collective records and the
``distributed`` section, against the rest of the analysis, on the shared traces with
communication (goal: at most 20 %).  Best of three fresh loads; nothing is asserted.

    python benchmarks/distributed_cost.py            # the shared NCCL/RCCL traces
    python benchmarks/distributed_cost.py FILE ...
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from opscope.analysis.collectives import collective_records
from opscope.analysis.distributed import distributed_section
from opscope.analysis.job_report import rank_report
from opscope.analysis.pipeline import analyze
from opscope.trace import load

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
DEFAULT = (
    "cuda/a100_nccl_rank0_of2.json.gz",
    "rocm/mi300x_resnet_act_checkpoint_rank0_of8.json.gz",
    "cuda/diff_pair/test_v100.json.gz",
)


def main() -> int:
    paths = [Path(p) for p in sys.argv[1:]] or [
        SHARED / p for p in DEFAULT if (SHARED / p).is_file()
    ]
    if not paths:
        print("no traces (../shared/traces absent?): pass files", file=sys.stderr)
        return 1
    for p in paths:
        whole = part = float("inf")
        for _ in range(3):
            trace = load(p, cache=False)
            t0 = time.perf_counter()
            report = analyze(trace)
            report.to_dict()
            whole = min(whole, time.perf_counter() - t0)
            t0 = time.perf_counter()
            collective_records(trace)
            distributed_section([rank_report(report)])
            part = min(part, time.perf_counter() - t0)
        print(
            f"{p.name:50} analysis {whole * 1e3:7.1f} ms, of it distributed {part * 1e3:5.1f} ms"
            f" = {100 * part / max(whole - part, 1e-9):4.1f} % of the rest (goal <= 20 %)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
