"""Linking: call nesting, the framework op behind every runtime call and device execution, and
the profiler step of every event.

Rules (documented in docs/trace-model.md):

* ``parent_id`` - per (pid, tid), host events (framework and runtime) nest by time containment:
  sorted by start ascending, duration descending, the enclosing event is the innermost one still
  open that fully contains the event.  Device events have no parent.
* ``op_id`` - a framework event is its own op.  A runtime event's op is its innermost enclosing
  framework event of kind ``op`` or ``annotation`` (ProfilerStep and Python frames are skipped).
  A device event takes the op of the runtime call with the same ``correlation`` (same pid space),
  else of the ``ac2g`` flow that ends on it, else the framework op carrying its ``External id``.
* ``step`` - ProfilerStep#N intervals; host events by containment of their start, device events
  from the event that launched them, else by containment.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from opscope.trace.kineto import Flow, RawColumns

_HOST_SOURCES = frozenset(("framework", "runtime"))
_OP_KINDS = frozenset(("op", "annotation"))


def nest(cols: RawColumns) -> list[int | None]:
    """``parent_id`` for every row (row ids are positions)."""
    n = len(cols)
    parent: list[int | None] = [None] * n
    lanes: dict[tuple[str, str], list[int]] = {}
    source = cols.source
    for i in range(n):
        if source[i] in _HOST_SOURCES:
            lanes.setdefault((cols.pid[i], cols.tid[i]), []).append(i)
    start, dur = cols.start_ns, cols.dur_ns
    for rows in lanes.values():
        rows.sort(key=lambda r: (start[r], -dur[r], r))
        stack: list[tuple[int, int]] = []  # (row, end_ns)
        for r in rows:
            s = start[r]
            e = s + dur[r]
            while stack and stack[-1][1] <= s:
                stack.pop()
            # innermost open event that fully contains this one
            for j in range(len(stack) - 1, -1, -1):
                if stack[j][1] >= e:
                    parent[r] = stack[j][0]
                    break
            stack.append((r, e))
    return parent


def attribute_ops(
    cols: RawColumns, parent: Sequence[int | None], flows: Sequence[Flow]
) -> list[int | None]:
    """``op_id`` for every row."""
    n = len(cols)
    op: list[int | None] = [None] * n
    source, kind = cols.source, cols.kind
    for i in range(n):
        src = source[i]
        if src == "framework":
            op[i] = i
        elif src == "runtime":
            p = parent[i]
            while p is not None and not (source[p] == "framework" and kind[p] in _OP_KINDS):
                p = parent[p]
            op[i] = p

    ext_to_op: dict[int, int] = {}
    for i in range(n):
        if source[i] == "framework" and kind[i] in _OP_KINDS:
            x = cols.external_id[i]
            if x is not None and x not in ext_to_op:
                ext_to_op[x] = i
    launcher = launchers(cols, flows)
    for i in range(n):
        if source[i] != "device":
            continue
        via = launcher[i]
        if via is not None:
            op[i] = op[via]
        if op[i] is None:
            x = cols.external_id[i]
            if x is not None:
                op[i] = ext_to_op.get(x)
    return op


def launchers(cols: RawColumns, flows: Sequence[Flow]) -> list[int | None]:
    """For each device event, the runtime row that launched it (None when unknown)."""
    n = len(cols)
    # Correlation ids are unique per process; a device event's pid is the GPU index, not the
    # host pid, so the first runtime call with that id wins.
    by_corr: dict[int, int] = {}
    for i in range(n):
        c = cols.correlation[i]
        if c is not None and cols.source[i] == "runtime":
            by_corr.setdefault(c, i)
    flow_target = _flow_links(cols, flows)
    out: list[int | None] = [None] * n
    for i in range(n):
        if cols.source[i] == "device":
            c = cols.correlation[i]
            out[i] = by_corr.get(c) if c is not None else None
            if out[i] is None:
                out[i] = flow_target.get(i)
    return out


def _flow_links(cols: RawColumns, flows: Sequence[Flow]) -> dict[int, int]:
    """device row -> runtime row, from ``ac2g``/``async_cpu_to_gpu`` flow pairs.

    Only needed for traces whose device events carry no ``correlation`` argument; a flow end binds
    to the event starting at its timestamp on its (pid, tid).
    """
    if not flows:
        return {}
    starts: dict[int, Flow] = {}
    ends: dict[int, Flow] = {}
    for f in flows:
        if f.cat not in ("ac2g", "async_cpu_to_gpu", "async_gpu"):
            continue
        (starts if f.phase == "s" else ends)[f.id] = f
    if not ends:
        return {}
    by_lane: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for i in range(len(cols)):
        by_lane.setdefault((cols.pid[i], cols.tid[i]), []).append((cols.start_ns[i], i))
    for rows in by_lane.values():
        rows.sort()

    def at(pid: str, tid: str, ts: int) -> int | None:
        rows = by_lane.get((pid, tid))
        if not rows:
            return None
        k = bisect.bisect_left(rows, (ts, -1))
        if k < len(rows) and rows[k][0] == ts:
            return rows[k][1]
        # enclosing: latest start before ts that still covers it
        k -= 1
        while k >= 0:
            s, r = rows[k]
            if s + cols.dur_ns[r] >= ts:
                return r
            if ts - s > 10**9:
                break
            k -= 1
        return None

    out: dict[int, int] = {}
    for fid, end in ends.items():
        begin = starts.get(fid)
        if begin is None:
            continue
        dev = at(end.pid, end.tid, end.ts_ns)
        host = at(begin.pid, begin.tid, begin.ts_ns)
        if dev is not None and host is not None and cols.source[dev] == "device":
            out[dev] = host
    return out


def assign_steps(cols: RawColumns, op: Sequence[int | None]) -> list[int | None]:
    """ProfilerStep index for every row (None outside any step)."""
    n = len(cols)
    steps: list[tuple[int, int, int]] = []  # (start, end, index)
    for i in range(n):
        if cols.kind[i] == "step":
            try:
                idx = int(cols.name[i].split("#", 1)[1])
            except (IndexError, ValueError):
                continue
            steps.append((cols.start_ns[i], cols.start_ns[i] + cols.dur_ns[i], idx))
    out: list[int | None] = [None] * n
    if not steps:
        return out
    steps.sort()
    starts = [s[0] for s in steps]

    def containing(ts: int) -> int | None:
        k = bisect.bisect_right(starts, ts) - 1
        if k >= 0 and ts < steps[k][1]:
            return steps[k][2]
        if k >= 0 and ts == steps[k][0]:
            return steps[k][2]
        return None

    for i in range(n):
        if cols.source[i] != "device":
            out[i] = containing(cols.start_ns[i])
    for i in range(n):
        if cols.source[i] == "device":
            o = op[i]
            out[i] = out[o] if o is not None else containing(cols.start_ns[i])
    return out
