"""Trace ingestion benchmark: opscope vs bare ``orjson.loads`` vs HTA, interleaved.

    python benchmarks/ingest.py                       # largest shared traces + ~1 GB synthetic
    python benchmarks/ingest.py --synthetic-mb 200 --hta-python /tmp/hta-venv/bin/python

Each measurement runs in its own subprocess (this script with ``--worker``), which reports its
wall time and its own peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``), so one
measurement's memory never hides another's.  The contestants are run in turn for each file
(interleaved), ``--repeat`` times, and the best time of each is kept.

* orjson: read the file, gunzip if needed, ``orjson.loads`` (no table, no links).
* opscope: ``opscope.trace.load(path, cache=False)``: file -> linked, queryable event table.
  Its "RSS ops" is its process, threads included; "RSS wrk" the largest of the worker
  processes it forks for one large file, which it does only without the C scanner
  (``OPSCOPE_NATIVE=0`` or no compiler at install; 0 otherwise).
* opscope reopen: ``load(path)`` once to fill the cache (timed as "ingest+write"), then again.
* HTA: ``hta.trace_analysis.TraceAnalysis(trace_dir=...)`` in the venv given by
  ``--hta-python`` (HTA's PyPI name is ``traceinsight``; keep it out of opscope's venv so it
  never pulls a CUDA torch).  Skipped when that interpreter is missing.

Ratios are printed, never asserted.  Synthetic traces are written under ``--tmp``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
DEFAULT_FILES = (
    "cuda/a100_cudagraph_rank0_of16.json.gz",
    "rocm/mi300x_models/owlv2_large.json.gz",
)


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def _child_rss_mb() -> float:
    """Peak RSS of the largest finished child (opscope's worker processes for one file)."""
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def worker(kind: str, path: str) -> dict[str, Any]:
    """Run one measurement in this (fresh) process."""
    if kind == "orjson":
        import zlib

        import orjson

        t0 = time.perf_counter()
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = zlib.decompress(data, 31)
        doc = orjson.loads(data)
        dt = time.perf_counter() - t0
        events = len(doc["traceEvents"] if isinstance(doc, dict) else doc)
        return {"s": dt, "events": events, "rss_mb": _rss_mb()}
    if kind in ("opscope", "opscope-cached"):
        from opscope.trace import load

        t0 = time.perf_counter()
        t = load(path, cache=kind == "opscope-cached")
        dt = time.perf_counter() - t0
        return {
            "s": dt,
            "events": len(t),
            "rss_mb": _rss_mb(),
            "worker_rss_mb": _child_rss_mb(),
            "cached": t.meta.cached,
        }
    if kind == "hta":
        from hta.trace_analysis import TraceAnalysis  # type: ignore[import-not-found]

        with tempfile.TemporaryDirectory() as d:
            name = Path(path).name
            if not name.startswith("rank"):
                name = "rank0_" + name
            os.symlink(path, Path(d) / name)
            t0 = time.perf_counter()
            ta = TraceAnalysis(trace_dir=d)
            dt = time.perf_counter() - t0
            df = ta.t.get_trace(ta.t.get_ranks()[0])
            return {"s": dt, "events": len(df), "rss_mb": _rss_mb()}
    raise SystemExit(f"unknown worker {kind}")


def measure(python: str, kind: str, path: Path, env: dict[str, str]) -> dict[str, Any] | None:
    cmd = [python, str(Path(__file__).resolve()), "--worker", kind, str(path)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
        print(f"  {kind} failed on {path.name}: {tail[0]}", file=sys.stderr)
        return None
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def build_synthetic(mb: int, out: Path, seed_trace: Path) -> Path:
    """A Kineto-style trace of about ``mb`` MB made by repeating a real trace's steps.

    Every repetition shifts timestamps past the previous one and offsets correlation and
    External ids, so the links stay one-to-one.  Written as it goes: never held whole.
    """
    path = out / f"synthetic_{mb}mb.json"
    if path.is_file() and path.stat().st_size >= mb * 1_000_000 * 0.95:
        return path
    import orjson

    raw = seed_trace.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    events = doc["traceEvents"]
    meta = {k: v for k, v in doc.items() if k != "traceEvents"}
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t_min = min(e["ts"] for e in timed)
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - t_min + 1000
    lines = [orjson.dumps(e) for e in events]
    per_rep = sum(len(x) + 4 for x in lines)
    reps = max(1, int(mb * 1_000_000 // per_rep))
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as fh:
        head = orjson.dumps(meta)[:-1]
        fh.write(head + (b', "traceEvents": [\n' if len(head) > 1 else b'"traceEvents": [\n'))
        first = True
        for r in range(reps):
            shift = r * span
            off = r * 10_000_000
            for e in events:
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = round(e2["ts"] + shift, 3)
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + off
                a = e2.get("args")
                if isinstance(a, dict):
                    a = dict(a)
                    for k in ("correlation", "External id"):
                        if isinstance(a.get(k), int):
                            a[k] = a[k] + off
                    e2["args"] = a
                fh.write((b"" if first else b",\n") + b"  " + orjson.dumps(e2))
                first = False
        fh.write(b"\n]}\n")
    tmp.rename(path)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--synthetic-mb", type=int, default=1000, help="0 to skip (default 1000)")
    ap.add_argument("--tmp", default="/tmp/opscope-bench", help="where synthetic files go")
    ap.add_argument("--repeat", type=int, default=1, help="runs per contestant (best kept)")
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    ap.add_argument("--hta-max-mb", type=int, default=200, help="skip HTA above this size")
    ap.add_argument("files", nargs="*", help="trace files (default: largest shared traces)")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1])))
        return 0

    files = [Path(f).resolve() for f in args.files] or [
        SHARED / f for f in DEFAULT_FILES if (SHARED / f).is_file()
    ]
    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    if args.synthetic_mb and SHARED.is_dir():
        seed = SHARED / "cuda/a100_nccl_rank0_of2.json.gz"
        t0 = time.perf_counter()
        files.append(build_synthetic(args.synthetic_mb, tmp, seed))
        print(f"synthetic trace ready in {time.perf_counter() - t0:.1f}s: {files[-1]}")
    have_hta = Path(args.hta_python).is_file()
    if not have_hta:
        print(f"HTA skipped: {args.hta_python} not found (pip install traceinsight there)")
    env = dict(os.environ, OPSCOPE_CACHE_DIR=str(tmp / "cache"))
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    rows = []
    for path in files:
        raw = path.read_bytes()[:2] == b"\x1f\x8b" if path.stat().st_size else False
        if raw:
            with gzip.open(path, "rb") as g:
                size = sum(len(b) for b in iter(lambda: g.read(1 << 24), b""))
        else:
            size = path.stat().st_size
        mb = size / 1e6
        best: dict[str, dict[str, Any]] = {}
        kinds = ["orjson", "opscope"]
        if have_hta and mb <= args.hta_max_mb:
            kinds.append("hta")
        for rep in range(args.repeat):
            order = kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]
            for kind in order:
                python = args.hta_python if kind == "hta" else sys.executable
                m = measure(python, kind, path, env)
                if m and (kind not in best or m["s"] < best[kind]["s"]):
                    best[kind] = m
        shutil.rmtree(tmp / "cache", ignore_errors=True)
        fill = measure(sys.executable, "opscope-cached", path, env)
        reopen = measure(sys.executable, "opscope-cached", path, env)
        rows.append((path, mb, best, fill, reopen))

    def f(m: dict[str, Any] | None, key: str, fmt: str = "{:.2f}") -> str:
        return fmt.format(m[key]) if m and key in m else "-"

    head = (
        f"{'file':42} {'events':>9} {'MB':>7} {'opscope s':>9} {'orjson s':>9} {'HTA s':>8} "
        f"{'ops/orj':>7} {'HTA/ops':>7} {'RSS ops':>8} {'RSS wrk':>8} {'RSS orj':>8} "
        f"{'RSS HTA':>8} "
        f"{'reopen s':>8} {'ingest/reopen':>13}"
    )
    print()
    print(head)
    print("-" * len(head))
    for path, mb, best, fill, reopen in rows:
        o, j, h = best.get("opscope"), best.get("orjson"), best.get("hta")
        ratio = f"{o['s'] / j['s']:.2f}" if o and j else "-"
        hta_ratio = f"{h['s'] / o['s']:.1f}" if o and h else "-"
        re_ratio = f"{o['s'] / reopen['s']:.1f}" if o and reopen else "-"
        print(
            f"{path.name[:42]:42} {f(o, 'events', '{:d}'):>9} {mb:7.1f} {f(o, 's'):>9} "
            f"{f(j, 's'):>9} {f(h, 's'):>8} {ratio:>7} {hta_ratio:>7} "
            f"{f(o, 'rss_mb', '{:.0f}'):>8} {f(o, 'worker_rss_mb', '{:.0f}'):>8} "
            f"{f(j, 'rss_mb', '{:.0f}'):>8} "
            f"{f(h, 'rss_mb', '{:.0f}'):>8} {f(reopen, 's'):>8} {re_ratio:>13}"
        )
        if fill:
            print(f"{'':42}   first load with cache write: {fill['s']:.2f}s")
    print(
        "\nRSS in MB (peak of each measurement's own process); ratios: lower ops/orj is "
        "better, higher HTA/ops and ingest/reopen are better."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
