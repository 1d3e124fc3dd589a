"""Full-report speed: the analysis against the ingest, and `opscope report` against HTA.

Two measurements, each against a baseline measured in the same run (ratios are the claim;
this machine is noisy):

1. In process, per trace: opscope's ingest (``load(cache=False)``) and the analysis after it
   (``analyze(trace).to_dict()``: op tables, kernels, steps, timeline, findings, roofline, the
   report dict), the best of ``--repeat`` runs on fresh loads.  Printed: analysis / ingest
   (goal <= 0.5) and the analysis cost per event, on every shared trace above 10k events and
   on traces tiled from a real one to ``--sizes`` events (default 1M and 3M).
2. The same work, cold cache: the whole ``opscope report FILE --format json -o OUT`` process
   (process start to JSON written: imports, ingest, every table, finding, the roofline and
   the critical path) against HTA's ``TraceAnalysis`` load of the same file plus the analyses
   of HTA that our report also gives (``HTA_ANALYSES``: temporal, kernel and idle-time
   breakdowns, communication/computation overlap, the critical path), timed inside HTA's
   process (its imports left out), in the venv given by ``--hta-python`` (HTA's PyPI name is
   ``traceinsight``; keep it out of opscope's venv).  Printed: HTA load + analyses / opscope
   report (goal >= 20 on traces above 50k events), the in-process ratio (opscope's ingest +
   analysis) beside it, and HTA's peak RSS / opscope's (goal >= 2).  HTA runs once on files
   above 100 MB and not at all above ``--hta-max-mb``.
3. TraceLens's perf report, when ``--tracelens-python`` names a Python with AMD's TraceLens
   installed (``pip install git+https://github.com/AMD-AGI/TraceLens.git``; the PyPI package
   named ``tracelens`` is an unrelated agent-evaluation tool): its whole ``python -m
   TraceLens.Reporting.generate_perf_report_pytorch --profile_json_path FILE
   --output_csvs_dir DIR`` process (``--tracelens-module`` for another entry point) against
   the whole ``opscope report`` process, both command-line tools started cold.  Printed:
   TL/rep (goal >= 20 on traces above 50k events) and its peak RSS.

Run::

    python benchmarks/report.py                       # shared traces > 10k events, 1M, 3M
    python benchmarks/report.py --sizes 1000000 FILE  # your own traces
    python -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install traceinsight
    python benchmarks/report.py --sizes '' --tracelens-python /tmp/tl-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
SEED = "cuda/a100_nccl_rank0_of2.json.gz"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def in_process(path: Path, repeat: int) -> dict[str, Any]:
    from opscope.analysis.pipeline import analyze
    from opscope.trace import load

    ingest = analysis = float("inf")
    events = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        trace = load(path, cache=False)
        ingest = min(ingest, time.perf_counter() - t0)
        events = len(trace)
        # the report dict as every front-end takes it (the critical path's segments columnar;
        # the plain dict of analyze().to_dict() adds about 1 µs a segment)
        analysis = min(analysis, _timed(lambda t=trace: analyze(t).to_dict(lazy=True)))
        del trace
    return {"events": events, "ingest_s": ingest, "analysis_s": analysis}


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the process, its last stdout line.  Its output goes to
    files, not pipes: waiting on the process while a pipe it fills is unread (64 KiB) would
    never end."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read().decode(errors="replace"), fe.read().decode(errors="replace")
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {(err or out).strip().splitlines()[-1:]}")
    return wall, usage.ru_maxrss / 1024.0, (out.strip().splitlines() or [""])[-1]


# HTA's analyses that a report of ours also gives (the same work on both sides): the temporal
# breakdown (device busy/idle), the kernel breakdown (our kernel table), the idle-time
# breakdown (our idle gaps), the communication/computation overlap (our exposed communication)
# and the critical path of the whole trace.
HTA_ANALYSES = (
    "temporal_breakdown",
    "kernel_breakdown",
    "idle_time_breakdown",
    "comm_comp_overlap",
    "critical_path",
)


def hta_worker(path: str) -> None:
    """Run inside HTA's venv: TraceAnalysis's load of a folder with this trace, then each of
    HTA_ANALYSES (seconds each; an analysis that raises is named in ``failed``)."""
    import contextlib
    import io
    import logging

    from hta.trace_analysis import TraceAnalysis  # type: ignore[import-not-found]

    logging.getLogger("hta").setLevel(logging.ERROR)
    out: dict[str, Any] = {"failed": []}
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        name = Path(path).name
        os.symlink(path, Path(d) / (name if name.startswith("rank") else "rank0_" + name))
        t0 = time.perf_counter()
        a = TraceAnalysis(trace_dir=d)
        out["load_s"] = time.perf_counter() - t0
        ranks = a.t.get_ranks()
        rank = 0 if 0 in ranks else ranks[0]
        calls = {
            "temporal_breakdown": lambda: a.get_temporal_breakdown(visualize=False),
            "kernel_breakdown": lambda: a.get_gpu_kernel_breakdown(visualize=False),
            "idle_time_breakdown": lambda: a.get_idle_time_breakdown(visualize=False),
            "comm_comp_overlap": lambda: a.get_comm_comp_overlap(visualize=False),
            "critical_path": lambda: a.critical_path_analysis(
                rank=rank, annotation="", instance_id=None
            ),
        }
        for key in HTA_ANALYSES:
            t0 = time.perf_counter()
            try:
                calls[key]()
            except Exception:  # HTA's own failure, reported by name
                out["failed"].append(key)
            out[key + "_s"] = time.perf_counter() - t0
    out["work_s"] = out["load_s"] + sum(out[k + "_s"] for k in HTA_ANALYSES)
    print(json.dumps(out))


TRACELENS_MODULE = "TraceLens.Reporting.generate_perf_report_pytorch"


def tracelens_process(
    path: Path, python: str, module: str, repeat: int, tmp: Path
) -> dict[str, Any]:
    """The best of ``repeat`` whole TraceLens perf-report processes on ``path`` (its CSVs
    written to a folder of ``tmp``): wall seconds and peak RSS, or the error it ended with."""
    best: tuple[float, float] | None = None
    for i in range(repeat):
        out = tmp / f"tracelens{i}"
        cmd = [python, "-m", module, "--profile_json_path", str(path), "--output_csvs_dir"]
        try:
            wall, rss, _ = _run([*cmd, str(out)], dict(os.environ))
        except RuntimeError as exc:
            return {"tl_error": str(exc).split("failed: ", 1)[-1][:60]}
        if not out.is_dir() or not any(out.iterdir()):
            return {"tl_error": f"{module} wrote no CSV"}
        if best is None or wall < best[0]:
            best = (wall, rss)
    assert best is not None
    return {"tl_s": best[0], "tl_rss_mb": best[1]}


def whole_process(
    path: Path,
    hta_python: str | None,
    repeat: int,
    tracelens: tuple[str, str] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, OPSCOPE_CACHE_DIR=str(Path(d) / "cache"))
        env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # see compiled()
        best = None
        for i in range(repeat):
            cache = Path(d) / f"cache{i}"  # a cold cache every time
            env["OPSCOPE_CACHE_DIR"] = str(cache)
            cmd = [sys.executable, "-m", "opscope", "report", str(path), "--format", "json"]
            wall, rss, _ = _run([*cmd, "-o", str(Path(d) / "r.json")], env)
            if best is None or wall < best[0]:
                best = (wall, rss)
        assert best is not None
        out["opscope_s"], out["opscope_rss_mb"] = best
        if hta_python:
            hbest = None
            for _ in range(repeat):
                cmd = [hta_python, str(Path(__file__).resolve()), "--hta-worker", str(path)]
                try:
                    wall, rss, line = _run(cmd, dict(os.environ))
                except RuntimeError as exc:
                    out["hta_error"] = str(exc).split("failed: ", 1)[-1][:60]
                    break
                got = json.loads(line)
                if hbest is None or got["work_s"] < hbest[0]:
                    hbest = (got["work_s"], rss, wall, got)
            if hbest is not None:
                out["hta_work_s"], out["hta_rss_mb"], out["hta_process_s"], got = hbest
                out["hta_load_s"] = got["load_s"]
                out["hta_failed"] = got["failed"]
        if tracelens is not None:
            out.update(tracelens_process(path, *tracelens, repeat, Path(d)))
    return out


def compiled() -> None:
    """Byte-compile opscope's sources, as an installed package is (pip compiles a wheel's
    modules; HTA's are): an editable checkout under ``PYTHONDONTWRITEBYTECODE`` would
    otherwise compile about 130 modules in every ``opscope report`` process, 0.15-0.3 s of
    start-up that no user pays."""
    import compileall

    compileall.compile_dir(str(ROOT / "src" / "opscope"), quiet=1)


def shared_traces(min_events: int) -> list[Path]:
    if not SHARED.is_dir():
        return []
    import csv

    rows = csv.DictReader((SHARED / "SOURCES.tsv").open(encoding="utf-8"), delimiter="\t")
    out = []
    for r in rows:
        try:
            n = int(r["events"])
        except (KeyError, ValueError):
            continue
        p = SHARED / r["file"]
        if n > min_events and p.is_file() and "_et." not in p.name:
            out.append(p)
    return out


def tiled(n_events: int, tmp: Path) -> Path:
    """A trace of about ``n_events`` events: a real trace's steps repeated (``ingest.py``),
    built in a child process so that this one stays small (see ``main``)."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--tile",
        str(n_events),
        "--tmp",
        str(tmp),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return Path(r.stdout.strip().splitlines()[-1])


def _tile(n_events: int, tmp: Path) -> Path:
    import gzip

    from ingest import build_synthetic

    seed = SHARED / SEED
    per_event = len(gzip.decompress(seed.read_bytes())) / 40_573  # events: SOURCES.tsv
    return build_synthetic(max(1, round(n_events * per_event / 1e6)), tmp, seed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hta-worker", help=argparse.SUPPRESS)
    ap.add_argument("--tile", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    ap.add_argument("--sizes", default="1000000,3000000", help="tiled trace sizes ('' for none)")
    ap.add_argument("--min-events", type=int, default=10_000)
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python")
    ap.add_argument(
        "--tracelens-python",
        help="a Python with AMD's TraceLens installed: measure its perf report too",
    )
    ap.add_argument(
        "--tracelens-module",
        default=TRACELENS_MODULE,
        help="TraceLens's perf-report entry point run with -m (default %(default)s)",
    )
    ap.add_argument(
        "--hta-max-mb",
        type=float,
        default=300.0,
        help="measure HTA on files up to this size (MB; one run above 100 MB; HTA takes about "
        "25 s and 1.5 GB at 240 MB)",
    )
    ap.add_argument("--tmp", default="/tmp/opscope-bench")
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    if args.hta_worker:
        hta_worker(args.hta_worker)
        return 0
    tmp = Path(args.tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    if args.tile:
        print(_tile(args.tile, tmp))
        return 0
    os.environ["OPSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="opscope-bench-")
    compiled()
    files = [p.resolve() for p in args.files] or shared_traces(args.min_events)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if sizes and SHARED.is_dir():
        for n in sizes:
            t0 = time.perf_counter()
            files.append(tiled(n, tmp))
            print(f"tiled trace of ~{n:,} events ready in {time.perf_counter() - t0:.0f} s")
    if not files:
        print("no traces (../shared/traces absent?): pass files", file=sys.stderr)
        return 1
    hta = args.hta_python if Path(args.hta_python).is_file() else None
    if hta is None:
        print(f"HTA not measured: {args.hta_python} not found (pip install traceinsight there)")
    tracelens = None
    if args.tracelens_python:
        if not Path(args.tracelens_python).is_file():
            print(f"no such Python: --tracelens-python {args.tracelens_python}", file=sys.stderr)
            return 2
        tracelens = (args.tracelens_python, args.tracelens_module)
    else:
        print("TraceLens not measured: give --tracelens-python (a Python with TraceLens)")

    head = (
        f"{'trace':44} {'events':>9} {'ingest s':>9} {'analysis s':>10} {'an/ingest':>9} "
        f"{'us/event':>8} {'report s':>8} {'HTA ld s':>8} {'HTA s':>7} {'HTA/rep':>7} "
        f"{'proc/rep':>8} {'HTA/in':>6} {'RSS MB':>7} {'HTA MB':>7} {'HTA/RSS':>7}"
        + (f" {'TL s':>7} {'TL/rep':>7} {'TL MB':>6}" if tracelens else "")
    )
    print(head)
    print("-" * len(head))
    # Whole processes first, while this process is small: a child's peak RSS starts at its
    # parent's RSS at the fork (Linux keeps the high-water mark across exec).
    big = {p: p.stat().st_size > 100e6 for p in files}
    whole = {
        p: whole_process(
            p,
            hta if p.stat().st_size <= args.hta_max_mb * 1e6 else None,
            1 if big[p] else args.repeat,
            tracelens if p.stat().st_size <= args.hta_max_mb * 1e6 else None,
        )
        for p in files
    }
    ratios: list[float] = []
    same: list[float] = []
    procs: list[float] = []
    rss_ratios: list[float] = []
    tl_ratios: list[float] = []
    for p in files:
        m = in_process(p, 1 if big[p] else args.repeat)
        w = whole[p]
        r = m["analysis_s"] / m["ingest_s"]
        ratios.append(r)
        name = str(p.relative_to(SHARED)) if p.is_relative_to(SHARED) else p.name

        def g(key: str, fmt: str = "{:.2f}", w: dict[str, Any] = w) -> str:
            return fmt.format(w[key]) if key in w else "-"

        speed = inproc = proc = "-"
        if "hta_work_s" in w:
            ratio = w["hta_work_s"] / w["opscope_s"]
            speed = f"{ratio:.1f}x" + ("*" if w.get("hta_failed") else "")
            proc_ratio = w["hta_process_s"] / w["opscope_s"]
            proc = f"{proc_ratio:.1f}x"
            inproc = f"{w['hta_work_s'] / (m['ingest_s'] + m['analysis_s']):.1f}x"
            if m["events"] > 50_000 and not w.get("hta_failed"):
                same.append(ratio)
                procs.append(proc_ratio)
                rss_ratios.append(w["hta_rss_mb"] / w["opscope_rss_mb"])
        if "hta_error" in w:
            speed = "failed"
        mem = f"{w['hta_rss_mb'] / w['opscope_rss_mb']:.2f}x" if "hta_rss_mb" in w else "-"
        tl = ""
        if tracelens:
            tl_speed = "failed" if "tl_error" in w else "-"
            if "tl_s" in w:
                tl_ratio = w["tl_s"] / w["opscope_s"]
                tl_speed = f"{tl_ratio:.1f}x"
                if m["events"] > 50_000:
                    tl_ratios.append(tl_ratio)
            tl = f" {g('tl_s'):>7} {tl_speed:>7} {g('tl_rss_mb', '{:.0f}'):>6}"
        print(
            f"{name[-44:]:44} {m['events']:9d} {m['ingest_s']:9.3f} {m['analysis_s']:10.3f} "
            f"{r:9.2f} {m['analysis_s'] / max(m['events'], 1) * 1e6:8.2f} "
            f"{g('opscope_s'):>8} {g('hta_load_s'):>8} {g('hta_work_s'):>7} {speed:>7} "
            f"{proc:>8} {inproc:>6} "
            f"{g('opscope_rss_mb', '{:.0f}'):>7} {g('hta_rss_mb', '{:.0f}'):>7} {mem:>7}{tl}"
        )
        if "tl_error" in w:
            print(f"  TraceLens failed on {name}: {w['tl_error']}")
    print(
        f"\nanalysis/ingest: median {statistics.median(ratios):.2f}, max {max(ratios):.2f} "
        "(goal <= 0.5); HTA/rep: HTA's load + analyses (HTA s; HTA ld s: its load alone) over "
        "the whole `opscope report` process, cold cache (proc/rep: HTA's whole process, its "
        "imports included, over the same; HTA/in: HTA's load + analyses over opscope's ingest + "
        "analysis in process; * an HTA analysis failed, left out below); HTA/RSS: HTA's peak "
        "RSS over opscope's"
        + (
            "; TL/rep: TraceLens's whole perf-report process over the whole `opscope report` "
            "process"
            if tracelens
            else ""
        )
    )
    if same:
        print(
            f"same work, traces above 50k events ({len(same)}): HTA/rep median "
            f"{statistics.median(same):.1f}x, min {min(same):.1f}x (goal >= 20); proc/rep "
            f"median {statistics.median(procs):.1f}x, min {min(procs):.1f}x; HTA/RSS median "
            f"{statistics.median(rss_ratios):.2f}x, min {min(rss_ratios):.2f}x (goal >= 2)"
        )
    if tl_ratios:
        print(
            f"TraceLens's perf report, traces above 50k events ({len(tl_ratios)}): TL/rep "
            f"median {statistics.median(tl_ratios):.1f}x, min {min(tl_ratios):.1f}x (goal >= "
            "20; both whole processes, cold)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
