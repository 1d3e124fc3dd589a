"""Dependency chains: framework op -> runtime launch -> device execution, and back.

Given any event, :func:`dependency_chain` follows the links the trace engine recorded
(``op_id``: the innermost framework op that issued a runtime call or device execution;
``launch_id``: the runtime call that launched a device execution; ``parent_id``: call nesting)
and returns each path as a list of **hops**, with each hop's start and duration and the delay
from the hop before it:

* ``offset_ns``: this hop's start minus the previous hop's start (a launch inside an op starts
  ``offset_ns`` after the op; a kernel starts ``offset_ns`` after its launch call began);
* ``gap_ns``: this hop's start minus the previous hop's end (negative while still inside it:
  a launch nested in its op; positive for the queueing delay between a launch call's return and
  the kernel's start on the device).

From a framework op the chain covers every runtime call made while the op ran on its thread
(its own and its children's launches, each path starting at the innermost op that issued it);
from a runtime call, its op and the device work it launched; from a device execution, its
launch and the op that issued it ("and back").  A captured op replayed in a CUDA/HIP graph
(a zero-length copy the capture merge put at the graph launch, :mod:`opscope.trace.graphs`)
chains to the launch and the kernels it and its captured children launched there; a replayed
kernel chains back through its captured op.  ``stack`` is the framework call stack above the
chain's op, outermost first.  Times are relative to the viewport's origin (``t``), as in
:mod:`opscope.trace.viewport`; links are followed through the trace's event index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opscope.trace.viewport import Viewport

MAX_PATHS = 200

ROLE = {0: "framework op", 1: "runtime launch", 2: "device execution"}


def _hop(index: Viewport, row: int, prev: dict[str, Any] | None) -> dict[str, Any]:
    rec = index.record(row)
    rec["role"] = ROLE.get(int(index.group[row]), "event")
    if prev is None:
        rec["offset_ns"] = None
        rec["gap_ns"] = None
    else:
        rec["offset_ns"] = rec["t"] - prev["t"]
        rec["gap_ns"] = rec["t"] - (prev["t"] + prev["dur_ns"])
    return rec


def _path(index: Viewport, rows: list[int]) -> list[dict[str, Any]]:
    hops: list[dict[str, Any]] = []
    for r in rows:
        hops.append(_hop(index, r, hops[-1] if hops else None))
    return hops


def _launched(index: Viewport, runtime_row: int) -> list[int]:
    """Device executions launched by this runtime call, in start order."""
    return [int(r) for r in index.launched_rows(runtime_row)]


def _stack(index: Viewport, row: int) -> list[int]:
    out: list[int] = []
    p = int(index.parent_row[row])
    while p >= 0 and len(out) < 256:
        if index.group[p] == 0:
            out.append(p)
        p = int(index.parent_row[p])
    return out[::-1]


def _runtime_lane(index: Viewport, op_row: int) -> int | None:
    """The runtime lane of the op's thread (same rank, process and thread)."""
    lane = index.lanes[int(index.lane_of[op_row])]
    for other in index.lanes:
        if (other.group, other.rank, other.pid, other.lane) == (
            "runtime",
            lane.rank,
            lane.pid,
            lane.lane,
        ):
            return other.id
    return None


def _replayed(index: Viewport, row: int) -> list[int] | None:
    """The device executions of a captured op's copy and its captured children in a graph
    replay (start order), or None for any other event."""
    info = index.trace.graph_capture
    if info is None or index.dur[row] != 0 or info.op_of_rows(np.array([row]))[0] < 0:
        return None
    ix = index.index
    todo: list[int] = [row]
    seen: list[int] = []
    while todo and len(seen) < 4096:
        r = todo.pop()
        seen.append(r)
        todo.extend(int(c) for c in ix.pointing_at("tree_parent", r))
    rows = np.concatenate([index.issued_rows(r) for r in seen])
    rows = rows[index.group[rows] == 2]
    if not len(rows):
        return None
    return [int(r) for r in rows[np.argsort(index.rel[rows], kind="stable")]]


def dependency_chain(index: Viewport, event_id: int, max_paths: int = MAX_PATHS) -> dict[str, Any]:
    """The chain through ``event_id`` (see the module docstring); ``KeyError`` if unknown."""
    row = index.row_of(event_id)
    if row < 0:
        raise KeyError(event_id)
    group = int(index.group[row])
    paths: list[list[int]] = []
    truncated = 0
    note: str | None = None
    op_row = row
    replayed = _replayed(index, row) if group == 0 else None
    if group == 2:  # device execution: back to its launch and the op that issued it
        launch = int(index.launch_row[row])
        op = int(index.op_row[row])  # a replayed kernel's captured op, else its launch's
        if op < 0 and launch >= 0:
            op = int(index.op_row[launch])
        path = [r for r in (op, launch) if r >= 0] + [row]
        paths.append(path)
        op_row = op if op >= 0 else row
        if launch < 0:
            note = "no launch recorded for this device execution (no correlation in the trace)"
    elif group == 1:  # runtime call: its op and what it launched
        op = int(index.op_row[row])
        paths.append(([op] if op >= 0 else []) + [row] + _launched(index, row))
        op_row = op if op >= 0 else row
    elif replayed is not None:  # a captured op: the graph launch and its kernels
        launch = int(index.launch_row[replayed[0]])
        truncated = max(0, len(replayed) - max_paths)
        paths.append([row, *([launch] if launch >= 0 else []), *replayed[:max_paths]])
        note = "a captured op, replayed in a CUDA/HIP graph: its kernels ran in the graph launch"
    else:  # framework event: every launch made while it ran on its thread
        rt_lane = _runtime_lane(index, row)
        if rt_lane is not None:
            rts = index.rows_starting_in(rt_lane, int(index.rel[row]), int(index.end[row]))
            truncated = max(0, len(rts) - max_paths)
            for rt in rts[:max_paths].tolist():
                issuer = int(index.op_row[rt])
                head = [issuer] if issuer >= 0 else [row]
                paths.append([*head, rt, *_launched(index, rt)])
        if not any(index.group[r] == 2 for p in paths for r in p):
            # runtime calls on other lanes that the trace attributes to this op (Neuron's
            # runtime runs on its own threads, e.g. nrta_execute_schedule on NC lanes)
            issued = index.issued_rows(row)
            issued = issued[index.group[issued] == 1]
            truncated = max(truncated, len(issued) - max_paths)
            for rt in issued[:max_paths].tolist():
                launched = _launched(index, rt)
                if launched:
                    paths.append([row, rt, *launched])
        if not paths:
            paths.append([row])
            note = (
                "no runtime calls while this event ran: its own execution is the work (on a "
                "CPU-only trace the CPU is the device)"
            )
    # paths that reach the device first (a stable sort keeps time order within each kind)
    paths.sort(key=lambda p: not any(index.group[r] == 2 for r in p))
    device_rows = sorted({r for p in paths for r in p if index.group[r] == 2} | set(replayed or ()))
    device_ns = int(index.dur[device_rows].sum()) if device_rows else 0
    return {
        "event": index.record(row),
        "stack": [index.record(r) for r in _stack(index, op_row)],
        "paths": [_path(index, p) for p in paths],
        "truncated": truncated,
        "device_executions": len(device_rows),
        "device_ns": device_ns,
        "note": note,
    }
