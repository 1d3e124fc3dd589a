"""Full-report speed on the largest shared traces, against baselines measured in the same run.

For each trace: the time to decode its JSON with bare ``orjson.loads`` (the floor any JSON-based
tool pays), opscope's ingest (no cache), and ``analyze()`` (op tables, kernels, timeline, steps
and every finding rule) on the loaded trace.  Ratios, not absolute times, are the claim: this
machine is noisy.  Run::

    python benchmarks/report.py            # the largest traces in ../shared/traces
    python benchmarks/report.py FILE...    # your own

Target (the project's analysis issue): a full report in under 1 s for a ~100k-event trace.
"""

from __future__ import annotations

import gzip
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

from opscope.analysis.report import analyze
from opscope.trace import load

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
DEFAULT = [
    "rocm/mi300x_models/owlv2_large.json.gz",
    "cuda/a100_cudagraph_rank0_of16.json.gz",
    "cuda/ns_resolution.pt.trace.json.gz",
    "rocm/mi300x_resnet_act_checkpoint_rank0_of8.json.gz",
]


def best_of(fn: object, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return min(times)


def _timed(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [SHARED / p for p in DEFAULT]
    paths = [p for p in paths if p.exists()]
    if not paths:
        print("no traces found (../shared/traces absent?)", file=sys.stderr)
        return 1
    os.environ["OPSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="opscope-bench-")
    print(
        f"{'trace':46} {'events':>8} {'orjson s':>9} {'ingest s':>9} {'analyze s':>10} "
        f"{'report s':>9} {'report/orjson':>14}"
    )
    ratios = []
    for p in paths:
        raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        t_json = best_of(lambda raw=raw: orjson.loads(raw))
        t_load = best_of(lambda p=p: load(p, cache=False))
        trace = load(p, cache=False)
        # a fresh trace each time: analyze() caches derived tables on the Trace it is given
        fresh = [load(p, cache=False) for _ in range(3)]
        t_an = min(_timed(lambda t=t: analyze(t).to_dict()) for t in fresh)
        del fresh
        total = t_load + t_an
        ratios.append(total / t_json)
        name = str(p.relative_to(SHARED)) if p.is_relative_to(SHARED) else p.name
        print(
            f"{name:46} {len(trace):8d} {t_json:9.3f} {t_load:9.3f} {t_an:10.3f} "
            f"{total:9.3f} {total / t_json:13.1f}x"
        )
    print(f"median report/orjson ratio: {statistics.median(ratios):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
