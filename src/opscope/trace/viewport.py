"""Viewport queries over the event table: lanes, level-of-detail windows, single events.

A timeline front-end needs three things from a trace, fast, whatever its size:

* the **lanes** to draw, grouped as a profiler shows them — ``framework`` (ops, annotations and
  Python frames, per thread), ``runtime`` (runtime/driver calls, per thread) and ``hardware``
  (device work, per stream or NeuronCore) — per rank, each with the number of nesting rows;
* the events of some lanes inside a time window at a given pixel width, **level of detail**
  applied: an event at least one pixel wide is returned as itself, the events narrower than a
  pixel are summed into one cell per (row, pixel) — so the answer is bounded by the pixels on
  screen, not by the events in the trace (1M events cost the same as 1k once zoomed out);
* one event in full (name, times, lane, links, ``args`` decoded) for a details panel.

:class:`Viewport` is built once per trace over the trace's event index
(:class:`opscope.trace.index.EventIndex`, ``Trace.index``: ids, codes, links): it adds only
what drawing needs - the lanes, each event's nesting row, the events of each lane sorted by
start - and answers each query with vectorised numpy in milliseconds.  Times it returns are
integer nanoseconds **relative to** ``Viewport.origin_ns`` (the first event's start) under the
key ``t``, because absolute nanosecond timestamps (~1.7e18) do not survive a JavaScript number;
records also carry the absolute ``start_ns``.  This module never imports a front-end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from opscope.trace.args import decode_args
from opscope.trace.model import Trace

GROUPS = ("framework", "runtime", "hardware")
_GROUP_OF_SOURCE = {"framework": 0, "other": 0, "runtime": 1, "device": 2}

# What a response may hold before it stops adding individual events (the rest are aggregated).
MAX_EVENTS_PER_QUERY = 60_000


@dataclass(frozen=True)
class Lane:
    """One drawn lane: a (rank, group, process, thread/stream) with its nesting rows."""

    id: int
    rank: int
    group: str  # framework | runtime | hardware
    pid: str
    lane: str  # as in the event table: "thread 6240", "stream 7", ...
    title: str  # for display: the lane plus the thread or process name when known
    rows: int
    events: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rank": self.rank,
            "group": self.group,
            "pid": self.pid,
            "lane": self.lane,
            "title": self.title,
            "rows": self.rows,
            "events": self.events,
        }


def _nest_depth(parent_row: np.ndarray, same_group: np.ndarray) -> np.ndarray:
    """Depth of each event in its call tree (``parent_row`` already limited to ancestors drawn
    on the same lane); ``same_group`` masks the events that have such a parent at all."""
    n = len(parent_row)
    depth = np.zeros(n, dtype=np.int32)
    p = np.where(same_group, parent_row, -1)
    for _ in range(512):  # deeper stacks than this are drawn flattened
        live = np.flatnonzero(p >= 0)
        if len(live) == 0:
            break
        depth[live] += 1
        p[live] = parent_row[p[live]]
    return depth


def _stack_rows(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Greedy rows for overlapping intervals (sorted by start): first row free at the start."""
    rows = np.zeros(len(start), dtype=np.int32)
    row_end: list[int] = []
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        for r, re_ in enumerate(row_end):
            if re_ <= s:
                row_end[r] = e
                rows[i] = r
                break
        else:
            rows[i] = len(row_end)
            row_end.append(e)
    return rows


class Viewport:
    """Per-trace lanes and nesting rows for viewport, event and chain queries (build once,
    query many)."""

    def __init__(self, trace: Trace) -> None:
        ix = trace.index
        self.trace = trace
        self.index = ix
        n = ix.n
        self.n = n
        self.ids = ix.ids
        self.start = ix.start
        self.dur = np.maximum(ix.dur, 0)
        self.origin_ns = int(self.start.min()) if n else 0
        self.rel = self.start - self.origin_ns
        self.end = self.rel + self.dur
        self.rank = ix.rank
        self.name_code, self.names = ix.name.codes, [str(v) for v in ix.name.values]
        self.source_code, self.sources = ix.source.codes, [str(v) for v in ix.source.values]
        self.kind_code, self.kinds = ix.kind.codes, [str(v) for v in ix.kind.values]
        pid_code, self.pids = ix.pid.codes.astype(np.int64), [str(v) for v in ix.pid.values]
        lane_code, self.lane_names = (
            ix.lane.codes.astype(np.int64),
            [str(v) for v in ix.lane.values],
        )
        tid_code, self.tids = ix.tid.codes, [str(v) for v in ix.tid.values]
        self.pid_code, self.lane_code, self.tid_code = pid_code, lane_code, tid_code
        self.parent_row = ix.parent
        self.op_row = ix.op
        self.launch_row = ix.launch
        self.step = ix.step

        group_of_code = np.array(
            [_GROUP_OF_SOURCE.get(s, 0) for s in self.sources] or [0], dtype=np.int64
        )
        self.group = group_of_code[np.maximum(self.source_code, 0)]
        # lanes: (rank, group, pid, lane) in a stable, readable order
        key = None
        if n:
            # one int64 per (rank, group, pid, lane): a 1-D unique is 30x faster than axis=0
            n_pid, n_lane = len(self.pids) + 1, len(self.lane_names) + 1
            rank0 = self.rank - int(self.rank.min())
            key = ((rank0 * 3 + self.group) * n_pid + (pid_code + 1)) * n_lane + (lane_code + 1)
        lanes: list[Lane] = []
        self.lane_of = np.zeros(n, dtype=np.int64)
        self.depth = np.zeros(n, dtype=np.int32)
        self.lane_rows: list[np.ndarray] = []  # per lane: event rows sorted by start
        if key is not None:
            ukeys, inverse = np.unique(key, return_inverse=True)
            inverse = inverse.reshape(-1)
            uniq = np.stack(
                [
                    ukeys // (n_lane * n_pid * 3) + int(self.rank.min()),
                    (ukeys // (n_lane * n_pid)) % 3,
                    (ukeys // n_lane) % n_pid - 1,
                    ukeys % n_lane - 1,
                ],
                axis=1,
            )
            order = sorted(
                range(len(uniq)),
                key=lambda i: (
                    int(uniq[i][0]),
                    int(uniq[i][1]),
                    _natural(self.pids[uniq[i][2]] if uniq[i][2] >= 0 else ""),
                    _natural(self.lane_names[uniq[i][3]] if uniq[i][3] >= 0 else ""),
                ),
            )
            new_id = np.empty(len(uniq), dtype=np.int64)
            new_id[np.array(order, dtype=np.int64)] = np.arange(len(uniq))
            self.lane_of = new_id[inverse]
            same_group = np.zeros(n, dtype=bool)
            # an event's ancestor counts for its depth when it is drawn on the same lane
            has_parent = self.parent_row >= 0
            same_group[has_parent] = (
                self.lane_of[self.parent_row[has_parent]] == self.lane_of[has_parent]
            )
            nest_parent = np.where(has_parent & same_group, self.parent_row, -1)
            self.depth = _nest_depth(nest_parent, nest_parent >= 0)
            by_lane = np.lexsort((self.rel, self.lane_of))
            bounds = np.searchsorted(self.lane_of[by_lane], np.arange(len(uniq) + 1))
            thread_names = trace.meta.thread_names
            for new, old in enumerate(order):
                rows = by_lane[bounds[new] : bounds[new + 1]]
                r, g, p, ln = (int(x) for x in uniq[old])
                pid = self.pids[p] if p >= 0 else ""
                lane_name = self.lane_names[ln] if ln >= 0 else ""
                if g == 2 or (self.depth[rows] == 0).all():
                    # device streams carry no call nesting: stack what overlaps
                    s, e = self.rel[rows], self.end[rows]
                    if len(rows) > 1 and (s[1:] < np.maximum.accumulate(e[:-1])).any():
                        self.depth[rows] = _stack_rows(s, e)
                    elif g == 2:
                        self.depth[rows] = 0
                tid = self.tids[self.tid_code[rows[0]]] if len(rows) else ""
                label = thread_names.get(f"{pid}/{tid}", "")
                title = lane_name if not label or label.strip() == lane_name else label.strip()
                lanes.append(
                    Lane(
                        id=new,
                        rank=r,
                        group=GROUPS[g],
                        pid=pid,
                        lane=lane_name,
                        title=title,
                        rows=int(self.depth[rows].max()) + 1 if len(rows) else 1,
                        events=len(rows),
                    )
                )
                self.lane_rows.append(rows)
        self.lanes = lanes
        # per lane: starts in lane order, and the running max of ends (for overlap search)
        self._lane_start = [self.rel[r] for r in self.lane_rows]
        self._lane_maxend = [np.maximum.accumulate(self.end[r]) for r in self.lane_rows]
        self.span_ns = int(self.end.max()) if n else 0

    # -- lookups ---------------------------------------------------------------------------
    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Rows of event ids (-1 where the id is absent)."""
        return self.index.rows_of(np.asarray(ids, dtype=np.int64))

    def launched_rows(self, runtime_row: int) -> np.ndarray:
        """Rows of the device executions launched by this runtime call, in start order."""
        if runtime_row < 0:
            return np.zeros(0, dtype=np.int64)
        rows = self.index.pointing_at("launch", runtime_row)
        return rows[np.argsort(self.rel[rows], kind="stable")]

    def issued_rows(self, op_row: int) -> np.ndarray:
        """Rows whose issuing framework op is ``op_row``, in start order."""
        if op_row < 0:
            return np.zeros(0, dtype=np.int64)
        rows = self.index.pointing_at("op", op_row)
        return rows[np.argsort(self.rel[rows], kind="stable")]

    def rows_starting_in(self, lane_id: int, t0: int, t1: int) -> np.ndarray:
        """Rows of a lane whose events start in ``[t0, t1)`` (relative ns), in start order."""
        starts = self._lane_start[lane_id]
        lo, hi = np.searchsorted(starts, [t0, t1], side="left")
        return self.lane_rows[lane_id][lo:hi]

    def row_of(self, event_id: int) -> int:
        return int(self.rows_of(np.array([event_id]))[0])

    def record(self, row: int, *, args: bool = False) -> dict[str, Any]:
        """One event as a plain dict (``t`` relative to ``origin_ns``; ``args`` decoded)."""
        lane = self.lanes[int(self.lane_of[row])]
        rec: dict[str, Any] = {
            "id": int(self.ids[row]),
            "name": self.names[self.name_code[row]] if self.name_code[row] >= 0 else "",
            "source": self.sources[self.source_code[row]],
            "kind": self.kinds[self.kind_code[row]],
            "rank": int(self.rank[row]),
            "lane_id": lane.id,
            "lane": lane.lane,
            "group": lane.group,
            "row": int(self.depth[row]),
            "start_ns": int(self.start[row]),
            "t": int(self.rel[row]),
            "dur_ns": int(self.dur[row]),
            "step": None if self.step[row] < 0 else int(self.step[row]),
        }
        for key, arr in (("parent", self.parent_row), ("op", self.op_row)):
            r = int(arr[row])
            rec[f"{key}_id"] = int(self.ids[r]) if r >= 0 else None
        lr = int(self.launch_row[row])
        rec["launch_id"] = int(self.ids[lr]) if lr >= 0 else None
        if args:
            rec["args"] = decode_args(self.index.args_text(row), keep_raw=True)
        return rec

    def event(self, event_id: int) -> dict[str, Any] | None:
        """The details of one event (``args`` decoded), or None when there is no such id."""
        row = self.row_of(event_id)
        return None if row < 0 else self.record(row, args=True)

    def occurrences(self, name: str, limit: int = 10_000) -> dict[str, Any]:
        """Every framework event with this name (ids, lanes, ``t``, ``dur``), at most ``limit``."""
        code = self.index.name.code(name)
        if code < 0:
            return {"name": name, "count": 0, "ids": [], "lane": [], "t": [], "dur": []}
        rows = np.flatnonzero((self.name_code == code) & (self.group == 0))
        rows = rows[np.argsort(self.rel[rows], kind="stable")]
        return {
            "name": name,
            "count": len(rows),
            "ids": self.ids[rows[:limit]],
            "lane": self.lane_of[rows[:limit]],
            "t": self.rel[rows[:limit]],
            "dur": self.dur[rows[:limit]],
        }

    # -- the viewport ------------------------------------------------------------------------
    def window(
        self,
        lane_ids: list[int] | None,
        t0: int,
        t1: int,
        px: int,
        *,
        max_events: int = MAX_EVENTS_PER_QUERY,
        flows: bool = True,
    ) -> dict[str, Any]:
        """Events of ``lane_ids`` (all when None) overlapping ``[t0, t1)`` (relative ns) drawn
        ``px`` pixels wide, level of detail applied.

        Per lane: ``ev`` (id, t, dur, row, name index into ``names``, kind index into
        ``kinds``) for events at least one pixel wide, and ``agg`` (t, end, row, count) for the
        cells that sum the narrower ones, one per (row, pixel).  ``flows`` lists launch links
        (runtime call -> device execution) whose device end is drawn individually.
        """
        px = max(1, min(int(px), 20_000))
        t0, t1 = int(t0), int(max(t1, t0 + 1))
        ns_per_px = (t1 - t0) / px
        wanted = range(len(self.lanes)) if lane_ids is None else lane_ids
        out_lanes: list[dict[str, Any]] = []
        names: dict[int, int] = {}
        budget = max_events
        aggregated = 0
        shown_rows: list[np.ndarray] = []
        for lid in wanted:
            if not 0 <= lid < len(self.lanes):
                continue
            rows = self.lane_rows[lid]
            starts = self._lane_start[lid]
            hi = int(np.searchsorted(starts, t1, side="left"))
            lo = int(np.searchsorted(self._lane_maxend[lid], t0, side="right"))
            cand = rows[lo:hi]
            cand = cand[self.end[cand] > t0]
            wide = self.dur[cand] >= ns_per_px
            big = cand[wide]
            if len(big) > budget:  # keep the widest: they are what the eye sees
                keep = np.argsort(-self.dur[big], kind="stable")[:budget]
                big = np.sort(big[keep])
                wide = np.isin(cand, big)
            budget -= len(big)
            small = cand[~wide]
            aggregated += len(small)
            shown_rows.append(big)
            codes, inv = np.unique(self.name_code[big], return_inverse=True)
            local = np.array([names.setdefault(int(c), len(names)) for c in codes], dtype=np.int64)
            name_idx = local[inv.reshape(-1)] if len(big) else np.zeros(0, dtype=np.int64)
            lane_out: dict[str, Any] = {
                "lane": lid,
                "ev": {
                    "id": self.ids[big],
                    "t": self.rel[big],
                    "dur": self.dur[big],
                    "row": self.depth[big],
                    "name": name_idx,
                    "kind": self.kind_code[big],
                },
                "agg": _aggregate(
                    self.rel[small],
                    self.end[small],
                    self.depth[small],
                    t0=t0,
                    ns_per_px=ns_per_px,
                    px=px,
                ),
            }
            out_lanes.append(lane_out)
        name_list = [""] * len(names)
        for c, i in names.items():
            name_list[i] = self.names[c] if c >= 0 else ""
        result: dict[str, Any] = {
            "t0": t0,
            "t1": t1,
            "px": px,
            "ns_per_px": ns_per_px,
            "names": name_list,
            "kinds": self.kinds,
            "lanes": out_lanes,
            "aggregated": aggregated,
            "flows": [],
        }
        if flows and shown_rows:
            shown = np.concatenate(shown_rows)
            dev = shown[(self.group[shown] == 2) & (self.launch_row[shown] >= 0)]
            if len(dev) <= 5000:
                src = self.launch_row[dev]
                result["flows"] = {
                    "from_id": self.ids[src],
                    "from_lane": self.lane_of[src],
                    "from_row": self.depth[src],
                    "from_t": self.rel[src],
                    "from_dur": self.dur[src],
                    "to_id": self.ids[dev],
                    "to_lane": self.lane_of[dev],
                    "to_row": self.depth[dev],
                    "to_t": self.rel[dev],
                }
        return result

    def lanes_dict(self) -> dict[str, Any]:
        return {
            "origin_ns": str(self.origin_ns),
            "span_ns": self.span_ns,
            "events": self.n,
            "ranks": sorted({ln.rank for ln in self.lanes}),
            "lanes": [ln.to_dict() for ln in self.lanes],
        }


def _aggregate(
    s: np.ndarray, e: np.ndarray, row: np.ndarray, *, t0: int, ns_per_px: float, px: int
) -> dict[str, Any]:
    """Sum sub-pixel events into one cell per (row, pixel): the cell's count and busy time."""
    if len(s) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return {"t": empty, "end": empty, "row": empty, "n": empty, "busy": empty}
    # O(n) binning (bincount, no sort): a 1M-event window costs a few milliseconds
    pix = np.clip(((s - t0) / ns_per_px).astype(np.int64), -1, px) + 1
    width = px + 2
    key = row.astype(np.int64) * width + pix
    nbins = int(key.max()) + 1
    counts = np.bincount(key, minlength=nbins)
    busy = np.bincount(key, weights=(e - s).astype(np.float64), minlength=nbins)
    cells = np.flatnonzero(counts)
    cell_px = cells % width - 1
    start = (t0 + cell_px * ns_per_px).astype(np.int64)
    return {
        "t": start,
        "end": (start + max(1, int(ns_per_px))).astype(np.int64),
        "row": cells // width,
        "n": counts[cells],
        "busy": busy[cells].astype(np.int64),
    }


def _natural(text: str) -> tuple[Any, ...]:
    """Sort key that orders "stream 7" before "stream 23"."""
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))
