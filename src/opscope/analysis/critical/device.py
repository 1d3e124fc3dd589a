"""Device edges of the critical path's graph: launches, stream order, cross-stream waits,
syncs, a full launch queue and inferred waits (see :mod:`opscope.analysis.critical.graph`)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from opscope.analysis.critical.model import (
    BACK_PRESSURE,
    BACK_PRESSURE_MIN_NS,
    COMM,
    COMPUTE,
    CROSS,
    GAP,
    GAP_LIMIT_NS,
    INFER_SLACK_NS,
    INFERRED,
    LAUNCH,
    LAUNCH_EDGE,
    NONE,
    SPAN,
    STREAM,
    SYNC,
    SYNC_EDGE,
    SYNC_SLACK_NS,
    UNTRACED,
    Build,
    args_of,
)
from opscope.trace.arrays import unique_ints, unique_inverse, values_at
from opscope.trace.index import EventIndex


def stream_order(
    idx: EventIndex, drows: np.ndarray, issue: np.ndarray
) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[int, int]]]:
    """Device rows sorted by (stream, start); their issue times made non-decreasing within
    each stream (searchable); each stream's slice of them."""
    thread = idx.thread
    order = np.lexsort((drows, idx.start[drows], thread[drows]))
    rows = drows[order]
    iss = issue[rows].copy()
    streams = thread[rows]
    slices: dict[int, tuple[int, int]] = {}
    if len(rows):
        cut = np.flatnonzero(np.diff(streams)) + 1
        bounds = np.concatenate([[0], cut, [len(rows)]]).tolist()
        for lo, hi in itertools.pairwise(bounds):
            iss[lo:hi] = np.maximum.accumulate(iss[lo:hi])
            slices[int(streams[lo])] = (lo, hi)
    return rows, iss, slices


class Streams:
    """Lookups over the device streams of a window."""

    def __init__(self, idx: EventIndex, drows: np.ndarray) -> None:
        self.idx = idx
        start, launch = idx.start, idx.launch
        issue = np.where(launch >= 0, start[np.maximum(launch, 0)], start)
        self.rows, self.iss, self.slices = stream_order(idx, drows, issue)
        self.by_device: dict[tuple[int, int], list[int]] = {}
        self.by_tid: dict[tuple[int, int, str], int] = {}
        for s, (lo, _hi) in self.slices.items():
            r0 = int(self.rows[lo])
            dev = (int(idx.rank[r0]), int(idx.pid.codes[r0]))
            self.by_device.setdefault(dev, []).append(s)
            self.by_tid[(dev[0], dev[1], idx.tid[r0])] = s
        self._records: dict[tuple[int, int], int] | None = None

    def last_before(self, stream: int, t: int) -> int:
        """The last work on ``stream`` issued before ``t`` (-1 none)."""
        lo, hi = self.slices.get(stream, (0, 0))
        k = int(np.searchsorted(self.iss[lo:hi], t, side="left")) - 1
        return int(self.rows[lo + k]) if k >= 0 else -1

    def last_before_each(self, stream: int, times: np.ndarray) -> np.ndarray:
        """:meth:`last_before` of each of ``times`` on ``stream`` (-1 none)."""
        lo, hi = self.slices.get(stream, (0, 0))
        k = np.searchsorted(self.iss[lo:hi], times, side="left") - 1
        return np.where(k >= 0, self.rows[lo + np.maximum(k, 0)] if hi > lo else -1, -1)

    def first_after(self, stream: int, t: int) -> int:
        """The first work on ``stream`` issued at or after ``t`` (-1 none)."""
        lo, hi = self.slices.get(stream, (0, 0))
        k = lo + int(np.searchsorted(self.iss[lo:hi], t, side="left"))
        return int(self.rows[k]) if k < hi else -1

    def record_start(self, rank: int, correlation: int) -> int | None:
        """Start of the ``cudaEventRecord``/``hipEventRecord`` call of a correlation."""
        idx = self.idx
        if self._records is None:
            rec = np.flatnonzero(
                idx.is_runtime & idx.name.isin(("cudaEventRecord", "hipEventRecord"))
            )
            corr = values_at(idx.events.column("correlation"), rec) if len(rec) else []
            self._records = {
                (int(idx.rank[x]), int(c)): int(x)
                for x, c in zip(rec.tolist(), corr, strict=True)
                if c is not None
            }
        x = self._records.get((rank, correlation))
        return None if x is None else int(idx.start[x])

    def awaited_by_event(self, args: dict[str, Any], dev: tuple[int, int]) -> int:
        """The work an event wait waits on: the last work on the recorded stream issued
        before the ``cudaEventRecord`` call (-1 unknown)."""
        corr = args.get("wait_on_cuda_event_record_corr_id")
        stream = args.get("wait_on_stream")
        if not isinstance(corr, int) or not isinstance(stream, int) or corr < 0 or stream < 0:
            return -1
        t_rec = self.record_start(dev[0], corr)
        s = self.by_tid.get((dev[0], dev[1], str(stream)))
        if t_rec is None or s is None:
            return -1
        return self.last_before(s, t_rec)


def sync_edges(b: Build, blocking: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges from awaited device work to the end of the host calls that waited for it.
    Returns the awaited end per waiting host row (-1 none), the cross-stream waits as
    ``(awaited row, waiting row)`` pairs and the copy calls that waited for their own copy
    as ``(copy row, call row)`` pairs."""
    idx, sel, host, work, drows = b.idx, b.sel, b.host, b.work, b.drows
    end_node, edges = b.end_node, b.edges
    awaited_end = np.full(idx.n, -1, dtype=np.int64)
    none = np.zeros((0, 2), dtype=np.int64)
    if not len(drows):
        return awaited_end, none, none
    start, end, launch = idx.start, idx.end, idx.launch
    st = Streams(idx, drows)
    thread, rank, pid = idx.thread, idx.rank, idx.pid.codes
    pairs: list[tuple[int, int]] = []  # (awaited device row, waiting host row)
    cross: list[tuple[int, int]] = []  # (awaited device row, waiting device row)
    handled = np.zeros(idx.n, dtype=bool)
    for srow in np.flatnonzero(idx.is_device & idx.kind.eq("sync") & sel).tolist():
        caller = int(launch[srow])
        args = args_of(idx, srow)
        what = str(args.get("cuda_sync_kind") or idx.name[srow])
        dev = (int(rank[srow]), int(pid[srow]))
        t_call = int(start[caller]) if caller >= 0 else int(start[srow])
        if what == "Stream Wait Event":
            got = st.awaited_by_event(args, dev)
            nxt = st.first_after(int(thread[srow]), t_call) if got >= 0 else -1
            if nxt >= 0:
                cross.append((got, nxt))
            continue
        if caller < 0 or not host[caller]:
            continue
        handled[caller] = True
        if what == "Event Sync":
            got = st.awaited_by_event(args, dev)
            if got >= 0:
                pairs.append((got, caller))
        elif what in ("Context Sync", "Stream Sync"):
            streams = st.by_device.get(dev, []) if what == "Context Sync" else [int(thread[srow])]
            for s in streams:
                got = st.last_before(s, t_call)
                if got >= 0:
                    pairs.append((got, caller))
    pairs += _blocking_pairs(st, np.flatnonzero(host & blocking & ~handled))
    pairs += back_pressure(idx, host, drows)
    # copy calls that returned after their copy ended: the call waited for its copy, and
    # for whatever held the copy back; its span weighs what follows the copy's start (the
    # path runs through the copy when its launch accounts for the delay)
    cp = drows[idx.kind.eq("memcpy")[drows] & (launch[drows] >= 0)]
    calls = launch[cp]
    ok = host[calls] & (end[cp] <= end[calls] + SYNC_SLACK_NS) & (end[cp] > start[calls])
    own = len(pairs)
    pairs += list(zip(cp[ok].tolist(), calls[ok].tolist(), strict=True))
    if pairs:
        arr = np.asarray(pairs, dtype=np.int64)
        is_own = np.arange(len(arr)) >= own
        good = work[arr[:, 0]] & (end[arr[:, 0]] <= end[arr[:, 1]] + SYNC_SLACK_NS)
        src, dst, is_own = arr[good, 0], arr[good, 1], is_own[good]
        at = np.where(is_own, np.minimum(start[src], end[dst]), np.minimum(end[src], end[dst]))
        np.maximum.at(awaited_end, dst, at)
        edges.add(
            end_node[src],
            end_node[dst],
            end[dst] - np.maximum(end[src], start[dst]),
            (SYNC, dst, SYNC_EDGE),
        )
    copies = np.stack([cp[ok], calls[ok]], axis=1) if ok.any() else none
    if not cross:
        return awaited_end, none, copies
    arr = np.asarray(cross, dtype=np.int64)
    ok = work[arr[:, 0]] & work[arr[:, 1]] & (arr[:, 0] != arr[:, 1])
    return awaited_end, arr[ok], copies


def _blocking_pairs(st: Streams, callers: np.ndarray) -> list[tuple[int, int]]:
    """Blocking calls with no device record wait for every stream of their rank: (the last
    work on each stream issued before the call, the call), by call then by stream."""
    idx = st.idx
    c_rank, c_start = idx.rank[callers], idx.start[callers]
    streams = [(rr, s) for (rr, _p), ss in st.by_device.items() for s in ss]
    got: list[np.ndarray] = []
    at: list[np.ndarray] = []  # (call position, stream position) of each found pair
    for j, (rr, s) in enumerate(streams):
        mine = np.flatnonzero(c_rank == rr)
        if not len(mine):
            continue
        rows = st.last_before_each(s, c_start[mine])
        ok = rows >= 0
        got.append(rows[ok])
        at.append(np.stack([mine[ok], np.full(int(ok.sum()), j)], axis=1))
    if not got:
        return []
    rows, pos = np.concatenate(got), np.concatenate(at)
    order = np.lexsort((pos[:, 1], pos[:, 0]))
    return list(zip(rows[order].tolist(), callers[pos[order, 0]].tolist(), strict=True))


def long_calls(idx: EventIndex, calls: np.ndarray) -> np.ndarray:
    """Which of these launch calls took over :data:`BACK_PRESSURE` times the median of their
    name's calls here and over :data:`BACK_PRESSURE_MIN_NS`."""
    dur = idx.dur[calls]
    if not len(calls):
        return np.zeros(0, dtype=bool)
    uniq, inv = unique_inverse(idx.name.codes[calls])
    # each name's median (np.median's: the middle value, or the mean of the middle two), all
    # names at once from the durations sorted within their name
    by_name = dur[np.lexsort((dur, inv))].astype(np.float64)
    count = np.bincount(inv, minlength=len(uniq))
    first = np.cumsum(count) - count
    med = (by_name[first + (count - 1) // 2] + by_name[first + count // 2]) / 2
    return np.asarray((dur > BACK_PRESSURE * med[inv]) & (dur > BACK_PRESSURE_MIN_NS))


def back_pressure(idx: EventIndex, host: np.ndarray, drows: np.ndarray) -> list[tuple[int, int]]:
    """Launch calls held up by a full launch queue: a call that took over
    :data:`BACK_PRESSURE` times its name's median (and over :data:`BACK_PRESSURE_MIN_NS`),
    whose work started that long after it returned, and while device work ended during it,
    returned when a queue slot freed, i.e. after the last
    work that ended before it returned: ``(that work, the call)``.  Its span then weighs only
    what follows that end (what-if would otherwise take the wait for host work)."""
    launch = idx.launch[drows]
    calls = unique_ints(launch[launch >= 0])
    calls = calls[host[calls]]
    if not len(calls):
        return []
    start, end = idx.start, idx.end
    long = long_calls(idx, calls)
    # ...and whose work still waited in the queue after the call returned (a call slow for
    # its own sake, a module loaded on first launch, starts its work at once)
    first = np.full(idx.n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, launch[launch >= 0], start[drows[launch >= 0]])
    queued = first[calls] - end[calls] > BACK_PRESSURE_MIN_NS
    calls = calls[long & queued]
    if not len(calls):
        return []
    by_end = drows[np.argsort(end[drows], kind="stable")]
    ends = end[by_end]
    k = np.searchsorted(ends, end[calls], side="right") - 1
    ok = k >= 0
    w = by_end[np.maximum(k, 0)]
    ok &= (end[w] > start[calls]) & (idx.rank[w] == idx.rank[calls])
    return list(zip(w[ok].tolist(), calls[ok].tolist(), strict=True))


def device_edges(b: Build, cross: np.ndarray) -> np.ndarray:
    """Spans, launches, stream order and cross-stream waits; one binding cause per work."""
    idx, host, drows = b.idx, b.host, b.drows
    start_node, end_node, edges = b.start_node, b.end_node, b.edges
    if not len(drows):
        return np.zeros(idx.n, dtype=bool)
    start, end = idx.start, idx.end
    span_label = np.where(idx.kind.eq("comm")[drows], COMM, COMPUTE)
    edges.add(start_node[drows], end_node[drows], idx.dur[drows], (span_label, drows, SPAN))
    thread = idx.thread
    rows = drows[np.lexsort((drows, start[drows], thread[drows]))]
    prev = np.full(len(rows), -1, dtype=np.int64)
    same = thread[rows[1:]] == thread[rows[:-1]]
    prev[1:][same] = rows[:-1][same]
    lrow = idx.launch[rows]
    has_launch = (lrow >= 0) & host[np.maximum(lrow, 0)]
    lrow = np.where(has_launch, lrow, -1)
    neg = np.iinfo(np.int64).min
    ready_prev = np.where(prev >= 0, end[np.maximum(prev, 0)], neg)
    # a launch is ready when the call returned; a call that returned after its work began
    # (a blocking copy) submitted it at its start
    l_end, l_start = end[np.maximum(lrow, 0)], start[np.maximum(lrow, 0)]
    ready_launch = np.where(has_launch, np.where(l_end <= start[rows], l_end, l_start), neg)
    cross_src = np.full(idx.n, -1, dtype=np.int64)
    if len(cross):
        c = cross[np.argsort(end[cross[:, 0]], kind="stable")]
        cross_src[c[:, 1]] = c[:, 0]  # the last write wins: the latest awaited end
    csrc = cross_src[rows]
    ready_cross = np.where(csrc >= 0, end[np.maximum(csrc, 0)], neg)
    kstart = start[rows]
    isrc = inferred_waits(idx, rows, np.maximum(np.maximum(ready_launch, ready_prev), ready_cross))
    ready_inferred = np.where(isrc >= 0, end[np.maximum(isrc, 0)], neg)
    binding = np.argmax(np.stack([ready_launch, ready_prev, ready_cross, ready_inferred]), axis=0)
    dst = start_node[rows]
    lm = has_launch
    # a work that started long after its launch returned, with its stream idle, waited for
    # something the trace does not show (a cross-stream event on a backend that records none):
    # that wait is no launch overhead, and no edge carries it
    delay = kstart - end[np.maximum(lrow, 0)]
    # a call far slower than its kind (a copy staged through host memory, a module loaded on
    # first launch) was host work: its span is on the host's chain, the launch delay counts
    # from its return
    slow = np.zeros(idx.n, dtype=bool)
    calls = unique_ints(lrow[lm])
    slow[calls[long_calls(idx, calls)]] = True
    from_end = slow[np.maximum(lrow, 0)] & lm & (delay >= 0)
    # a long call whose work started soon after it returned: the latency counts from its
    # return (its own span is on the host's chain)
    from_end |= lm & (delay >= 0) & (kstart - start[np.maximum(lrow, 0)] > GAP_LIMIT_NS)
    lw = np.where(from_end, delay, kstart - start[np.maximum(lrow, 0)])
    lw = np.where((binding == 0) & (delay <= GAP_LIMIT_NS) & (lw <= GAP_LIMIT_NS), lw, 0)
    edges.add(
        np.where(from_end, end_node[np.maximum(lrow, 0)], start_node[np.maximum(lrow, 0)])[lm],
        dst[lm],
        lw[lm],
        (np.where(binding[lm] == 0, LAUNCH, NONE), lrow[lm], LAUNCH_EDGE),
    )
    pm = prev >= 0
    gap = kstart - ready_prev
    pw = np.where((binding == 1) & (gap <= GAP_LIMIT_NS), gap, 0)
    edges.add(
        end_node[prev[pm]], dst[pm], pw[pm], (np.where(pw[pm] > 0, GAP, NONE), prev[pm], STREAM)
    )
    cm = csrc >= 0
    if cm.any():
        cs = csrc[cm]
        cw = np.where(binding[cm] == 2, kstart[cm] - end[cs], 0)
        cw = np.where(cw <= GAP_LIMIT_NS, cw, 0)
        edges.add(end_node[cs], dst[cm], cw, (np.where(cw > 0, GAP, NONE), cs, CROSS))
    im = isrc >= 0
    if im.any():
        src_i = isrc[im]
        iw = np.where(binding[im] == 3, kstart[im] - end[src_i], 0)
        edges.add(end_node[src_i], dst[im], iw, (np.where(iw > 0, GAP, NONE), src_i, INFERRED))
    # works whose start nothing weighted explains (their binding cause carried no time)
    unexplained = np.zeros(idx.n, dtype=bool)
    waited = kstart - np.max(np.stack([ready_launch, ready_prev, ready_cross, ready_inferred]), 0)
    carried = ((binding == 0) & (lw > 0)) | ((binding == 1) & (pw > 0))
    unexplained[rows[(waited > INFER_SLACK_NS) & ~carried & (binding <= 1)]] = True
    _untraced_waits(b, rows, (lrow, prev, csrc), binding, waited)
    return unexplained


def _untraced_waits(
    b: Build,
    rows: np.ndarray,
    causes: tuple[np.ndarray, np.ndarray, np.ndarray],
    binding: np.ndarray,
    waited: np.ndarray,
) -> None:
    """A work that started long after its binding cause (over :data:`GAP_LIMIT_NS` after its
    launch returned, its stream's last work ended or the event it waited for was recorded)
    waited for something the trace does not show (an event recorded outside the trace,
    another process): that time is ``untraced``, an edge from the cause to the work's start,
    so that a path that waits on the work accounts for it instead of dropping it."""
    idx, start_node, end_node = b.idx, b.start_node, b.end_node
    lrow, prev, csrc = causes
    long_wait = (waited > GAP_LIMIT_NS) & (binding <= 2)
    if not long_wait.any():
        return
    start, end = idx.start, idx.end
    k = np.flatnonzero(long_wait)
    cause = np.stack([lrow, prev, csrc])[binding[k], k]
    ok = cause >= 0
    k, cause = k[ok], cause[ok]
    from_start = (binding[k] == 0) & (end[cause] > start[rows[k]])  # a call that returned late
    src = np.where(from_start, start_node[cause], end_node[cause])
    t_src = np.where(from_start, start[cause], end[cause])
    b.edges.add(src, start_node[rows[k]], start[rows[k]] - t_src, (UNTRACED, -1, INFERRED))


def inferred_waits(idx: EventIndex, rows: np.ndarray, ready: np.ndarray) -> np.ndarray:
    """For each work that started over :data:`INFER_SLACK_NS` after every cause the trace shows
    (launch, stream predecessor, recorded cross-stream wait): the work on another stream of
    its device that ended last, at most :data:`INFER_SLACK_NS` before it started, when that is
    after those causes (-1 otherwise).  A work that starts right when another stream's work
    ends waited for it (a CUDA graph's branches, events the trace does not record)."""
    out = np.full(len(rows), -1, dtype=np.int64)
    start, end = idx.start, idx.end
    waiting = np.flatnonzero(start[rows] - ready > INFER_SLACK_NS)
    if not len(waiting):
        return out
    thread = idx.thread
    device = idx.rank.astype(np.int64) * (len(idx.pid.values) + 1) + idx.pid.codes
    by_end = rows[np.lexsort((end[rows], device[rows]))]
    dev_sorted = device[by_end]
    for d in unique_ints(device[rows[waiting]]).tolist():
        lo = int(np.searchsorted(dev_sorted, d, side="left"))
        hi = int(np.searchsorted(dev_sorted, d, side="right"))
        cand = by_end[lo:hi]
        ends = end[cand]
        w = waiting[device[rows[waiting]] == d]
        k = rows[w]
        j = np.searchsorted(ends, start[k], side="right") - 1
        for _ in range(2):  # skip the work's own stream (its predecessor is a known cause)
            own = (j >= 0) & (thread[cand[np.maximum(j, 0)]] == thread[k])
            j = np.where(own, j - 1, j)
        ok = j >= 0
        got = cand[np.maximum(j, 0)]
        ok &= (start[k] - end[got] <= INFER_SLACK_NS) & (end[got] > ready[w])
        ok &= thread[got] != thread[k]
        out[w[ok]] = got[ok]
    return out
