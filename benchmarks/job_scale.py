"""Job scale: the local path against the cluster path on N ranks built from one real trace.

    python benchmarks/job_scale.py                       # 64 and 256 ranks, local:CPUs
    python benchmarks/job_scale.py --ranks 16,64 --workers 2
    python benchmarks/job_scale.py --trace cuda/a100_nccl_rank0_of2.json.gz --ranks 8

Rank ``r`` of N is the shared trace with ``distributedInfo`` set to rank ``r`` of N, every
timestamp shifted by a per-rank clock offset (up to 50 µs), every device kernel's duration
jittered by up to 2 % (a fixed seed), and one slow rank (N // 2) whose kernels take 30 %
longer.  Files go under ``--tmp`` (kept for the next run).  Each path runs in a child process
of its own with a fresh ingest cache (both ingest cold): ``opscope.analyze(folder)`` for the
local path, ``opscope.analyze(folder, cluster="local:W")`` for the cluster path (a
LocalCluster of W worker processes, its start timed apart).  Printed per N and path: wall
seconds, ranks per second, and the peak RSS of the process that builds the report (the
coordinator; ``resource.getrusage``, the workers not counted).  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
DEFAULT_TRACE = "cuda/sampled_world128/rank0.json.gz"


def build_job(seed: Path, ranks: int, out: Path) -> Path:
    """``ranks`` rank files from ``seed`` (see the module docstring) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    if len(list(out.glob("rank*.json.gz"))) == ranks:
        return out
    doc = json.loads(gzip.decompress(seed.read_bytes()))
    rng = random.Random(0)
    slow = ranks // 2
    for r in range(ranks):
        shift = rng.uniform(0.0, 50.0)
        events = []
        for ev in doc["traceEvents"]:
            e = dict(ev)
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] = float(e["ts"]) + shift
            if e.get("cat") == "kernel" and isinstance(e.get("dur"), (int, float)):
                factor = (1.3 if r == slow else 1.0) * rng.uniform(0.98, 1.02)
                e["dur"] = float(e["dur"]) * factor
            events.append(e)
        rank_doc = {**doc, "traceEvents": events}
        info = dict(doc.get("distributedInfo") or {"backend": "nccl"})
        rank_doc["distributedInfo"] = {**info, "rank": r, "world_size": ranks}
        (out / f"rank{r}.json.gz").write_bytes(gzip.compress(json.dumps(rank_doc).encode(), 1))
    return out


def child(folder: str, cluster: str | None) -> dict[str, Any]:
    """One path, in this (child) process: its times and the peak RSS."""
    import opscope

    start = time.perf_counter()
    started = 0.0
    if cluster is None:
        report = opscope.analyze(folder)
    else:
        import logging

        from distributed import Client, LocalCluster

        workers = int(cluster.partition(":")[2])
        local = LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = Client(local)
        started = time.perf_counter() - start
        start = time.perf_counter()
        report = opscope.analyze(folder, cluster=client)
        client.close()
        local.close()
    wall = time.perf_counter() - start
    doc = report.to_dict()
    return {
        "wall_s": wall,
        "cluster_start_s": started,
        "ranks": len(doc["ranks"]),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_child(folder: Path, cluster: str | None) -> dict[str, Any]:
    env = {**os.environ, "OPSCOPE_CACHE_DIR": tempfile.mkdtemp(prefix="job-scale-cache-")}
    cmd = [sys.executable, __file__, "--child", str(folder)]
    if cluster:
        cmd += ["--cluster", cluster]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"child failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default=DEFAULT_TRACE, help="a shared trace, relative to traces/")
    ap.add_argument("--ranks", default="64,256", help="comma-separated rank counts")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--tmp", default=os.path.join(tempfile.gettempdir(), "opscope-job-scale"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--cluster", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.cluster)))
        return
    seed = SHARED / args.trace
    if not seed.is_file():
        raise SystemExit(f"{seed}: not there (the shared traces are needed)")
    print(f"seed {args.trace}; cluster: LocalCluster of {args.workers} worker processes")
    print(f"{'ranks':>6} {'path':>8} {'wall s':>8} {'ranks/s':>8} {'start s':>8} {'peak RSS':>10}")
    for n in [int(x) for x in args.ranks.split(",") if x.strip()]:
        folder = build_job(seed, n, Path(args.tmp) / f"{Path(args.trace).name}-{n}")
        for name, cluster in (("local", None), ("cluster", f"local:{args.workers}")):
            r = run_child(folder, cluster)
            assert r["ranks"] == n, r
            print(
                f"{n:>6} {name:>8} {r['wall_s']:>8.2f} {n / r['wall_s']:>8.1f} "
                f"{r['cluster_start_s']:>8.2f} {r['peak_rss_mib']:>7.0f} MiB"
            )


if __name__ == "__main__":
    main()
