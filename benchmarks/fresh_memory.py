"""What this machine charges for memory a process touches for the first time, by size.

The 10M-event goal compares time per event at 10M with that at 1M; a 10M report touches
about ten times the memory (peak RSS 7-8 GB against 0.9), and the kernel's share of its time
(page faults) is what grows faster than the events (docs/scale.md).  This script measures the
machine alone: a fresh interpreter fills one NumPy array of N GB (``np.ones``), with NumPy's
transparent-huge-page advice on (its default; ``--no-huge``: off), twice per size: *cold*,
after a pause, and *warm*, at once after a run of the same size.  It prints the wall seconds
per GB, the system seconds and the page faults.

On a bare machine the cost per GB stays about flat, cold or warm.  On a virtual machine
whose free pages go back to the host (free page reporting), memory freed a while ago is
faulted in from the host again, many times dearer than memory just freed: that cost is the
machine's, not the analysis's, and it is what a 10M report pays beyond the 1M one.

Run::

    python benchmarks/fresh_memory.py                    # 0.5, 1, 2, 4 and 7 GB (capped)
    python benchmarks/fresh_memory.py --gb 1 6 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHILD = r"""
import json, resource, sys, time
import numpy as np
gb, huge = float(sys.argv[1]), sys.argv[2] == "1"
setter = getattr(np._core.multiarray, "_set_madvise_hugepage", None)
if setter is not None:
    setter(huge)
before = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
a = np.ones(int(gb * 2**30) // 8)
wall = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({
    "gb": gb, "huge": huge, "wall_s": wall,
    "sys_s": after.ru_stime - before.ru_stime,
    "faults": after.ru_minflt - before.ru_minflt,
}))
"""


def available_gb() -> float:
    """MemAvailable in GB (Linux), else infinity."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("inf")


def measure(gb: float, huge: bool) -> dict[str, Any]:
    """One fresh interpreter filling ``gb`` GB; its wall and system seconds and faults."""
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(gb), "1" if huge else "0"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Seconds per GB of memory touched for the first time, by size.",
        epilog=__doc__.split("Run::", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--gb", nargs="+", type=float, default=[0.5, 1, 2, 4, 7])
    ap.add_argument("--repeat", type=int, default=1, help="runs per size and state (best kept)")
    ap.add_argument(
        "--no-huge",
        dest="huge",
        action="store_false",
        help="NumPy's transparent-huge-page advice off (4 KiB pages)",
    )
    ap.add_argument(
        "--pause",
        type=float,
        default=10.0,
        help="seconds to wait before each run (a virtual machine hands freed pages back then)",
    )
    ap.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    cap = 0.4 * available_gb()
    sizes = [g for g in args.gb if 0 < g <= cap]
    if len(sizes) < len(args.gb):
        print(f"sizes over {cap:.1f} GB (40 % of the memory available) left out", file=sys.stderr)
    if not sizes or args.repeat < 1:
        print("no size to measure" if not sizes else "--repeat must be 1 or more", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    head = ("GB", "cold s/GB", "sys s", "warm s/GB", "sys s", "faults")
    print(" ".join(f"{h:>{w}s}" for h, w in zip(head, (5, 10, 6, 10, 6, 9), strict=True)))
    for gb in sizes:
        # cold: after a pause, as the pages a 10M report needs beyond what the guest still
        # holds; warm: at once after a run of the same size, as memory just freed
        cold = min((_paused(gb, args.huge, args.pause) for _ in range(args.repeat)), key=_wall)
        warm = min((measure(gb, args.huge) for _ in range(args.repeat)), key=_wall)
        row = {
            "gb": gb,
            "huge": args.huge,
            "cold": {**cold, "s_per_gb": cold["wall_s"] / gb},
            "warm": {**warm, "s_per_gb": warm["wall_s"] / gb},
        }
        rows.append(row)
        print(
            f"{gb:5.1f} {row['cold']['s_per_gb']:10.2f} {cold['sys_s']:6.2f} "
            f"{row['warm']['s_per_gb']:10.2f} {warm['sys_s']:6.2f} {cold['faults']:9d}"
        )
    over = [r["cold"]["s_per_gb"] / max(r["warm"]["s_per_gb"], 1e-9) for r in rows]
    print(
        f"cold over warm, s/GB: {min(over):.1f} to {max(over):.1f} (about 1 where memory costs "
        "the same however long ago it was freed)"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


def _paused(gb: float, huge: bool, pause: float) -> dict[str, Any]:
    time.sleep(pause)
    return measure(gb, huge)


def _wall(row: dict[str, Any]) -> float:
    return float(row["wall_s"])


if __name__ == "__main__":
    raise SystemExit(main())
