"""Where a report's memory goes: bytes per event held after each part of the analysis.

    python benchmarks/memory_parts.py                         # 1M events (a tiled A100 trace)
    python benchmarks/memory_parts.py --sizes 1000000 10000000
    python benchmarks/memory_parts.py --file /tmp/opscope-scale/a100_nccl_rank0_of2_x37.json

The companion of ``analysis_parts.py`` (which times the same parts): each size runs in a
fresh child process with the memory settings ``opscope report`` runs with
(``cli.main.trace_reader_memory(heap_only=True)``: Arrow on the C library's allocator, one
glibc arena, no mmap) and the analysis on one thread (``OPSCOPE_ANALYSIS_THREADS=1``, so
that each part's memory is its own), the trace's ``args`` packed after the load, its string
columns made of the index's codes and its links held as rows, as the report has them
(``Trace.compact``).  After each part it reads:

* ``live``: bytes in use, glibc's (``mallinfo2``: ``uordblks + hblkhd``) plus Arrow's jemalloc
  pool (where the ingest builds the event table, ``trace.mempool``);
* ``heap``: glibc's heap (``arena + hblkhd``): live plus freed memory kept for reuse;
* ``anon``, ``rss`` and ``hwm``: the process's anonymous resident memory, its whole RSS and
  its peak RSS since the part began (``/proc/self/status``).

The last part renders the report document (made lazily, as ``opscope report`` makes it) to
JSON in pieces, as ``opscope report --format json`` writes it.  Before each part the peak RSS
is set back to the RSS (``/proc/self/clear_refs``), so each part's own peak is read too.
Printed per part: live, heap and anon after it (MiB), its peak, its temporaries (its peak
less its RSS after it: memory it held only while it ran), and its growth of ``live`` in bytes
per event; at the end what the live bytes are: the event table (Arrow's ``nbytes``, and the
packed ``args``), the event
index's arrays (those not views of the table), the critical path's graph arrays, and the
rest (op tables, findings, the path's section, caches).  The baseline printed beside it is a
whole ``opscope report FILE --format json`` process on the same file (its peak RSS from
``os.wait4``), and the goal of issue "Performance": <= 400 bytes of peak RSS per event.
Nothing is asserted; glibc's figures need glibc 2.33 or later (else only RSS is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from analysis_parts import _run, tile  # noqa: E402
from report import _run as run_process  # noqa: E402

DEFAULT_TRACE = "cuda/a100_nccl_rank0_of2.json.gz"
GOAL_BYTES_PER_EVENT = 400
MIB = 1 << 20


class Meter:
    """Reads the process's memory (see the module docstring)."""

    def __init__(self) -> None:
        from opscope.trace.heap import mallinfo2

        self.info: Any = mallinfo2()  # None: not glibc, or older than 2.33

    @staticmethod
    def reset_peak() -> bool:
        """The process's peak RSS (``VmHWM``) set back to its RSS now (Linux
        ``/proc/self/clear_refs``), so that the next read gives the peak of what runs between;
        False where that cannot be done (the peak then runs on from the start)."""
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            return False
        return True

    def read(self) -> dict[str, float]:
        import pyarrow as pa

        status: dict[str, float] = {}
        with open("/proc/self/status") as fh:
            for line in fh:
                key = line.split(":", 1)[0]
                if key in ("RssAnon", "VmRSS", "VmHWM"):
                    status[key] = int(line.split()[1]) * 1024
        out = {
            "anon": status.get("RssAnon", 0.0),
            "rss": status.get("VmRSS", 0.0),
            "hwm": status.get("VmHWM", 0.0),
        }
        try:
            arrow = float(pa.jemalloc_memory_pool().bytes_allocated())
        except NotImplementedError:
            arrow = 0.0
        if self.info is not None:
            m = self.info()
            out["live"] = float(m.uordblks + m.hblkhd) + arrow
            out["heap"] = float(m.arena + m.hblkhd)
            out["arrow"] = arrow
        return out


def child(path: Path) -> dict[str, Any]:
    """Every part of the analysis of ``path`` in this process, with the memory after each."""
    from opscope.cli.main import trace_reader_memory

    trace_reader_memory(heap_only=True)
    os.environ["OPSCOPE_ANALYSIS_THREADS"] = "1"
    meter = Meter()
    rows: list[dict[str, Any]] = [{"part": "start", **meter.read()}]
    kept: dict[str, Any] = {}

    def measured(label: str, fn: Any) -> Any:
        reset = meter.reset_peak()
        out = fn()
        if label == "load (ingest)":
            kept["trace"] = out
        elif label == "critical path graph":
            kept["graph"] = out
        elif label == "to_dict":
            kept["doc"] = out
        after = meter.read()
        # the part's own peak (its temporaries included)
        peak = after["hwm"] if reset else float("nan")
        rows.append({"part": label, **after, "peak": peak})
        return out

    n = _run(path, measured, lazy=True, pack=True)
    from opscope.render.json_render import render_json_chunks

    doc = kept.pop("doc")
    measured("JSON written", lambda: sum(len(b) for b in render_json_chunks(doc)))
    return {"events": n, "rows": rows, "held": held(kept)}


def held(kept: dict[str, Any]) -> dict[str, float]:
    """Bytes of the event table, the index's own arrays and the graph's arrays."""
    import numpy as np

    def own(v: Any) -> int:
        return v.nbytes if isinstance(v, np.ndarray) and v.base is None else 0

    trace = kept["trace"]
    index = 0
    for v in vars(trace.index).values():  # its arrays, and those of its parts (codes, shapes)
        index += own(v) + sum(own(x) for x in getattr(v, "__dict__", {}).values())
    graph = kept.get("graph")
    arrays: dict[int, int] = {}
    if graph is not None:
        for v in vars(graph).values():
            for a in v if isinstance(v, tuple) else (v,):
                if isinstance(a, np.ndarray):
                    arrays[id(a)] = a.nbytes
    packed = trace.index.packed_args
    return {
        # the table without its args, and the args packed (as `opscope report` holds them)
        "table": float(trace.events.nbytes + (0 if packed is None else packed.nbytes)),
        "index": float(index),
        "graph": float(sum(arrays.values())),
    }


def whole_report(path: Path, tmp: Path) -> float:
    """Peak RSS (bytes) of a whole ``opscope report`` process on ``path``, cold cache."""
    env = dict(os.environ, OPSCOPE_CACHE_DIR=str(tmp / "cache"))
    cmd = [sys.executable, "-m", "opscope", "report", str(path), "--format", "json"]
    _wall, rss_mib, _last = run_process([*cmd, "-o", str(tmp / "report.json")], env)
    return rss_mib * MIB


def show(name: str, got: dict[str, Any], baseline: float) -> None:
    n = max(int(got["events"]), 1)
    rows = got["rows"]
    glibc = "live" in rows[0]
    print(f"\n{name}: {n:,} events, one thread, `opscope report`'s memory settings")
    cols = ("live", "heap", "anon") if glibc else ("anon",)
    head = "".join(f" {c + ' MiB':>10}" for c in cols)
    print(f"  {'part':26}{head} {'peak MiB':>10} {'+temp MiB':>10} {'+B/event':>9}")
    prev = rows[0]
    for row in rows[1:]:
        grow = (row["live"] - prev["live"]) if glibc else (row["anon"] - prev["anon"])
        cells = "".join(f" {row[c] / MIB:10.0f}" for c in cols)
        temp = (row["peak"] - row["rss"]) / MIB  # held only while the part ran
        print(f"  {row['part']:26}{cells} {row['peak'] / MIB:10.0f} {temp:10.0f} {grow / n:9.0f}")
        prev = row
    last = rows[-1]
    if glibc:
        h = got["held"]
        rest = last["live"] - rows[0]["live"] - h["table"] - h["index"] - h["graph"]
        print("  live at the end, per event:")
        for label, v in (
            ("event table", h["table"]),
            ("index arrays", h["index"]),
            ("critical path graph", h["graph"]),
            ("everything else", rest),
            ("freed, kept by glibc", last["heap"] - (last["live"] - last["arrow"])),
        ):
            print(f"    {label:24} {v / n:7.0f} B/event {v / MIB:9.0f} MiB")
    peak = max(r["peak"] for r in rows[1:])
    top = max(rows[1:], key=lambda r: r["peak"])["part"]
    goal = "met" if baseline / n <= GOAL_BYTES_PER_EVENT else "missed"
    print(
        f"  peak RSS: this process {peak / n:.0f} B/event ({peak / MIB:.0f} MiB, in {top}); "
        f"a whole `opscope report` {baseline / n:.0f} B/event ({baseline / MIB:.0f} MiB; "
        f"ratio {peak / baseline:.2f}); goal <= {GOAL_BYTES_PER_EVENT}: {goal}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:6]),
    )
    ap.add_argument("--trace", default=DEFAULT_TRACE, help="seed under ../shared/traces")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000], help="events per size")
    ap.add_argument("--file", action="append", default=[], help="a trace file to measure as is")
    ap.add_argument("--tmp", default=str(Path(tempfile.gettempdir()) / "opscope-scale"))
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(Path(args.child))))
        return 0
    paths = [Path(f) for f in args.file]
    if not paths:
        seed = SHARED / args.trace
        if not seed.is_file():
            print(f"no trace {seed}", file=sys.stderr)
            return 1
        out = Path(args.tmp)
        out.mkdir(parents=True, exist_ok=True)
        paths = [tile(seed, size, out) for size in args.sizes]
    figures = []
    for path in paths:
        if not path.is_file():
            print(f"no file {path}", file=sys.stderr)
            return 1
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(path)],
                capture_output=True,
                text=True,
                env=dict(os.environ, OPSCOPE_CACHE_DIR=str(Path(tmp) / "cache")),
                check=False,
            )
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if done.returncode or line is None:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            got = json.loads(line[7:])
            baseline = whole_report(path, Path(tmp))
        show(path.name, got, baseline)
        figures.append({"file": str(path), "report_peak_rss": baseline, **got})
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
