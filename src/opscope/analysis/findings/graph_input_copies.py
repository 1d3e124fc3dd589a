"""graph_input_copies: a CUDA/HIP graph whose inputs are copied in before every replay.

A graph reads and writes the buffers it was captured with.  A program that produces each
step's inputs elsewhere copies them into those buffers before every replay (torch's
``CUDAGraph`` and torch.compile's ``mode="reduce-overhead"`` copy every input that is not a
static address; serving engines copy the step's token ids and positions): copies the device
runs before the graph can start, and host calls before the launch.

Contract: for each graph (its replays grouped as :mod:`opscope.analysis.graph_replays`
groups them) with replays in the window, the copy ops (:data:`COPY_OPS`, outermost ones) the
launching thread ran before each launch, inside the op around the launch (torch's graph
wrappers and the engines copy there) and after the previous graph launch on that thread.  The
graph counts when **every** one of its replays is preceded by at least one copy; one finding
covers them all.  ``time_at_stake_us``: their copies' device time (what writing the inputs
into the graphs' buffers where they are produced would save); ``details`` add the host time,
the bytes copied where the copies record them, and each graph (at most :data:`MAX_GRAPHS`,
most device time first) with its copies per replay.

Threshold: the copies' device time is at least :data:`MIN_WALL_SHARE` (1 %) of the window's
wall time and at least :data:`MIN_AT_STAKE_US`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from opscope.analysis.findings._view import EventView, fmt_us, ids_evidence, view
from opscope.analysis.findings.base import Context, Finding, Rule, make_finding, share_of_wall
from opscope.analysis.graph_replays import replays_of
from opscope.trace.args import decode_args
from opscope.trace.argtexts import top_level_ints
from opscope.trace.graphs.replays import Replay

COPY_OPS = frozenset(("aten::copy_", "aten::_foreach_copy_", "aten::copy", "aten::index_copy_"))
MIN_WALL_SHARE = 0.01
MIN_AT_STAKE_US = 5.0
MAX_GRAPHS = 20  # graphs listed in details


def _device_total(v: EventView) -> np.ndarray:
    """Device time (ns) of each row's subtree of launches (kept on the index)."""

    def build() -> np.ndarray:
        idx = v.index
        work = idx.is_work & (idx.op >= 0)
        own = np.bincount(idx.op[work], weights=idx.dur[work], minlength=idx.n)
        return idx.subtree_sum(own.astype(np.int64))

    got: np.ndarray = v.index.memo("findings.device_total", build)
    return got


def _copies(v: EventView) -> np.ndarray:
    """Rows of the outermost copy ops in the window."""
    idx = v.index
    is_copy = v.is_op & idx.name.isin(COPY_OPS) & v.in_window
    tp = idx.tree_parent
    nested = (tp >= 0) & is_copy[np.maximum(tp, 0)]
    return np.flatnonzero(is_copy & ~nested)


class _CopyBytes:
    """Bytes the copies' device copies record (their ``bytes`` arg), read once for all the
    outermost copies of the window: a device copy counts for the copies among the ops above
    its launching op (its chain), and for a set of copies once when any of its chain is in
    it.  The chains are walked a level a pass for every device copy at once, and only the
    device copies under some copy have their ``args`` read (one take of the texts)."""

    def __init__(self, v: EventView, copies: np.ndarray) -> None:
        idx = v.index
        work = np.flatnonzero(idx.is_work & idx.kind.eq("memcpy") & (idx.op >= 0) & v.in_window)
        is_copy = np.zeros(idx.n, dtype=bool)
        is_copy[copies] = True
        tp = idx.tree_parent
        device: list[np.ndarray] = []
        copy: list[np.ndarray] = []
        row, at = work, idx.op[work].astype(np.int64)
        while len(at):  # each device copy's ancestors from its op up, one level a pass
            hit = is_copy[at]
            device.append(row[hit])
            copy.append(at[hit])
            up = tp[at]
            more = up >= 0
            row, at = row[more], up[more].astype(np.int64)
        dev = np.concatenate(device) if device else np.zeros(0, dtype=np.int64)
        cop = np.concatenate(copy) if copy else np.zeros(0, dtype=np.int64)
        rows, inverse = np.unique(dev, return_inverse=True)
        texts = idx.args_take(rows) if len(rows) else pa.array([], pa.string())
        plain, known, sure = top_level_ints(texts, "bytes")
        size: list[int] = plain.tolist()  # Python ints: a recorded size may pass 64 bits
        for i in np.flatnonzero(~sure).tolist():  # the texts a decoder must read
            b = decode_args(texts[i].as_py()).get("bytes")
            if isinstance(b, int) or (isinstance(b, str) and b.isdigit()):
                size[i], known[i] = int(b), True
        keep = known[inverse]
        self._device = dev[keep]
        self._copy = cop[keep]
        self._size = [size[i] for i in inverse[keep].tolist()]

    def of(self, rows: np.ndarray) -> int:
        """The bytes of the device copies made under the copies ``rows``, each once."""
        hit = np.flatnonzero(np.isin(self._copy, rows))
        if not len(hit):
            return 0
        _, first = np.unique(self._device[hit], return_index=True)
        return sum(self._size[i] for i in hit[first].tolist())


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    if v.device_is_host:
        return []
    replays = [r for r in replays_of(v.index) if v.in_window[r.launch]]
    if not replays:
        return []
    copies = _copies(v)
    if not len(copies):
        return []
    thread = v.index.thread
    per_thread: dict[int, np.ndarray] = {}
    for t in np.unique(thread[copies]).tolist():
        rows = copies[thread[copies] == t]
        per_thread[int(t)] = rows[np.argsort(v.start[rows], kind="stable")]
    prev_end: dict[int, int] = {}
    before: list[tuple[Replay, np.ndarray]] = []
    for r in sorted(replays, key=lambda r: (int(v.start[r.launch]), r.launch)):
        t = int(thread[r.launch])
        rows = per_thread.get(t, np.zeros(0, dtype=np.int64))
        lo = prev_end.get(t, -(2**62))
        if r.op >= 0:  # the copies the op around the launch made before it
            lo = max(lo, int(v.start[r.op]))
        s = v.start[rows]
        sel = rows[(s >= lo) & (s < v.start[r.launch])]
        before.append((r, sel))
        prev_end[t] = int(v.end[r.launch])
    groups: dict[tuple[object, ...], list[tuple[Replay, np.ndarray]]] = {}
    for r, sel in before:
        groups.setdefault(r.key(), []).append((r, sel))
    dev = _device_total(v)
    copy_bytes = _CopyBytes(v, copies)
    graphs: list[dict[str, Any]] = []
    picked: list[np.ndarray] = []
    for number, group in enumerate(groups.values(), 1):
        if not all(len(sel) for _, sel in group):
            continue
        rows = np.concatenate([sel for _, sel in group])
        first = group[0][0]
        picked.append(rows)
        graphs.append(
            {
                "graph": f"{v.name_of(first.launch)} #{number}",
                "op": v.name_of(first.op) if first.op >= 0 else None,
                "replays": len(group),
                "copies": len(rows),
                "copies_per_replay": len(rows) / len(group),
                "device_us": float(dev[rows].sum()) / 1e3,
                "host_us": float(v.dur[rows].sum()) / 1e3,
                "bytes": copy_bytes.of(rows),
            }
        )
    device_us = sum(g["device_us"] for g in graphs)
    if device_us < MIN_AT_STAKE_US or share_of_wall(ctx, device_us) < MIN_WALL_SHARE:
        return []
    order = sorted(range(len(graphs)), key=lambda i: -graphs[i]["device_us"])
    graphs = [graphs[i] for i in order]
    rows = np.concatenate([picked[i] for i in order])
    replays_n = sum(g["replays"] for g in graphs)
    lead = graphs[0]
    if len(graphs) == 1:
        where = f" in {lead['op']}" if lead["op"] else ""
        what = f"Every replay of {lead['graph']}{where} copies its inputs in first"
    else:
        what = f"Every replay of {len(graphs)} graphs copies its inputs in first"
    per = len(rows) / replays_n
    host_us = sum(g["host_us"] for g in graphs)
    return [
        make_finding(
            ctx.wall_us,
            title=(
                f"{what} ({per:.3g} copies per replay: {fmt_us(device_us)} of device time, "
                f"{fmt_us(host_us)} on the host)"
            ),
            time_at_stake_us=device_us,
            evidence=[ids_evidence(v, rows, note="copies before the graphs' replays")],
            recommendation=(
                "A graph reads the buffers it was captured with, so each step's inputs are "
                "copied into them before the replay. Write the inputs where the graph reads "
                "them (produce them into the static buffers, keep the same input tensors "
                "between replays; with torch.compile(mode='reduce-overhead') mark them "
                "static, torch._dynamo.mark_static_address), or capture the op that produces "
                "them into the graph."
            ),
            confidence="high" if replays_n >= 3 else "medium",
            details={
                "graphs": graphs[:MAX_GRAPHS],
                "replays": replays_n,
                "copies": len(rows),
                "device_us": device_us,
                "host_us": host_us,
                "bytes": sum(g["bytes"] for g in graphs),
            },
        )
    ]


RULE = Rule(
    name="graph_input_copies",
    description="A CUDA/HIP graph whose inputs are copied in before every replay",
    find=run,
)
