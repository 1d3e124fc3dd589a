"""Linking: call nesting, the launch and the framework op behind every device execution, and
the profiler step of every event.  Vectorised with NumPy; row ids are positions in the table.

Rules (docs/trace-engine.md, "Linking"):

* ``parent_id`` - per (pid, tid), host events (framework and runtime) nest by time containment.
  Sorted by start ascending, then duration descending, then framework before runtime (a
  runtime call never encloses an op), then file order, the parent of an event is the nearest
  earlier event in that order that ends no earlier than it (``end >= end``) and is not
  zero-length.  Identical intervals therefore nest in file order; a zero-length event (a
  runtime call rounded to the µs) that sits on an op's closing edge belongs to that op, unless
  an event starting there encloses it.
  Device and other events have no parent.
* ``launch_id`` - a device event's launching runtime call: the first runtime event (in file
  order) with the same ``correlation``; else, for device events whose correlation matches no
  runtime call, the runtime event bound to the start of an ``ac2g``/``async_cpu_to_gpu`` flow
  whose end binds to the device event (one graph launch may end many flows: CUDA/HIP graphs).
  A flow end binds to the event of its (pid, tid) starting exactly at its timestamp, else to
  the one enclosing it.
* ``op_id`` - a framework event is its own op.  A runtime event's op is its innermost enclosing
  framework event of kind ``op`` or ``annotation`` (ProfilerStep and Python frames are
  skipped).  A device event takes the op of its launch, else the framework op carrying its
  ``External id``.
* ``step`` - ProfilerStep#N intervals; host and other events by containment of their start
  (a step's interval is half-open, ``[start, end)``), device events from their op, else by
  containment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.arrays import bools, ints, row_dtype, valid, values_at
from opscope.trace.schema import KINDS, SOURCES

_SRC = {s: i for i, s in enumerate(SOURCES)}
_KIND = {k: i for i, k in enumerate(KINDS)}


@dataclass
class Links:
    """Link columns as NumPy arrays of rows (int32 below 2**31 rows: :func:`row_dtype`) and
    step numbers (int32); -1 stands for null."""

    parent: np.ndarray
    op: np.ndarray
    launch: np.ndarray
    step: np.ndarray


def _one_array(col: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """A dictionary column as one array (its chunks combined when it has several)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def _codes(col: pa.ChunkedArray | pa.Array, dtype: Any = np.int64) -> np.ndarray:
    """A dictionary column's indices (``dtype``: int8 for the few sources and kinds)."""
    return np.asarray(_one_array(col).indices.to_numpy(zero_copy_only=False), dtype=dtype)


def _ints(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as 0, valid mask)."""
    return ints(col, 0), valid(col)


def _dictionary(col: pa.ChunkedArray) -> pa.ChunkedArray | pa.Array:
    """A string column dictionary-encoded (as it is when it already is: see
    :func:`opscope.trace.kineto.classify_table`)."""
    return col if pa.types.is_dictionary(col.type) else col.combine_chunks().dictionary_encode()


@dataclass(frozen=True)
class _Lanes:
    """The events' lanes (``pid code * width + tid code``, ``width`` one more than the
    highest tid code) and the two dictionaries the codes index, so that other (pid, tid)
    pairs can be coded alike."""

    codes: np.ndarray
    pids: pa.Array
    tids: pa.Array
    width: int


def _event_lanes(pid: pa.ChunkedArray, tid: pa.ChunkedArray) -> _Lanes:
    """The lanes of (pid, tid) string columns, with their dictionaries."""
    p, t = _one_array(_dictionary(pid)), _one_array(_dictionary(tid))
    p_codes, t_codes = _codes(p), _codes(t)
    width = int(t_codes.max(initial=0)) + 1
    return _Lanes(p_codes * width + t_codes, p.dictionary, t.dictionary, width)


def _coded_like(lanes: _Lanes, pid: pa.ChunkedArray, tid: pa.ChunkedArray) -> np.ndarray | None:
    """The lanes of other (pid, tid) strings in the events' codes, -1 where no event has
    that pair; None when a dictionary holds a value twice (then one string has two codes and
    the events' own codes cannot be matched by value)."""
    out = []
    for col, values in ((pid, lanes.pids), (tid, lanes.tids)):
        if pc.count_distinct(values).as_py() != len(values):
            return None
        got = pc.index_in(col.cast(values.type), value_set=values)
        out.append(ints(got, -1))
    p, t = out
    coded: np.ndarray = np.where((p >= 0) & (t >= 0) & (t < lanes.width), p * lanes.width + t, -1)
    return coded


def host_order(lane: np.ndarray, start: np.ndarray, dur: np.ndarray, src: np.ndarray) -> np.ndarray:
    """The permutation ``np.lexsort((src, -dur, start, lane))`` gives (by lane, start, longest
    first, then source, then position), computed faster on traces.

    Events come nearly sorted by start, so a stable sort by start is cheap, and lanes are few
    (a 16-bit radix sort); only runs of equal (lane, start), rare, are ordered by duration and
    source, with a lexsort over their rows alone.  A full lexsort of 2.5M rows took 1.3 s.
    """
    order = np.argsort(start, kind="stable")
    ln = lane[order]
    if len(ln) and int(ln.min()) >= 0 and int(ln.max()) < 2**15:
        ln = ln.astype(np.int16)  # radix sort
    order = order[np.argsort(ln, kind="stable")]
    ls, ss = lane[order], start[order]
    tie = (ls[1:] == ls[:-1]) & (ss[1:] == ss[:-1])
    if tie.any():
        grouped = np.zeros(len(order), dtype=bool)
        grouped[1:] |= tie
        grouped[:-1] |= tie
        pos = np.flatnonzero(grouped)
        first = np.ones(len(pos), dtype=bool)
        first[1:] = ~tie[pos[1:] - 1]  # not tied with the row before: a new run
        run = np.cumsum(first)
        rows = order[pos]  # within a run, in position order (the sorts were stable)
        order[pos] = rows[np.lexsort((src[rows], -dur[rows], run))]
    return order


def nest(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, host: np.ndarray, src: np.ndarray
) -> np.ndarray:
    """``parent`` row for every row (-1 at top level and for non-host rows)."""
    n = len(start)
    parent = np.full(n, -1, dtype=row_dtype(n))
    h = np.flatnonzero(host)
    if len(h) < 2:
        return parent
    h = h[host_order(lane[h], start[h], end[h] - start[h], src[h])]
    m = len(h)
    ln, s, e = lane[h], start[h], end[h]
    new_lane = np.ones(m, dtype=bool)
    new_lane[1:] = ln[1:] != ln[:-1]
    lane_start = np.maximum.accumulate(np.where(new_lane, np.arange(m), 0))
    zero = e == s
    # a zero-length event may sit on its parent's closing edge (µs-rounded timestamps put a
    # runtime call issued just before an op returned at the op's end); it never encloses one
    thr = np.where(zero, s, e)
    e = np.where(zero, s - 1, e)
    # cur[i]: a candidate such that every event strictly between it and i ends before thr[i].
    # If cur[i] fails too, every event between cur[cur[i]] and cur[i] ends before
    # thr[cur[i]] <= thr[i] (it starts no later), so i may jump there: pointer doubling, about
    # log2(depth) rounds of vectorised work instead of a Python stack walk per event.
    cur = np.arange(-1, m - 1, dtype=np.int64)
    active = np.arange(m, dtype=np.int64)
    while active.size:
        c = cur[active]
        live = c >= lane_start[active]
        a, c = active[live], c[live]
        miss = e[c] < thr[a]
        nxt = a[miss]
        cur[nxt] = cur[cur[nxt]]
        active = nxt
    ok = cur >= lane_start
    idx = np.flatnonzero(ok)
    parent[h[idx]] = h[cur[idx]]
    return parent


def _nearest_op_ancestor(parent: np.ndarray, is_op: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For ``rows``: the nearest strict ancestor that is an op (-1 when none)."""
    g = parent.copy()
    active = rows[g[rows] >= 0]
    while active.size:
        p = g[active]
        climb = ~is_op[p]
        a = active[climb]
        g[a] = g[g[a]]
        active = a[g[a] >= 0]
    out: np.ndarray = g[rows]
    found = out >= 0
    out[found] = np.where(is_op[out[found]], out[found], -1)
    return out


def _first_row_by_key(keys: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys and, for each, the first row (lowest row id) carrying it."""
    order = np.lexsort((rows, keys))
    k, r = keys[order], rows[order]
    first = np.ones(len(k), dtype=bool)
    first[1:] = k[1:] != k[:-1]
    return k[first], r[first]


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    if len(keys) == 0:
        return np.full(len(query), -1, dtype=np.int64)
    pos = np.searchsorted(keys, query)
    pos = np.minimum(pos, len(keys) - 1)
    return np.where(keys[pos] == query, values[pos], -1)


def _bind(
    lane: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    *,
    rows: np.ndarray,
    q_lane: np.ndarray,
    q_ts: np.ndarray,
) -> np.ndarray:
    """For each (lane, ts) query: the row among ``rows`` on that lane starting at ts (first in
    file order), else the latest-starting one that encloses ts; -1 when none.

    Rows and queries are sorted together by (lane, time, rows first, file order reversed), so
    the last row at or before a query in that order is the candidate.
    """
    out = np.full(len(q_ts), -1, dtype=np.int64)
    if len(rows) == 0 or len(q_ts) == 0:
        return out
    nr, nq = len(rows), len(q_ts)
    all_lane = np.concatenate([lane[rows], q_lane])
    all_ts = np.concatenate([start[rows], q_ts])
    is_q = np.concatenate([np.zeros(nr, np.int8), np.ones(nq, np.int8)])
    tie = np.concatenate([-rows, np.zeros(nq, np.int64)])
    order = np.lexsort((tie, is_q, all_ts, all_lane))
    pos = np.arange(nr + nq)
    last_row = np.maximum.accumulate(np.where(is_q[order] == 0, pos, -1))
    qpos = np.flatnonzero(is_q[order] == 1)
    q = order[qpos] - nr
    cand = last_row[qpos]
    ok = cand >= 0
    r = np.where(ok, order[np.maximum(cand, 0)], 0)
    r = np.where(r < nr, r, 0)
    row = rows[r]
    same_lane = ok & (lane[row] == q_lane[q])
    hit = same_lane & ((start[row] == q_ts[q]) | (end[row] >= q_ts[q]))
    out[q[hit]] = row[hit]
    return out


def link(events: pa.Table, flows: pa.Table) -> Links:
    """Compute ``parent``, ``op``, ``launch`` and ``step`` for a raw event table."""
    n = events.num_rows
    # the sources and kinds as int8 and the links as rows of 32 bits where they fit: at 10M
    # events the link's arrays are the read's highest point
    rows = row_dtype(n)
    src = _codes(events.column("source"), np.int8)
    kind = _codes(events.column("kind"), np.int8)
    src_values = events.column("source").chunk(0).dictionary.to_pylist() if n else []
    kind_values = events.column("kind").chunk(0).dictionary.to_pylist() if n else []
    # the dictionaries are SOURCES/KINDS in order (built so in kineto.classify_table)
    assert not n or (src_values == list(SOURCES) and kind_values == list(KINDS))
    start = np.asarray(events.column("start_ns").to_numpy(), dtype=np.int64)
    end = start + np.asarray(events.column("dur_ns").to_numpy(), dtype=np.int64)
    lanes = _event_lanes(events.column("pid"), events.column("tid")) if n else None
    lane = lanes.codes if lanes is not None else np.zeros(0, np.int64)
    fw, rt, dev = src == _SRC["framework"], src == _SRC["runtime"], src == _SRC["device"]
    host = fw | rt

    parent = nest(lane, start, end, host, src)

    is_op = fw & ((kind == _KIND["op"]) | (kind == _KIND["annotation"]))
    op = np.full(n, -1, dtype=rows)
    fw_rows = np.flatnonzero(fw)
    op[fw_rows] = fw_rows
    rt_rows = np.flatnonzero(rt)
    op[rt_rows] = _nearest_op_ancestor(parent, is_op, rt_rows)

    # launches by correlation
    corr, corr_ok = _ints(events.column("correlation"))
    launch = np.full(n, -1, dtype=rows)
    dev_rows = np.flatnonzero(dev)
    rt_c = np.flatnonzero(rt & corr_ok)
    keys, first = _first_row_by_key(corr[rt_c], rt_c)
    dc = dev_rows[corr_ok[dev_rows]]
    launch[dc] = _lookup(keys, first, corr[dc])

    # launches by flows, for device events the correlation did not resolve
    unresolved = dev_rows[launch[dev_rows] < 0]
    if len(unresolved) and flows.num_rows and lanes is not None:
        _link_flows(
            events,
            flows,
            lanes=lanes,
            start=start,
            end=end,
            rt_rows=rt_rows,
            unresolved=unresolved,
            launch=launch,
        )

    has_launch = dev_rows[launch[dev_rows] >= 0]
    op[has_launch] = op[launch[has_launch]]
    # External id fallback: the first op carrying it
    ext, ext_ok = _ints(events.column("external_id"))
    need = dev_rows[(op[dev_rows] < 0) & ext_ok[dev_rows]]
    if len(need):
        op_rows = np.flatnonzero(is_op & ext_ok)
        ekeys, efirst = _first_row_by_key(ext[op_rows], op_rows)
        op[need] = _lookup(ekeys, efirst, ext[need])

    step = _steps(events, kind, src=src, start=start, end=end, op=op)
    return Links(parent=parent, op=op, launch=launch, step=step)


def _link_flows(
    events: pa.Table,
    flows: pa.Table,
    *,
    lanes: _Lanes,
    start: np.ndarray,
    end: np.ndarray,
    rt_rows: np.ndarray,
    unresolved: np.ndarray,
    launch: np.ndarray,
) -> None:
    # flow endpoints use the same (pid, tid) lanes as events: coded as the events' lanes are,
    # by value (no strings of the events made for it: at 10M events the link is the read's
    # highest point)
    lane = lanes.codes
    f_lane = _coded_like(lanes, flows.column("pid"), flows.column("tid"))
    if f_lane is None:  # a dictionary with a value twice: one dictionary of both, by value
        pid_all = pa.chunked_array(
            [
                events.column("pid").cast(pa.string()).combine_chunks(),
                flows.column("pid").combine_chunks(),
            ]
        )
        tid_all = pa.chunked_array(
            [
                events.column("tid").cast(pa.string()).combine_chunks(),
                flows.column("tid").combine_chunks(),
            ]
        )
        codes = _event_lanes(pid_all, tid_all).codes
        n = events.num_rows
        lane = codes[:n]
        f_lane = codes[n:]
    f_ts = np.asarray(flows.column("ts_ns").to_numpy(), dtype=np.int64)
    f_id = np.asarray(flows.column("id").to_numpy(), dtype=np.int64)
    f_start = bools(pc.equal(flows.column("ph"), "s"))  # "s": the flow's start (null: not)
    # host side: any endpoint of the flow that binds to a runtime call
    host = _bind(lane, start, end, rows=rt_rows, q_lane=f_lane, q_ts=f_ts)
    hk, hfirst = _first_row_by_key(f_id[host >= 0], np.flatnonzero(host >= 0))
    host_of_id = (hk, host[hfirst])
    # device side: 'f' (and 't') endpoints binding to an unresolved device event
    ends = np.flatnonzero(~f_start)
    dev = _bind(lane, start, end, rows=unresolved, q_lane=f_lane[ends], q_ts=f_ts[ends])
    got = dev >= 0
    rows = dev[got]
    via = _lookup(host_of_id[0], host_of_id[1], f_id[ends][got])
    ok = via >= 0
    launch[rows[ok]] = via[ok]


def _steps(
    events: pa.Table,
    kind: np.ndarray,
    *,
    src: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    op: np.ndarray,
) -> np.ndarray:
    n = len(start)
    step = np.full(n, -1, dtype=np.int32)
    srows = np.flatnonzero(kind == _KIND["step"])
    if not len(srows):
        return step
    names = values_at(events.column("name"), srows)
    idx = []
    keep = []
    for r, nm in zip(srows.tolist(), names, strict=True):
        tail = nm.split("#", 1)[1] if "#" in nm else ""
        if tail.isdigit() and tail.isascii() and int(tail) < 2**31:
            idx.append(int(tail))
            keep.append(r)
    if not keep:
        return step
    k = np.asarray(keep, dtype=np.int64)
    order = np.lexsort((k, start[k]))
    k = k[order]
    s_start, s_end = start[k], end[k]
    s_idx = np.asarray(idx, dtype=np.int64)[order]

    def containing(ts: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(s_start, ts, side="right") - 1
        ok = pos >= 0
        p = np.maximum(pos, 0)
        inside = ok & ((ts < s_end[p]) | (ts == s_start[p]))
        return np.where(inside, s_idx[p], -1)

    dev = src == _SRC["device"]
    nd = np.flatnonzero(~dev)
    step[nd] = containing(start[nd])
    d = np.flatnonzero(dev)
    dop = op[d]
    via_op = dop >= 0
    step[d[via_op]] = step[dop[via_op]]
    rest = d[~via_op]
    step[rest] = containing(start[rest])
    return step


def null_if_negative(values: np.ndarray, offset: int = 0) -> pa.Array:
    """-1 -> null; others shifted by ``offset``."""
    mask = values < 0
    shifted = values.astype(np.int64) + offset if offset else values  # int32 rows: no overflow
    return pa.array(shifted, pa.int64(), mask=mask if mask.any() else None)


__all__ = ["Links", "link", "nest", "null_if_negative"]
