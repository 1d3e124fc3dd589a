"""graph_recapture: CUDA/HIP graphs captured (or captured again) inside the window.

Capturing a graph runs the captured code once on the host, in capture mode, then instantiates
the graph (``cudaGraphInstantiate``): host time, and no device work meanwhile.  A serving
engine captures its graphs at start-up; a capture inside the profiled window means a new shape
was met (a batch size, a sequence length torch.compile's ``mode="reduce-overhead"`` had not
seen, a graph tree re-recorded), or warm-up was profiled.

Contract: the capture windows the trace records (:func:`opscope.trace.graphs.captures.
find_captures`: ``StreamBeginCapture`` to ``StreamEndCapture`` on one thread, with at least
one node) whose begin call is in the window, and the graph instantiations of the window.
A capture is **again** when a graph replay came before it in the trace, or when an earlier
capture made the same node sequence; graphs whose replays carry several ``graph id`` for
one node sequence (re-instantiated) are counted too.  ``time_at_stake_us``: the host time of
the captures (begin call to end call) and of the instantiations.  ``details``: each capture
window (``windows``: start, host time, nodes, the annotation around it, again or not), the
re-instantiated graphs.

Threshold: at least one capture or re-instantiated graph in the window; the severity follows
the host time's share of the window (at least ``low`` when a capture came again).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opscope.analysis.findings._view import EventView, fmt_us, range_evidence, view
from opscope.analysis.findings.base import (
    Context,
    Finding,
    Rule,
    make_finding,
    severity_of,
    share_of_wall,
)
from opscope.analysis.graph_replays import replays_of
from opscope.trace.graphs.captures import find_captures
from opscope.trace.graphs.records import Capture

INSTANTIATE_PATTERN = "graphinstantiate"
EVIDENCE_CAPTURES = 10


def captures_of(ctx: Context) -> list[Capture]:
    """The trace's own capture windows (kept on the index)."""
    trace = ctx.trace
    got: list[Capture] = trace.index.memo(
        "graphs.captures",
        lambda: find_captures(trace, source=", ".join(trace.meta.paths), in_trace=True),
    )
    return got


def _reinstantiated(v: EventView) -> list[dict[str, Any]]:
    """Node sequences whose replays carry more than one ``graph id``."""
    ids: dict[tuple[str, ...], set[int]] = {}
    for r in replays_of(v.index):
        if r.graph_id is not None and v.in_window[r.launch]:
            ids.setdefault(r.names, set()).add(r.graph_id)
    return [
        {"kernels": len(names), "graph_ids": sorted(g)} for names, g in ids.items() if len(g) > 1
    ]


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    if v.device_is_host:
        return []
    caps = [c for c in captures_of(ctx) if v.in_window[c.begin]]
    again_ids = _reinstantiated(v)
    if not caps and not again_ids:
        return []
    replays = replays_of(v.index)
    first_replay = min((int(v.start[r.launch]) for r in replays), default=None)
    seen: set[tuple[Any, ...]] = set()
    rows: list[dict[str, Any]] = []
    host_ns = 0
    for c in captures_of(ctx):
        key = (c.kinds, c.names)
        again = key in seen or (first_replay is not None and first_replay < c.start_ns)
        seen.add(key)
        if not v.in_window[c.begin]:
            continue
        lo, hi = int(v.start[c.begin]), int(v.end[c.end])
        host_ns += hi - lo
        rows.append(
            {
                "start_ns": lo,
                "end_ns": hi,
                "host_us": (hi - lo) / 1e3,
                "nodes": len(c.launches),
                "label": c.label,
                "again": bool(again),
                "begin_id": v.event_id(c.begin),
            }
        )
    inst = np.flatnonzero(
        v.index.is_runtime
        & v.in_window
        & v.index.name.matches(INSTANTIATE_PATTERN, ignore_case=True)
    )
    inst_us = float(v.dur[inst].sum()) / 1e3
    total_us = host_ns / 1e3 + inst_us
    n_again = sum(1 for r in rows if r["again"]) + len(again_ids)
    sh = share_of_wall(ctx, total_us)
    severity = severity_of(sh)
    if n_again and severity == "info":
        severity = "low"
    evidence = [range_evidence(r["start_ns"], r["end_ns"], note="graph capture") for r in rows][
        :EVIDENCE_CAPTURES
    ]
    if rows:
        what = f"{len(rows)} graph capture{'s' if len(rows) != 1 else ''} in the window"
        if n_again:
            what += f" ({n_again} again, after replays or of a graph captured before)"
    else:
        what = f"{len(again_ids)} graph{'s' if len(again_ids) != 1 else ''} re-instantiated"
    return [
        make_finding(
            ctx.wall_us,
            title=f"{what}: {fmt_us(total_us)} of host time capturing and instantiating",
            time_at_stake_us=total_us,
            evidence=evidence,
            recommendation=(
                "Graphs are captured while the program runs: each capture runs the captured "
                "code on the host and instantiates the graph, and the device waits. Capture "
                "every shape up front (vLLM's cudagraph_capture_sizes, SGLang's "
                "--cuda-graph-bs), pad inputs to the captured sizes instead of meeting new "
                "ones (torch.compile(mode='reduce-overhead') records a graph per new shape: "
                "mark the dimension dynamic or pad), and profile after warm-up. A capture "
                "trace of its own is what --graph-capture reads to attribute replays."
            ),
            confidence="high" if rows else "medium",
            severity=severity,
            details={
                "windows": rows,
                "again": n_again,
                "capture_host_us": host_ns / 1e3,
                "instantiations": len(inst),
                "instantiate_us": inst_us,
                "reinstantiated_graphs": again_ids,
            },
        )
    ]


RULE = Rule(
    name="graph_recapture",
    description="CUDA/HIP graphs captured, or captured again, inside the window",
    find=run,
)
