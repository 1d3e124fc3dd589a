"""Scale: one trace of millions of events in one process, and jobs of many ranks on Dask.

Two measurements, each printed with its ratio to the smallest size of the same run (ratios
are the claim; this machine is noisy).  Nothing is asserted.

1. Events.  A real shared trace (``--trace``) tiled to each ``--events`` size (its steps
   repeated with times, ids and step numbers offset: ``analysis_parts.tile``, written as it
   goes), as plain JSON and, with ``--gzip``, also gzip-compressed from it as a stream.
   Each file is reported by a whole ``opscope report FILE --format json -o OUT`` process,
   cold cache (a fresh ``OPSCOPE_CACHE_DIR``).  Printed per file: events (the report's
   ``source.events``), JSON bytes, wall seconds, µs per event, peak RSS (the process's
   ``os.wait4`` rusage) and bytes of peak RSS per event; then the time per event at the
   largest size over that at the smallest (goal <= 1.2 for 10M over 1M) and the bytes per
   event at the largest (goal <= 400).  ``--explorer`` adds ``opscope explore``'s first
   paint on the largest plain file in headless Chromium (``explorer.first_paint``; goal
   <= 5 s at 10M events; a trace that large paints its head first, a preview, then the
   whole trace: both times are printed), measured after the ranks.
2. Ranks.  For each ``--ranks`` N, N rank files tiled from ``--rank-trace``
   (``job_scale.build_job``: ``distributedInfo`` rank r of N, clock offsets, jittered
   kernels, one slow rank), reported by ``opscope report FOLDER --cluster local:W --format
   json`` (a LocalCluster of ``--workers`` processes), cold cache.  Printed per N: wall
   seconds (process start to report written, the cluster's start included), seconds per
   rank, the coordinator's peak RSS (the process's own, ``RUSAGE_SELF``; its scheduler
   included) and the largest worker's (``RUSAGE_CHILDREN``); then seconds per rank at the
   largest N over the smallest (linear: about 1; the fixed start-up weighs more at the
   smallest N) and the seconds each added rank costs between consecutive sizes.  For the
   smallest N the job is also reported in one process (no ``--cluster``) and the two
   documents compared, ``source.engine`` dropped (the only field docs/scale.md says differs):
   "same report", or the first key that differs.

Every measured process is a child of this one, which stays small: Linux starts a child's
peak RSS at its parent's at the fork, so the tiling and every JSON read run in children too.
Files are kept under ``--tmp`` for the next run (a 10M-event file is about 3 GB).

Run::

    python benchmarks/scale.py                                # 1M, 10M events; 64, 256, 1024 ranks
    python benchmarks/scale.py --events 1000000 --gzip --ranks 8,32
    python benchmarks/scale.py --events 10000000 --gzip --explorer --ranks ''
    python benchmarks/scale.py --events '' --ranks 64,1024 --workers 2 --json scale.json
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from job_scale import DEFAULT_TRACE as DEFAULT_RANK_TRACE  # noqa: E402
from report import SEED as DEFAULT_TRACE  # noqa: E402
from report import _run, compiled  # noqa: E402

# what a cluster report adds to the one-process one (docs/scale.md, "The same answer")
DROPPED = (("source", "engine"),)

# ``opscope report ARGS`` in this process, then its own peak RSS and its largest child's
# (the LocalCluster's workers) on the last line
CLI_CHILD = r"""
import json, resource, sys
from opscope.cli.main import main
code = main(sys.argv[1:])
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print("RESULT " + json.dumps({"self_mib": own, "children_mib": kids}))
raise SystemExit(code)
"""


# ---- children (each a process of its own: see the module docstring) ----


def tile_child(seed: Path, n_events: int, tmp: Path, gz: bool) -> list[dict[str, Any]]:
    """The tiled file(s) of about ``n_events`` events: path, events written (the seed's
    complete events times its copies: what the event table holds), JSON bytes."""
    import orjson
    from analysis_parts import tile

    path = tile(seed, n_events, tmp)
    raw = seed.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    timed = sum(1 for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e)
    reps = int(path.name.rsplit("_x", 1)[1].split(".")[0])
    row = {"path": str(path), "events": reps * timed, "json_bytes": path.stat().st_size}
    out = [{**row, "format": "json", "file_bytes": row["json_bytes"]}]
    if gz:
        out.append({**row, "format": "gzip", **gzipped(path)})
    return out


def gzipped(path: Path) -> dict[str, Any]:
    """``path`` compressed to ``path.gz`` a block at a time (never whole in memory)."""
    dest = path.with_name(path.name + ".gz")
    if not dest.is_file():
        part = dest.with_suffix(".part")
        with path.open("rb") as src, gzip.open(part, "wb", compresslevel=1) as out:
            shutil.copyfileobj(src, out, 1 << 24)
        part.rename(dest)
    return {"path": str(dest), "file_bytes": dest.stat().st_size}


def job_child(seed: Path, ranks: int, tmp: Path) -> str:
    from job_scale import build_job

    return str(build_job(seed, ranks, tmp / f"{seed.name.split('.')[0]}-{ranks}ranks"))


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """The first key (``.ranks[3].ops``) where ``a`` and ``b`` differ, or None."""
    if type(a) is not type(b):
        return where or "."
    if isinstance(a, dict):
        for k in [*a, *(k for k in b if k not in a)]:
            if k not in a or k not in b:
                return f"{where}.{k} (only in {'the one-process' if k in a else 'the cluster'})"
            got = first_difference(a[k], b[k], f"{where}.{k}")
            if got:
                return got
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where} (length {len(a)} != {len(b)})"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            got = first_difference(x, y, f"{where}[{i}]")
            if got:
                return got
        return None
    return None if a == b else where


def source_of(path: Path) -> dict[str, Any]:
    """A report's ``source`` section, read from the head of the file: a 10M-event trace's
    document is GBs (nearly all of it the critical path's segments, written last)."""
    with path.open("rb") as fh:
        head = fh.read(16 << 20)
    at = head.find(b'"source":')
    if at >= 0:
        text = head[at + len(b'"source":') :].decode("utf-8", "replace").lstrip()
        try:
            got: dict[str, Any] = json.JSONDecoder().raw_decode(text)[0]
            return got
        except json.JSONDecodeError:
            pass
    whole: dict[str, Any] = json.loads(path.read_bytes())["source"]
    return whole


def inspect_child(paths: list[str]) -> dict[str, Any]:
    """One report: its event and rank counts; two (one-process, cluster): how they compare."""
    if len(paths) == 1:
        source = source_of(Path(paths[0]))
        return {"events": source.get("events"), "ranks": len(source.get("ranks") or [])}
    docs = [json.loads(Path(p).read_bytes()) for p in paths]
    for doc in docs:
        for *parents, key in DROPPED:
            node = doc
            for p in parents:
                node = node.get(p, {})
            node.pop(key, None)
    return {"difference": first_difference(docs[0], docs[1])}


def _child(*args: str) -> Any:
    """This script run with ``args``; its last stdout line, parsed."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(args[:2])} failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, OPSCOPE_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # see report.compiled()
    return env


# ---- the two measurements ----


def events_part(args: argparse.Namespace, sizes: list[int], tmp: Path) -> dict[str, Any]:
    seed = SHARED / args.trace
    files: list[dict[str, Any]] = []
    for n in sizes:
        gz = ["--gzip"] if args.gzip else []
        files += _child("--tile", str(n), "--trace", args.trace, "--tmp", str(tmp), *gz)
    print(f"\nevents: {seed.relative_to(SHARED)} tiled, one `opscope report` process each")
    head = (
        f"{'file':34} {'format':>6} {'tiled':>11} {'events':>11} {'JSON MB':>8} {'file MB':>8} "
        f"{'wall s':>7} {'us/event':>8} {'RSS MiB':>8} {'B/event':>7}"
    )
    print(head)
    print("-" * len(head))
    for f in files:
        with tempfile.TemporaryDirectory(dir=tmp) as d:
            out = Path(d) / "report.json"
            cmd = [sys.executable, "-m", "opscope", "report", f["path"], "--format", "json"]
            wall, rss, _ = _run([*cmd, "-o", str(out)], _env(Path(d) / "cache"))
            got = _child("--inspect", str(out))
        events = int(got["events"] or 0)
        f.update(
            reported_events=events,
            wall_s=wall,
            us_per_event=wall / max(events, 1) * 1e6,
            rss_mib=rss,
            bytes_per_event=rss * 2**20 / max(events, 1),
        )
        print(
            f"{Path(f['path']).name[:34]:34} {f['format']:>6} {f['events']:11,d} {events:11,d} "
            f"{f['json_bytes'] / 1e6:8.0f} {f['file_bytes'] / 1e6:8.0f} {wall:7.2f} "
            f"{f['us_per_event']:8.2f} {rss:8.0f} {f['bytes_per_event']:7.0f}"
        )
    summary: dict[str, Any] = {}
    for fmt in ("json", "gzip"):
        rows = sorted((f for f in files if f["format"] == fmt), key=lambda f: f["events"])
        if not rows:
            continue
        small, big = rows[0], rows[-1]
        line = f"{fmt}:"
        if len(rows) > 1:
            ratio = big["us_per_event"] / small["us_per_event"]
            summary[f"{fmt}_time_per_event_ratio"] = ratio
            line += (
                f" us/event at {big['reported_events']:,} events / at "
                f"{small['reported_events']:,}: {ratio:.2f} (goal <= 1.2: {_goal(ratio <= 1.2)});"
            )
        summary[f"{fmt}_bytes_per_event"] = big["bytes_per_event"]
        line += (
            f" peak RSS at {big['reported_events']:,} events: {big['bytes_per_event']:.0f} B/event"
            f" (goal <= 400: {_goal(big['bytes_per_event'] <= 400)})"
        )
        print(line)
    return {"files": files, **summary}


def explorer_part(files: list[dict[str, Any]]) -> dict[str, Any]:
    """``opscope explore``'s first paint on the largest plain file (last: Playwright's
    driver would raise this process's RSS, hence every later child's)."""
    from explorer import CHROMIUM, first_paint

    big = max((f for f in files if f["format"] == "json"), key=lambda f: f["events"])
    if not Path(CHROMIUM).is_file():
        print(f"\nexplorer: not measured, no Chromium at {CHROMIUM} (Debian: apt install chromium)")
        return {"events": big["reported_events"], "error": f"no Chromium at {CHROMIUM}"}
    paint = first_paint(Path(big["path"]))
    if paint["paint_s"] is None or paint["ready_s"] is None:
        print(
            f"\nexplorer at {big['reported_events']:,} events: {paint['error']} after "
            f"`opscope explore` starts (goal <= 5 s: goal missed; serving after "
            f"{paint['listen_s']:.2f} s; page errors: {paint['page_errors'] or 'none'})"
        )
        return {"events": big["reported_events"], **paint}
    head = " (the trace's head: a preview)" if paint["preview"] else ""
    print(
        f"\nexplorer at {big['reported_events']:,} events: first paint{head} "
        f"{paint['paint_s']:.2f} s after `opscope explore` starts (goal <= 5 s: "
        f"{_goal(paint['paint_s'] <= 5)}; serving after {paint['listen_s']:.2f} s, the whole "
        f"trace on the timeline after {paint['loaded_s']:.2f} s, summary shown after "
        f"{paint['ready_s']:.2f} s)"
    )
    return {"events": big["reported_events"], **paint}


def ranks_part(args: argparse.Namespace, sizes: list[int], tmp: Path) -> dict[str, Any]:
    cluster = f"local:{args.workers}"
    print(
        f"\nranks: {args.rank_trace} tiled to N rank files, `opscope report FOLDER "
        f"--cluster {cluster}` (one-process report too at the smallest N)"
    )
    head = (
        f"{'ranks':>6} {'path':>11} {'events':>11} {'wall s':>7} {'s/rank':>7} "
        f"{'coord MiB':>9} {'worker MiB':>10}"
    )
    print(head)
    print("-" * len(head))
    rows: list[dict[str, Any]] = []
    compared: dict[str, Any] = {}
    for n in sizes:
        folder = _child("--job", str(n), "--rank-trace", args.rank_trace, "--tmp", str(tmp))
        with tempfile.TemporaryDirectory(dir=tmp) as d:
            paths: tuple[tuple[str, list[str]], ...] = (
                ("one process", []),
                ("cluster", ["--cluster", cluster]),
            )
            outs: list[str] = []
            for name, extra in paths if n == sizes[0] else paths[1:]:
                out = Path(d) / f"{name.replace(' ', '-')}.json"
                cmd = [sys.executable, "-c", CLI_CHILD, "report", folder, "--format", "json"]
                cmd += [*extra, "-o", str(out)]
                wall, _, line = _run(cmd, _env(Path(d) / f"cache-{len(outs)}"))
                rss = json.loads(line.split("RESULT ", 1)[1])
                got = _child("--inspect", str(out))
                outs.append(str(out))
                row = {
                    "ranks": n,
                    "path": name,
                    "events": got["events"],
                    "reported_ranks": got["ranks"],
                    "wall_s": wall,
                    "s_per_rank": wall / n,
                    "coordinator_rss_mib": rss["self_mib"],
                    "worker_rss_mib": rss["children_mib"],
                }
                rows.append(row)
                print(
                    f"{n:>6} {name:>11} {int(got['events'] or 0):11,d} {wall:7.2f} "
                    f"{wall / n:7.3f} {rss['self_mib']:9.0f} {rss['children_mib']:10.0f}"
                )
            if len(outs) == 2:
                compared = {"ranks": n, **_child("--inspect", *outs)}
    on = [r for r in rows if r["path"] == "cluster"]
    summary: dict[str, Any] = {"rows": rows}
    if len(on) > 1:
        ratio = on[-1]["s_per_rank"] / on[0]["s_per_rank"]
        summary["s_per_rank_ratio"] = ratio
        marginal = [
            (a["ranks"], b["ranks"], (b["wall_s"] - a["wall_s"]) / (b["ranks"] - a["ranks"]))
            for a, b in itertools.pairwise(on)
        ]
        summary["s_per_added_rank"] = [{"from": a, "to": b, "s": m} for a, b, m in marginal]
        fixed = on[0]["wall_s"] - marginal[0][2] * on[0]["ranks"]
        steps = ", ".join(f"{a}->{b}: {m:.3f}" for a, b, m in marginal)
        print(
            f"cluster: s/rank at {on[-1]['ranks']} ranks / at {on[0]['ranks']}: {ratio:.2f} "
            f"(linear in ranks: about 1, less where the fixed start-up, about {fixed:.1f} s "
            f"here, weighs on the smallest N); seconds per added rank {steps}"
        )
        if len(marginal) > 1:
            last = marginal[-1][2] / marginal[0][2]
            summary["added_rank_ratio"] = last
            print(
                f"cluster: seconds per added rank, last step / first: {last:.2f} (linear: about 1)"
            )
    if on:
        top = max(r["coordinator_rss_mib"] for r in on)
        print(
            f"cluster: coordinator peak RSS at most {top:.0f} MiB "
            f"(goal <= 1024: {_goal(top <= 1024)})"
        )
    if compared:
        diff = compared["difference"]
        dropped = ", ".join(".".join(k) for k in DROPPED)
        verdict = "same report" if diff is None else f"reports differ first at {diff}"
        summary["same_report"] = diff is None
        summary["difference"] = diff
        print(
            f"cluster against one process at {compared['ranks']} ranks ({dropped} dropped): "
            f"{verdict}"
        )
    return summary


def _goal(met: bool) -> str:
    return "goal met" if met else "goal missed"


def _sizes(text: str, flag: str, ap: argparse.ArgumentParser) -> list[int]:
    try:
        sizes = sorted({int(s.replace("_", "")) for s in text.split(",") if s.strip()})
    except ValueError:
        ap.error(f"{flag} {text!r}: expected comma-separated whole numbers, e.g. 1000000,10000000")
    if any(n < 1 for n in sizes):
        ap.error(f"{flag} {text!r}: sizes must be at least 1")
    return sizes


def main() -> int:
    class Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        pass

    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="examples:\n" + __doc__.split("Run::\n", 1)[1].rstrip() + "\n\n"
        "What is measured, and how: the module docstring of benchmarks/scale.py.",
        formatter_class=Help,
    )
    ap.add_argument("--events", default="1000000,10000000", help="tiled trace sizes ('' for none)")
    ap.add_argument("--ranks", default="64,256,1024", help="job sizes in ranks ('' for none)")
    ap.add_argument("--gzip", action="store_true", help="also report each trace gzipped")
    ap.add_argument(
        "--explorer",
        action="store_true",
        help="also opscope explore's first paint at the largest size (Playwright, Chromium)",
    )
    ap.add_argument("--trace", default=DEFAULT_TRACE, help="seed of the events part, in traces/")
    ap.add_argument("--rank-trace", default=DEFAULT_RANK_TRACE, help="seed of the ranks part")
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--tmp", default="/tmp/opscope-scale", help="tiled files (kept for reuse)")
    ap.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    ap.add_argument("--tile", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--job", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--inspect", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    tmp = Path(args.tmp).resolve()
    if args.tile:
        print(json.dumps(tile_child(SHARED / args.trace, args.tile, tmp, args.gzip)))
        return 0
    if args.job:
        print(json.dumps(job_child(SHARED / args.rank_trace, args.job, tmp)))
        return 0
    if args.inspect:
        print(json.dumps(inspect_child(args.inspect)))
        return 0
    events, ranks = _sizes(args.events, "--events", ap), _sizes(args.ranks, "--ranks", ap)
    if args.workers < 1:
        ap.error("--workers must be at least 1")
    for use, rel in ((events, args.trace), (ranks, args.rank_trace)):
        if use and not (SHARED / rel).is_file():
            print(f"{SHARED / rel}: not there (the shared traces are needed)", file=sys.stderr)
            return 1
    tmp.mkdir(parents=True, exist_ok=True)
    compiled()
    out: dict[str, Any] = {}
    if events:
        out["events"] = events_part(args, events, tmp)
    if ranks:
        out["ranks"] = ranks_part(args, ranks, tmp)
    if events and args.explorer:
        out["explorer"] = explorer_part(out["events"]["files"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
