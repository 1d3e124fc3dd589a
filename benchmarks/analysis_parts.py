"""Analysis cost per part against ingest, at three sizes of one trace.

    python benchmarks/analysis_parts.py                      # V100 trace: 1x, ~1M, ~3M events
    python benchmarks/analysis_parts.py --trace rocm/mi300x_models/owlv2_large.json.gz
    python benchmarks/analysis_parts.py --sizes 1 300000 --repeat 3
    python benchmarks/analysis_parts.py --cli-memory     # with `opscope report`'s memory settings

The larger sizes are the shared trace tiled: each copy's timestamps shifted past the previous
copy, its correlation / External / flow ids and profiler step numbers offset, so links stay
one-to-one (files kept under ``--tmp`` for the next run).  For each size the script loads the
trace (``load(path, cache=False)``: the ingest time) and then times every part of the report
in the order ``analyze`` needs them, each on first use: the event index and derived tables,
the op/kernel tables, timeline, steps, roofline, each finding rule, the critical path (graph,
section, finding savings), the report dict.  Printed:
milliseconds, nanoseconds per event, and each part's ratio to the ingest of the same run; the
best of ``--repeat`` runs (fresh loads; at most two above 200k events) is kept.  At a million
events and more, wall times move from run to run with the kernel's page-fault work (fresh
memory for Arrow's buffers): compare sizes on the per-event columns, and parts within a run.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
DEFAULT_TRACE = "cuda/diff_pair/test_v100.json.gz"
ID_KEYS = ("correlation", "External id", "Profiler Event Index", "Ev Idx", "Record function id")


def tile(seed: Path, n_events: int, out: Path) -> Path:
    """``seed`` repeated until about ``n_events`` events, written as JSON (never held whole)."""
    import orjson

    raw = seed.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = orjson.loads(raw)
    events = doc["traceEvents"]
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") == "X"]
    reps = max(1, round(n_events / max(len(timed), 1)))
    path = out / f"{seed.name.split('.')[0]}_x{reps}.json"
    if path.is_file():
        return path
    meta = {k: v for k, v in doc.items() if k != "traceEvents"}
    t0 = min(e["ts"] for e in timed)
    span = max(e["ts"] + (e.get("dur") or 0) for e in timed) - t0 + 1000
    steps = [
        int(e["name"][13:]) for e in events if str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    step_span = (max(steps) - min(steps) + 1) if steps else 0
    tmp = path.with_suffix(".tmp")
    out.mkdir(parents=True, exist_ok=True)
    with tmp.open("wb") as fh:
        head = orjson.dumps(meta)[:-1]
        fh.write(head + (b',"traceEvents":[\n' if len(head) > 1 else b'"traceEvents":[\n'))
        for r in range(reps):
            off = r * 10_000_000
            for i, e in enumerate(events):
                e2 = dict(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = round(e2["ts"] + r * span, 3)
                if isinstance(e2.get("id"), int):
                    e2["id"] += off
                name = e2.get("name")
                if r and isinstance(name, str) and name.startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{int(name[13:]) + r * step_span}"
                a = e2.get("args")
                if isinstance(a, dict):
                    a = dict(a)
                    for k in ID_KEYS:
                        if isinstance(a.get(k), int) and a[k] >= 0:
                            a[k] += off
                    e2["args"] = a
                fh.write((b",\n" if r or i else b"") + orjson.dumps(e2))
        fh.write(b"\n]}\n")
    tmp.rename(path)
    return path


def _run(path: Path, timed: Any, *, lazy: bool = False, pack: bool = False) -> int:
    """One fresh load and every part of the report after it (``lazy``: the report dict as
    ``opscope report`` makes it, its large lists written when the renderer reads them;
    ``pack``: the trace held after the load as ``opscope report`` holds it,
    ``Trace.compact``: its ``args`` packed, its string columns of the index's codes, its
    links held as rows)."""
    from opscope.analysis import pipeline
    from opscope.analysis.findings import Context, rules
    from opscope.analysis.kernels import kernel_table
    from opscope.analysis.optable import op_table
    from opscope.analysis.report import Report
    from opscope.analysis.roofline import roofline as roofline_of_report
    from opscope.analysis.steps import step_stats
    from opscope.analysis.timeline import timeline_summary
    from opscope.trace import load

    tr = timed("load (ingest)", lambda: load(path, cache=False))
    if pack:
        timed("pack args", tr.pack_args)
        timed("share codes", tr.share_codes)
        timed("hold links", tr.hold_links)
    timed("derived.ops", lambda: tr.ops)
    timed("derived.kernels", lambda: tr.kernels)
    timed("device", lambda: tr.device)
    ot = timed("op_table", lambda: op_table(tr, None))
    kt = timed("kernel_table", lambda: kernel_table(tr, None))
    tls = timed("timeline", lambda: timeline_summary(tr, None))
    st = timed("steps", lambda: step_stats(tr))
    rep = Report(trace=tr, ops=ot, kernels=kt, timeline=tls, steps=st, window_steps=None)
    rep.run_info = timed("run_info", lambda: pipeline.run_info_of(tr))
    rep.roofline = timed("roofline", lambda: roofline_of_report(rep, overrides=None))
    # as the report: the derived tables go once the tables have read them
    timed("drop derived", tr.drop_derived)
    ctx = Context(trace=tr, op_table=ot, timeline=tls, steps=st, window_steps=None)
    found = []
    for rule in rules():
        found += timed(f"rule {rule.name}", lambda rule=rule: rule.run(ctx))
    rep.findings = found
    from opscope.analysis.critical import section as C

    graph = timed("critical path graph", lambda: C.rank_graph(tr, None, []))
    rep.extra["critical_path"] = timed("critical path section", lambda: C.section(tr, graph))
    timed("finding savings", lambda: C.finding_savings(tr, graph, rep.findings))
    timed("to_dict", lambda: rep.to_dict(lazy=lazy))
    return len(tr)


def measure(path: Path, repeat: int) -> tuple[int, dict[str, float]]:
    """Best time (s) of each part over ``repeat`` fresh loads."""
    best: dict[str, float] = defaultdict(lambda: float("inf"))

    def timed(label: str, fn: Any) -> Any:
        t = time.perf_counter()
        out = fn()
        best[label] = min(best[label], time.perf_counter() - t)
        return out

    n = 0
    for _ in range(repeat):
        n = _run(path, timed)
    return n, dict(best)


# the parts this rework owns (the event index is built inside the first of them)
OWN = ("derived.ops", "derived.kernels", "rule ")


def report(label: str, n: int, best: dict[str, float]) -> None:
    ingest = best["load (ingest)"]
    print(f"\n{label}: {n} events, ingest {ingest * 1e3:.0f} ms ({ingest * 1e9 / n:.0f} ns/event)")
    print(f"  {'part':26} {'ms':>9} {'ns/event':>9} {'x ingest':>9}")
    total = own = 0.0
    for k, v in best.items():
        if k == "load (ingest)":
            continue
        total += v
        own += v if k.startswith(OWN) else 0.0
        print(f"  {k:26} {v * 1e3:9.1f} {v * 1e9 / n:9.0f} {v / ingest:9.3f}")
    for name, v in (("all after load", total), ("of which index/derived/rules", own)):
        print(f"  {name:26} {v * 1e3:9.1f} {v * 1e9 / n:9.0f} {v / ingest:9.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=DEFAULT_TRACE, help="under ../shared/traces")
    ap.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[1, 1_000_000, 3_000_000],
        help="events per size; 1 means the trace itself",
    )
    ap.add_argument("--repeat", type=int, default=3, help="fresh loads per size (best kept)")
    ap.add_argument("--tmp", default=str(Path(tempfile.gettempdir()) / "opscope-bench"))
    ap.add_argument(
        "--cli-memory",
        action="store_true",
        help="the memory settings `opscope report` runs with (docs/trace-engine.md)",
    )
    args = ap.parse_args()
    if args.cli_memory:
        from opscope.cli.main import trace_reader_memory

        trace_reader_memory()
    os.environ.setdefault("OPSCOPE_CACHE_DIR", tempfile.mkdtemp())
    seed = SHARED / args.trace
    if not seed.is_file():
        print(f"no trace {seed}", file=sys.stderr)
        return 1
    out = Path(args.tmp)
    out.mkdir(parents=True, exist_ok=True)
    for size in args.sizes:
        path = seed if size <= 1 else tile(seed, size, out)
        repeat = args.repeat if size <= 200_000 else min(args.repeat, 2)
        n, best = measure(path, repeat)
        report(path.name, n, best)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
