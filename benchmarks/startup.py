"""Start-up of ``opscope report``: seconds from the process's start to the first open of the
trace, and which of opscope's modules (and which heavy libraries) were loaded by then.

Each run is a fresh interpreter (``sys.executable -m opscope report FILE --format json``) with
opscope's modules byte-compiled first, as an installed package's are (an editable checkout
under ``PYTHONDONTWRITEBYTECODE`` would compile them in every run).  The time is measured by
an audit hook on ``open`` inside the child, from the child's first line of Python; the
interpreter's own start (about 20 ms) comes before it.  Goal: <= 0.3 s, with none of the
explorer, MCP, capture's sessions, Dask or DuckDB loaded for a text/JSON report.

Run::

    python benchmarks/startup.py                    # a shared trace, best of 5
    python benchmarks/startup.py FILE --repeat 9
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "traces" / "cuda" / "a100_cudagraph_rank0_of16.json.gz"
sys.path.insert(0, str(Path(__file__).resolve().parent))
HEAVY = ("torch", "duckdb", "dask", "distributed", "mcp", "rich", "pandas", "playwright")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
target, out = sys.argv[1], sys.argv[2]
seen = {}
def hook(event, args):
    if event == "open" and not seen and str(args[0]) == target:
        seen["s"] = time.perf_counter() - t0
        seen["opscope"] = sorted(m for m in sys.modules if m.startswith("opscope"))
        seen["heavy"] = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[3].split(",")))
sys.addaudithook(hook)
import runpy
sys.argv = ["opscope", "report", target, "--format", "json", "-o", out]
try:
    runpy.run_module("opscope", run_name="__main__")
except SystemExit:
    pass
seen["total_s"] = time.perf_counter() - t0
print("RESULT " + json.dumps(seen))
"""


def run_once(path: Path, tmp: Path, i: int) -> dict[str, object]:
    env = dict(os.environ, OPSCOPE_CACHE_DIR=str(tmp / f"cache{i}"))
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = [sys.executable, "-c", CHILD, str(path), str(tmp / "r.json"), ",".join(HEAVY)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"opscope report failed: {(r.stderr or r.stdout).strip()[-300:]}")
    got: dict[str, object] = json.loads(line[len("RESULT ") :])
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=5, help="runs (the best is kept)")
    args = ap.parse_args()
    if not args.file.is_file():
        print(f"{args.file}: no such trace (pass one)", file=sys.stderr)
        return 1
    from report import compiled  # the same byte-compiling as the report benchmark's

    compiled()
    with tempfile.TemporaryDirectory() as d:
        runs = [run_once(args.file.resolve(), Path(d), i) for i in range(args.repeat)]
    best = min(runs, key=lambda r: float(r["s"]))  # type: ignore[arg-type]
    mods = best["opscope"]
    assert isinstance(mods, list)
    times = sorted(float(r["s"]) for r in runs)  # type: ignore[arg-type]
    print(
        f"{args.file.name}: first open of the trace {times[0]:.3f} s (best of {len(runs)}; "
        f"median {times[len(times) // 2]:.3f} s; goal <= 0.3 s); whole report "
        f"{float(best['total_s']):.3f} s"
    )  # type: ignore[arg-type]
    print(
        f"opscope modules loaded by then: {len(mods)}; heavy libraries: "
        f"{', '.join(best['heavy']) or 'none'}"
    )  # type: ignore[arg-type]
    groups = sorted({".".join(m.split(".")[:2]) for m in mods})
    print("packages: " + ", ".join(groups))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
