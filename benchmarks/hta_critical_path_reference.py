"""Reference figures from HTA's critical path analysis, for checking another implementation.

    /tmp/hta-venv/bin/python benchmarks/hta_critical_path_reference.py --out ref.json
    /tmp/hta-venv/bin/python benchmarks/hta_critical_path_reference.py --out ref.json \\
        ../shared/traces/cuda/critical_path_alexnet.json.gz other_trace.json.gz

Run it with the interpreter of a virtual environment that has HTA installed (PyPI name
``traceinsight``, module ``hta``); HTA is kept out of opscope's own environment.  With no trace
arguments it uses the four ``critical_path_*`` CUDA traces under ``../shared/traces/cuda/``.

HTA's ``TraceAnalysis`` takes a directory, so each trace is symlinked alone into
``<--work-dir>/<name>/``.  For every trace HTA's critical path analysis runs on one rank (the
only rank of a single-rank trace, normally 0):

1. ``annotation=""``, ``instance_id=None``: the whole trace, as HTA loads it;
2. ``annotation="ProfilerStep"``, ``instance_id=0``: the first ProfilerStep, only when the
   trace has such an annotation.

Each run happens in its own subprocess (this script with ``--worker``), which builds its own
``TraceAnalysis``, so runs are independent and a slow trace can be cut off (``--timeout``).
A record per (trace, annotation) holds, all durations in µs as HTA reports them:

* ``total_us``: sum of ``duration`` over the rows of ``cp_graph.get_critical_path_breakdown()``;
* ``by_bound_by``: that sum per ``bound_by`` value (``""`` = dependency and sync edges), with a
  sanity check that the parts add up to the total; ``by_edge_type``: count and sum per edge type;
* ``n_edges`` (rows of the breakdown) and ``n_nodes`` of the path; the first and last path node
  timestamps and their difference;
* ``top_events``: the events with the largest summed duration on the path;
* ``window``: the (start, end) HTA clipped the trace to, read from HTA's own log line; HTA's
  timestamps are relative to ``ts_offset`` (the earliest event of the trace), except the end of
  the whole-trace window, which HTA takes from its ``end`` column (absolute timestamps);
* ``load_s`` (``TraceAnalysis`` construction) and ``critical_path_s`` (the
  ``critical_path_analysis`` call), wall time by ``time.perf_counter``; ``breakdown_s``;
* warnings and errors HTA logged while loading and while analysing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import io
import json
import logging
import math
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CUDA_TRACES = ROOT.parent / "shared" / "traces" / "cuda"
DEFAULT_TRACES = (
    CUDA_TRACES / "critical_path_alexnet.json.gz",
    CUDA_TRACES / "critical_path_event_sync.json.gz",
    CUDA_TRACES / "critical_path_event_sync_multi_stream.json.gz",
    CUDA_TRACES / "critical_path_simple_add.json.gz",
)
STEP_ANNOTATION = "ProfilerStep"
PROGRESS_RE = re.compile(r"(Parsed |Overall parsing of |leaving )")
WINDOW_RE = re.compile(r"Looking up events within the window \((\S+), (\S+)\)")

NOTES = (
    "All times in microseconds. HTA shifts every event's ts by ts_offset (the earliest ts of the "
    "trace) but leaves its 'end' column absolute, so the whole-trace window's end is absolute "
    "while its start (0) and ProfilerStep windows are relative.",
    "TraceAnalysis is built with HTA's default include_last_profiler_step=False: with two or more "
    "ProfilerSteps HTA keeps only CPU events (cpu_op, user_annotation, *_runtime) that start "
    "before the last step and the GPU kernels they launched; cuda_sync events are then dropped.",
    "Timestamps with fractional microseconds are rounded by HTA at load (ts up, end down).",
    "total_us sums the weights of the path's edges; it is less than path_span_us wherever an "
    "edge's weight is less than the time between its nodes (uncounted_gap_by_edge_type).",
    "top_events groups the path's edges by the event HTA attributes them to (event_idx >= 0; "
    "a kernel-kernel gap counts for the kernel before it), bound_by being its largest share; "
    "unattributed_us is the rest (launch-delay and dependency edges, with no event).",
    "profiler_steps lists the ProfilerStep events left after HTA's load (the last one is "
    "dropped when there are several); instance_id 0 is the first of them. The path of a "
    "ProfilerStep run may end after the window: GPU work launched inside it is kept.",
)


class _Capture(logging.Handler):
    """Collects HTA's log records (INFO and above) for the record."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def take(self) -> list[logging.LogRecord]:
        out, self.records = self.records, []
        return out


def _num(x: Any) -> int | float | None:
    """A JSON-friendly number: int when integral, None for NaN / None."""
    if x is None:
        return None
    v = float(x)
    if math.isnan(v):
        return None
    return int(v) if v.is_integer() and abs(v) < 2**63 else v


def _parse_num(s: str) -> int | float | None:
    try:
        return _num(float(s))
    except ValueError:
        return None


def _problems(records: list[logging.LogRecord]) -> list[dict[str, Any]]:
    """WARNING and above, deduplicated (first occurrence order) with a count.

    HTA logs its parse-progress timings at WARNING level; those are left out.
    """
    counts: Counter[tuple[str, str]] = Counter()
    order: list[tuple[str, str]] = []
    for r in records:
        if r.levelno < logging.WARNING or PROGRESS_RE.match(r.getMessage()):
            continue
        key = (r.levelname, r.getMessage())
        if key not in counts:
            order.append(key)
        counts[key] += 1
    return [{"level": lv, "message": msg, "count": counts[(lv, msg)]} for lv, msg in order]


_DEPRECATIONS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def _py_warnings(caught: list[warnings.WarningMessage]) -> dict[str, Any]:
    """Python warnings: a count per category; full text only for non-deprecation ones."""
    per_category: Counter[str] = Counter(w.category.__name__ for w in caught)
    other: Counter[str] = Counter(
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not issubclass(w.category, _DEPRECATIONS) and "deprecated" not in str(w.message)
    )
    return {"per_category": dict(per_category), "other": dict(other)}


def _trace_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name


def _stage(trace: Path, work_dir: Path) -> Path:
    """A directory holding only a symlink to ``trace``, as HTA's TraceAnalysis wants."""
    d = work_dir / _trace_name(trace)
    d.mkdir(parents=True, exist_ok=True)
    for entry in d.iterdir():
        if entry.is_symlink() or entry.is_file():
            entry.unlink()
    (d / trace.name).symlink_to(trace.resolve())
    return d


def _run_one(
    trace: Path, work_dir: Path, annotation: str, instance_id: int | None, top: int
) -> dict[str, Any]:
    """Load ``trace`` in HTA and run its critical path once; runs inside a worker."""
    from hta.trace_analysis import TraceAnalysis  # type: ignore[import-not-found]

    hta_logger = logging.getLogger("hta")
    capture = _Capture()
    hta_logger.addHandler(capture)
    hta_logger.setLevel(logging.INFO)
    hta_logger.propagate = False

    rec: dict[str, Any] = {
        "trace": _trace_name(trace),
        "trace_path": str(trace),
        "annotation": annotation,
        "instance_id": instance_id,
    }
    trace_dir = _stage(trace, work_dir)
    rec["trace_dir"] = str(trace_dir)

    with warnings.catch_warnings(record=True) as caught_load:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        analyzer = TraceAnalysis(trace_dir=str(trace_dir))
        rec["load_s"] = round(time.perf_counter() - t0, 4)
    rec["load_problems"] = _problems(capture.take())
    rec["load_python_warnings"] = _py_warnings(caught_load)

    t = analyzer.t
    ranks = t.get_ranks()
    rank = 0 if 0 in ranks else ranks[0]
    rec["rank"] = rank
    rec["ranks_in_trace"] = [int(r) for r in ranks]
    df = t.get_trace(rank)
    sym_map: dict[str, int] = t.symbol_table.get_sym_id_map()
    sym_table: list[str] = t.symbol_table.get_sym_table()
    step_ids = [v for k, v in sym_map.items() if STEP_ANNOTATION in k]
    rec["ts_offset"] = _num(getattr(t, "min_ts", 0))
    rec["hta_events"] = len(df)
    rec["hta_ts_range"] = [_num(df["ts"].min()), _num((df["ts"] + df["dur"]).max())]
    rec["has_cuda_sync_symbol"] = "cuda_sync" in sym_map
    cuda_sync_id = sym_map.get("cuda_sync")
    rec["cuda_sync_events_kept"] = (
        int(df["cat"].eq(cuda_sync_id).sum()) if cuda_sync_id is not None else 0
    )
    steps = df[df["name"].isin(step_ids)]
    rec["has_profiler_step"] = not steps.empty
    rec["profiler_steps"] = [
        {
            "name": sym_table[int(r.name)],
            "ts": _num(r.ts),
            "dur": _num(r.dur),
            "stream": _num(r.stream),
        }
        for r in steps.itertuples()
    ]

    if annotation == STEP_ANNOTATION and steps.empty:
        rec["skipped"] = "no ProfilerStep annotation"
        return rec

    with warnings.catch_warnings(record=True) as caught_cp:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        try:
            result = analyzer.critical_path_analysis(
                rank=rank, annotation=annotation, instance_id=instance_id
            )
            error = None
        except Exception as exc:
            last = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(last.filename).name}:{last.lineno} {last.line or ''}".strip()
            result, error = None, f"{type(exc).__name__}: {exc} (at {where})"
        rec["critical_path_s"] = round(time.perf_counter() - t0, 4)
    logs = capture.take()
    rec["critical_path_problems"] = _problems(logs)
    rec["critical_path_python_warnings"] = _py_warnings(caught_cp)
    window = None
    for r in logs:
        m = WINDOW_RE.search(r.getMessage())
        if m:
            window = {"start": _parse_num(m.group(1)), "end": _parse_num(m.group(2))}
    rec["window"] = window

    if result is None:
        rec["success"] = False
        rec["error"] = error or "critical_path_analysis returned None"
        return rec
    cp_graph, success = result
    rec["success"] = bool(success)
    if not success:
        rec["error"] = "critical path algorithm reported failure"
        return rec

    t0 = time.perf_counter()
    bd = cp_graph.get_critical_path_breakdown()
    rec["breakdown_s"] = round(time.perf_counter() - t0, 4)
    if bd is None or bd.empty:
        rec["error"] = "empty breakdown"
        return rec

    total = float(bd["duration"].sum())
    rec["total_us"] = _num(total)
    rec["n_edges"] = len(bd)
    nodes = [cp_graph.node_list[n] for n in cp_graph.critical_path_nodes]
    rec["n_nodes"] = len(nodes)
    rec["path_first_node_ts"] = _num(nodes[0].ts)
    rec["path_last_node_ts"] = _num(nodes[-1].ts)
    rec["path_span_us"] = _num(float(nodes[-1].ts) - float(nodes[0].ts))

    # Where an edge's weight differs from the time between its two nodes (HTA gives zero weight
    # to the dependency edge from one top-level CPU op to the next, so idle CPU time between
    # them is not on the path), and the weight networkx maximised (HTA zeroes weights of -1).
    gaps: dict[str, dict[str, Any]] = {}
    graph_weight = 0.0
    negative = 0
    for e in cp_graph.critical_path_edges_set:
        graph_weight += float(cp_graph.edges[e.begin, e.end]["weight"])
        negative += int(e.weight < 0)
        gap = float(cp_graph.node_list[e.end].ts) - float(cp_graph.node_list[e.begin].ts) - e.weight
        if gap:
            g = gaps.setdefault(str(e.type.value), {"n": 0, "us": 0.0})
            g["n"] += 1
            g["us"] += gap
    rec["uncounted_gap_by_edge_type"] = {
        k: {"n": v["n"], "us": _num(v["us"])} for k, v in sorted(gaps.items())
    }
    rec["graph_path_weight_us"] = _num(graph_weight)
    rec["negative_weight_edges"] = negative

    bound = bd["bound_by"].fillna("").astype(str)
    by_bound = bd.groupby(bound)["duration"].sum()
    rec["by_bound_by"] = {str(k): _num(v) for k, v in sorted(by_bound.items())}
    by_type = bd.groupby("type")["duration"].agg(["count", "sum"])
    rec["by_edge_type"] = {
        str(k): {"n": int(row["count"]), "us": _num(row["sum"])} for k, row in by_type.iterrows()
    }
    parts = float(by_bound.sum())
    rec["sanity"] = {
        "sum_by_bound_by_us": _num(parts),
        "matches_total": math.isclose(parts, total, rel_tol=0, abs_tol=1e-6),
        "span_matches_total": rec["path_span_us"] == rec["total_us"],
    }

    attributed = bd[bd["event_idx"].notna() & bd["event_idx"].ge(0)]
    rec["unattributed_us"] = _num(total - float(attributed["duration"].sum()))
    per_event = (
        attributed.groupby("event_idx")
        .agg(
            us=("duration", "sum"),
            n_edges=("duration", "size"),
            s_name=("s_name", "first"),
            stream=("stream", "first"),
        )
        .reset_index()
        .sort_values(["us", "event_idx"], ascending=[False, True])
        .head(top)
    )
    # One event's edges can be bound by different things (a GPU kernel's own span and the
    # kernel-kernel gap before it), so each event carries its split; bound_by is the largest.
    split = attributed.groupby(["event_idx", "bound_by"])["duration"].sum()
    full = t.get_trace(rank)
    top_events = []
    for r in per_event.itertuples():
        idx = int(r.event_idx)
        ev = full.loc[idx] if idx in full.index else None
        parts_of = {str(k): _num(v) for k, v in split.loc[r.event_idx].items()}
        main_bound = max(parts_of, key=lambda k: (parts_of[k] or 0, k))
        top_events.append(
            {
                "event_idx": idx,
                "s_name": str(r.s_name),
                "bound_by": main_bound,
                "us": _num(r.us),
                "us_by_bound_by": dict(sorted(parts_of.items())),
                "n_edges": int(r.n_edges),
                "name": sym_table[int(ev["name"])] if ev is not None else None,
                "ts": _num(ev["ts"]) if ev is not None else None,
                "dur": _num(ev["dur"]) if ev is not None else None,
                "stream": _num(r.stream),
            }
        )
    rec["top_events"] = top_events
    return rec


def _worker(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--trace", type=Path, required=True)
    ap.add_argument("--work-dir", type=Path, required=True)
    ap.add_argument("--annotation", default="")
    ap.add_argument("--instance-id", type=int, default=None)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--result", type=Path, required=True)
    a = ap.parse_args(argv)
    # HTA prints progress on stdout; keep the worker's stdout for nothing else.
    with contextlib.redirect_stdout(io.StringIO()):
        rec = _run_one(a.trace, a.work_dir, a.annotation, a.instance_id, a.top)
    a.result.write_text(json.dumps(rec))
    return 0


def _spawn(
    trace: Path,
    work_dir: Path,
    annotation: str,
    instance_id: int | None,
    top: int,
    timeout: float,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "--trace",
            str(trace),
            "--work-dir",
            str(work_dir),
            "--annotation",
            annotation,
            "--top",
            str(top),
            "--result",
            str(result),
        ]
        if instance_id is not None:
            cmd += ["--instance-id", str(instance_id)]
        base: dict[str, Any] = {
            "trace": _trace_name(trace),
            "trace_path": str(trace),
            "annotation": annotation,
            "instance_id": instance_id,
        }
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {**base, "success": False, "error": f"timed out after {timeout:.0f} s"}
        wall = round(time.perf_counter() - t0, 3)
        if proc.returncode != 0 or not result.exists():
            tail = (proc.stderr or "").strip().splitlines()[-15:]
            return {
                **base,
                "success": False,
                "error": f"worker exited with {proc.returncode}",
                "stderr_tail": tail,
                "worker_wall_s": wall,
            }
        rec: dict[str, Any] = json.loads(result.read_text())
        rec["worker_wall_s"] = wall
        return rec


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("traceinsight", "pandas", "networkx", "numpy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def _hta_options() -> str | None:
    try:
        import hta.configs.env_options as opts  # type: ignore[import-not-found]

        return str(opts.get_options())
    except Exception:
        return None


def _summary_line(rec: dict[str, Any]) -> str:
    head = f"{rec['trace']:<42} {rec['annotation'] or '<all>':<13}"
    if rec.get("skipped"):
        return f"{head} skipped: {rec['skipped']}"
    if not rec.get("success") or "total_us" not in rec:
        return f"{head} FAILED: {rec.get('error')}"
    ok = "ok" if rec["sanity"]["matches_total"] else "MISMATCH"
    return (
        f"{head} total={rec['total_us']} us edges={rec['n_edges']} "
        f"load={rec['load_s']:.2f}s cp={rec['critical_path_s']:.2f}s sum-check={ok}"
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--worker" in argv:
        return _worker(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("traces", nargs="*", type=Path, help="single-rank Kineto traces")
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/hta-cp"))
    ap.add_argument("--top", type=int, default=5, help="events listed per run")
    ap.add_argument("--instance-id", type=int, default=0, help="ProfilerStep instance")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per HTA run")
    a = ap.parse_args(argv)

    traces = [p.resolve() for p in (a.traces or list(DEFAULT_TRACES))]
    records: list[dict[str, Any]] = []
    for trace in traces:
        if not trace.exists():
            missing = {"trace": _trace_name(trace), "trace_path": str(trace), "annotation": ""}
            records.append({**missing, "success": False, "error": "file not found"})
            print(_summary_line(records[-1]), flush=True)
            continue
        whole = _spawn(trace, a.work_dir, "", None, a.top, a.timeout)
        records.append(whole)
        print(_summary_line(whole), flush=True)
        if whole.get("has_profiler_step"):
            step = _spawn(trace, a.work_dir, STEP_ANNOTATION, a.instance_id, a.top, a.timeout)
            records.append(step)
            print(_summary_line(step), flush=True)

    versions = _versions()
    out = {
        "hta_version": versions["traceinsight"],
        "what": "HTA critical path analysis reference figures (durations in microseconds)",
        "versions": versions,
        "notes": list(NOTES),
        "hta_env_options": _hta_options(),
        "records": records,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
