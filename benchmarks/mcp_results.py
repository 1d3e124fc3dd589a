"""How large and how quick the MCP server's answers are on real traces.

For each trace: every tool called with its largest limits through the SDK's in-memory client;
per tool the structured bytes, the text characters, an estimate of the tokens (bytes / 3 for
JSON, characters / 4 for text) and the call's time.  The baseline, measured in the same run:
``Workspace.open`` + ``report()`` of the same trace in-process (what ``open_trace`` costs
without the server; both read the trace's cache, warmed first), printed as the ratio
open_trace / baseline.

    python benchmarks/mcp_results.py [TRACE ...]     (default: the largest shared traces)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcp import Client

from opscope.mcp.server import build_server
from opscope.service import Workspace

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"
DEFAULT = [
    SHARED / "rocm/mi300x_models/owlv2_large.json.gz",
    SHARED / "cuda/a100_cudagraph_rank0_of16.json.gz",
    SHARED / "cuda/a100_nccl_rank0_of2.json.gz",
]
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("summary", {}),
    ("findings", {"limit": 50}),
    ("finding", {"id": "F1", "events": 50}),
    ("ops", {"limit": 200, "by_shapes": True}),
    ("kernels", {"limit": 200}),
    ("roofline", {"limit": 200}),
    ("lanes", {"limit": 1000}),
    ("events", {"limit": 500}),
    ("chain", {"event_id": 1}),
    ("critical_path", {"limit": 200}),
    ("what_if", {"changes": ["launch_overhead=0"]}),
    ("tables", {}),
    ("sql", {"query": "SELECT * FROM events ORDER BY id", "limit": 1000}),
    ("sql", {"query": "SELECT name, count(*), sum(dur_ns) FROM kernels GROUP BY 1"}),
]


async def measure(path: Path) -> None:
    Workspace().open(path)  # both timings below read the trace's cache, warm
    t = time.perf_counter()
    ws = Workspace()
    ws.open(path)
    ws.report()
    base_s = time.perf_counter() - t
    async with Client(build_server()) as client:
        t = time.perf_counter()
        r = await client.call_tool("open_trace", {"path": str(path)})
        open_s = time.perf_counter() - t
        assert not r.is_error, r.content[0].text
        events = r.structured_content["events"]
        print(
            f"\n{path.name}: {events} events; open_trace {open_s:.2f} s, "
            f"in-process open+report {base_s:.2f} s, ratio {open_s / base_s:.2f}"
        )
        print(f"{'tool':<15}{'bytes':>8}{'chars':>7}{'~tokens':>9}{'ms':>8}  note")
        worst = 0
        for name, args in CALLS:
            t = time.perf_counter()
            r = await client.call_tool(name, args)
            ms = 1e3 * (time.perf_counter() - t)
            data = orjson.dumps(r.structured_content or {})
            text = r.content[0].text
            tokens = len(data) // 3 + len(text) // 4
            worst = max(worst, tokens)
            sc = r.structured_content or {}
            note = (
                "error: " + text[:60]
                if r.is_error
                else (f"next_offset {sc.get('next_offset')}" if sc.get("truncated") else "")
            )
            print(f"{name:<15}{len(data):>8}{len(text):>7}{tokens:>9}{ms:>8.1f}  {note}")
        print(f"largest result: ~{worst} tokens (clients cap a result at about 25k)")


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or [p for p in DEFAULT if p.exists()]
    if not paths:
        sys.exit("no traces: pass paths, or place the shared traces at ../shared/traces")
    for p in paths:
        anyio.run(measure, p)


if __name__ == "__main__":
    main()
