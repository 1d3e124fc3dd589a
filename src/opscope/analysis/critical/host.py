"""Host edges of the critical path's graph: each thread's call order, the backward thread's
hand-offs and a CPU backend's collectives (see :mod:`opscope.analysis.critical.graph`)."""

from __future__ import annotations

import itertools
from types import ModuleType

import numpy as np

from opscope.analysis.critical.model import (
    COMM,
    CPU,
    DATA,
    GAP_LIMIT_NS,
    HANDOFF,
    LAUNCH,
    LAUNCH_EDGE,
    NONE,
    RANGE_TIE,
    RESUME,
    SYNC,
    THREAD,
    UNTRACED,
    Build,
)
from opscope.trace.arrays import unique_ints, unique_inverse
from opscope.trace.index import EventIndex

_native: ModuleType | None
try:
    from opscope.analysis.critical import _chains as _native
except ImportError:  # built without a C compiler: the NumPy twin
    _native = None
_use_native = True  # tests set it False to hold the two against each other

# per row: parent, awaited end, resumed after, and the (blocking, host_comm, data) marks
RowArrays = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]
# edges as Edges.add takes them: src, dst, weight, (label, attributed row, kind)
ChainEdges = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]


def host_parent(idx: EventIndex, host: np.ndarray) -> np.ndarray:
    """Innermost enclosing host row of each row (-1 none): the op-tree parent for framework
    rows, the issuing op for runtime rows; parents outside ``host`` count as none."""
    par = np.where(idx.is_framework, idx.tree_parent, idx.op)
    par = np.where(par == np.arange(idx.n, dtype=par.dtype), -1, par)
    ok = par >= 0
    ok[ok] = host[par[ok]]
    return np.where(ok, par, -1)


def nest_parent(idx: EventIndex, host: np.ndarray) -> np.ndarray:
    """Innermost enclosing row of ``host`` of each row (-1 none), through the nesting of the
    thread's ranges (Python frames and annotations included; rows outside ``host`` skipped)."""
    raw = idx.parent
    par = np.where(raw == np.arange(idx.n, dtype=raw.dtype), -1, raw)
    act = np.flatnonzero(par >= 0)
    act = act[~host[par[act]]]
    for _ in range(1024):  # the nesting's depth bounds the hops
        if not len(act):
            break
        par[act] = raw[par[act]]
        par[act] = np.where(par[act] == act, -1, par[act])
        act = act[par[act] >= 0]
        act = act[~host[par[act]]]
    out: np.ndarray = par  # the links' own type (int32 where the rows allow)
    return out


def owners(parent: np.ndarray, container: np.ndarray) -> np.ndarray:
    """Per row, the row whose time a piece attributed to it is: the row itself, or for a
    container under an op (``parent``'s nesting), that op: time under a range that runs
    inside an op is the op's own time.

    By pointer doubling: each container's candidate jumps to its candidate's candidate
    while that is a container, about log2 of the containers' nesting in passes (a ROCm
    trace's Python frames nest 45 deep: 6 passes instead of 45, 28 -> 6 ms on 65k
    containers).  ``tests/unit/test_critical_host_nesting.py`` holds it against the walk
    one level a pass."""
    owner = np.arange(len(parent), dtype=parent.dtype)
    act = np.flatnonzero(container)
    cand = parent[act]
    owner[act] = np.where(cand >= 0, cand, act)
    # a container's owner is settled once its candidate is none or not a container
    act = act[(cand >= 0) & container.take(cand, mode="clip")]
    while len(act):
        up = owner[act]
        nxt = owner[up]  # the candidate's candidate, before this pass's writes
        # a candidate that is a container with no op above it: the row keeps itself
        got = np.where(nxt == up, act, nxt)
        owner[act] = got
        act = act[container[got] & (got != act)]
    return owner


def loop_threads(idx: EventIndex, work_rows: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """The threads that run the program's steps (thread codes, sorted): those of the profiler's
    step markers; in a trace with none, per process the thread whose top-level work takes the
    most time.  Their gaps between top-level events are the program's untraced host time;
    other threads' gaps are idle time."""
    steps = np.flatnonzero(idx.kind.eq("step") & idx.is_framework)
    if len(steps):
        return unique_ints(idx.thread[steps])
    top = work_rows[parent[work_rows] < 0]
    if not len(top):
        return np.zeros(0, dtype=np.int64)
    threads, inv = unique_inverse(idx.thread[top])
    busy = np.bincount(inv, weights=idx.dur[top].astype(np.float64))
    one = np.full(len(threads), -1, dtype=np.int64)  # a row of each thread
    one[inv] = top
    proc = idx.rank[one].astype(np.int64) * (len(idx.pid.values) + 1)
    proc += idx.pid.codes[one].astype(np.int64)
    order = np.lexsort((-busy, proc))
    head = np.r_[True, proc[order][1:] != proc[order][:-1]]
    return unique_ints(threads[order[head]])


def nesting_depth(parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``, how many ``parent`` links lead from it to a root (-1); int32, 0
    for the other rows.  Every ancestor of a row of ``rows`` must be one of them (the host
    rows and their host parents).

    By pointer doubling: each row's distance to its current ancestor adds the ancestor's
    own as the ancestor jumps to the ancestor's ancestor, about log2 of the nesting in
    passes (a ROCm trace's 100k host rows nest 45 deep: 7 passes instead of 45); the walk
    one level a pass is the test's oracle (``tests/unit/test_critical_host_nesting.py``)."""
    depth = np.zeros(len(parent), dtype=np.int32)
    anc = np.full(len(parent), -1, dtype=parent.dtype)
    act = rows[parent[rows] >= 0]
    anc[act] = parent[act]
    depth[act] = 1
    while len(act):
        a = anc[act]
        depth[act] += depth[a]  # the ancestor's distance, before this pass's writes
        anc[act] = anc[a]
        act = act[anc[act] >= 0]
    return depth


def call_order(
    rows: np.ndarray, t: np.ndarray, depth: np.ndarray, thread: np.ndarray
) -> np.ndarray:
    """The order of the host rows' starts and ends (``t``: the starts, then the ends) on
    their threads: by thread, then time; at equal times ends (deepest first) before starts
    (shallowest first), then by row.  The three tie-breaks go as one key (a row is unique
    within each half): a three-key sort instead of six."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64)
    depth = depth.astype(np.int64)  # the key below is of 64 bits whatever the inputs' type
    span = int(depth.max()) + 1
    width = int(rows.max()) + 1
    tie = np.concatenate([(2 * span + depth) * width, (span - depth) * width])
    tie += np.concatenate([rows, rows])
    return np.lexsort((tie, t, np.concatenate([thread, thread])))


def host_chains(
    bd: Build,
    awaited_end: np.ndarray,
    resume_after: np.ndarray,
    marks: tuple[np.ndarray, np.ndarray, np.ndarray],
    container: np.ndarray | None = None,
) -> None:
    """Each host thread's start/end nodes in call order, joined one to the next.
    ``container``: the host rows that are ranges holding work (:data:`CONTAINER_KINDS`), not
    work (a row mask; none when None)."""
    idx, hrows = bd.idx, bd.hrows
    if not len(hrows):
        return
    host = np.zeros(idx.n, dtype=bool)
    host[hrows] = True
    if container is None:
        container = np.zeros(idx.n, dtype=bool)
    container = container & host
    work = host & ~container
    parent = nest_parent(idx, host) if container.any() else host_parent(idx, host)
    depth = nesting_depth(parent, hrows)  # among host rows: orders equal times only
    nh = len(hrows)
    # the starts, then the ends: the graph's first 2 * nh node times when it has them
    t = (
        bd.time[: 2 * nh]
        if bd.time is not None and len(bd.time) >= 2 * nh
        else np.concatenate([idx.start[hrows], idx.end[hrows]])
    )
    order = call_order(hrows, t, depth[hrows], idx.thread[hrows])
    del depth
    rows = (parent, awaited_end, resume_after, marks)
    if _native is not None and _use_native:
        chains = _chain_edges_native(_native, bd, order, rows)
    else:
        chains = _chain_edges_numpy(bd, order, t, rows)
    del order
    work_rows = hrows[work[hrows]]
    work_parent = host_parent(idx, work)
    loop = np.zeros(int(idx.thread.max()) + 1 if idx.n else 0, dtype=bool)
    loop[loop_threads(idx, work_rows, work_parent)] = True
    src, dst, w, what, tie = _attribute(bd, chains, t, (parent, container, loop), marks)
    bd.edges.add(src, dst, w, what, tie)
    # the chains' row- and node-sized arrays go before the hand-offs make theirs (a
    # 10M-event trace's peak is here, beside the op tables)
    del src, dst, w, what, tie, chains, rows, parent, t, host, container, work, loop
    handoffs(bd, work_parent, work_rows)


def _attribute(
    bd: Build,
    chains: ChainEdges,
    t: np.ndarray,
    nesting: tuple[np.ndarray, np.ndarray, np.ndarray],
    marks: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray
]:
    """The chain edges with the time that no op accounts for named (and, last, each edge's
    tie class: :data:`~.model.RANGE_TIE` for a range's own time): on a thread that runs the
    steps (``loop``, per thread code), time under a container and under no op is the
    container's (``cpu`` named by it, ``data_loading`` under a data loader), time directly
    under a step marker or between top-level events is ``untraced`` (no event named); time
    under a container inside an op is that op's.  Other threads' gaps stay weightless: a
    thread between its events there is idle.  ``t``: the host nodes' times (starts, then
    ends); ``nesting``: per row, its parent, whether it is a container, and per thread code
    whether it runs the steps."""
    src, dst, w, (label, att, kind) = chains
    parent, container, loop = nesting
    blocking, host_comm, data = marks
    idx, hrows = bd.idx, bd.hrows
    # w, label and att are the chain passes' own fresh arrays: changed in place, no copies
    tie = np.zeros(len(src), dtype=np.int8)
    nh = len(hrows)
    # per host row first, then per edge: one edge-sized temporary, not three
    on_loop = loop[idx.thread[hrows]][src % nh] if nh else np.zeros(0, dtype=bool)
    has = att >= 0
    if container.any():
        owner = owners(parent, container)
        # gathers with the index clipped (-1 reads row 0, masked after): no index temporaries
        own = owner.take(att, mode="clip")
        del owner
        own[~has] = -1
        cont = has & container.take(own, mode="clip")
        other = cont & ~on_loop  # weighed below, as a gap between top-level events
        label[other] = NONE
        own[other] = -1
        w[other & (kind != RESUME)] = 0
        named = cont & on_loop
        step = named & idx.kind.eq("step").take(own, mode="clip")
        label[named] = CPU
        label[named & data.take(own, mode="clip")] = DATA
        tie[named] = RANGE_TIE
        label[step] = UNTRACED
        own[step] = -1
        # a container inside an op: the op's time, labelled as the op's
        moved = has & ~cont & (own != att) & (own >= 0)
        o = own[moved]
        lab = np.full(len(o), CPU, dtype=label.dtype)
        lab[data[o]] = DATA
        lab[host_comm[o]] = COMM
        lab[blocking[o]] = SYNC
        label[moved] = lab
        att = own
    # gaps between top-level events: the loop thread's untraced host time; on another
    # thread a short gap is untraced too (the autograd engine between two backward ops), a
    # long one idle time (a worker waiting for work)
    top = (att < 0) & (label == NONE) & (kind == THREAD)
    dt = t[dst].astype(w.dtype, copy=False)  # a fresh gather, made the gaps in place
    dt -= t[src]
    gap = top & (on_loop | (dt <= GAP_LIMIT_NS))
    w[gap] = dt[gap]
    del dt
    label[(w > 0) & (label == NONE)] = UNTRACED
    return src, dst, w, (label, att, kind), tie


def _chain_edges_numpy(
    bd: Build,
    order: np.ndarray,
    t: np.ndarray,
    rows: RowArrays,
) -> ChainEdges:
    """The chain edges (src, dst, weight, (label, attributed, kind)) of :func:`host_chains`
    in NumPy, the rules the C pass (``_chains.c``) follows, for machines without it.
    ``order`` and ``t``: the host rows' starts then ends, in call order (:func:`call_order`)
    and their times; ``rows``: per row, the parent, the end of the device work a blocking
    call awaited, the time a CPU collective resumed the thread, and the (blocking,
    host_comm, data) marks."""
    idx, hrows, start_node, end_node = bd.idx, bd.hrows, bd.start_node, bd.end_node
    parent, awaited_end, resume_after, (blocking, host_comm, data) = rows
    thread = idx.thread
    nh = len(hrows)
    # every host row twice: its start, then its end (the second half)
    rows2 = np.concatenate([hrows, hrows])
    is_end = np.zeros(2 * nh, dtype=bool)
    is_end[nh:] = True
    r, e, tt = rows2[order], is_end[order], t[order]
    nodes = np.concatenate([start_node[hrows], end_node[hrows]])[order]
    a = np.flatnonzero(thread[r[1:]] == thread[r[:-1]])
    b = a + 1
    ra, rb, ea, eb = r[a], r[b], e[a], e[b]
    attributed = np.where(~ea, ra, np.where(eb, rb, parent[ra]))
    w = tt[b] - tt[a]
    top_gap = ea & ~eb & (attributed < 0)
    w = np.where(top_gap, 0, w)
    att = np.maximum(attributed, 0)
    # a blocking call's span weighs only what follows the device work it waited for (the
    # few such edges are found through a boolean mask, then adjusted alone)
    waited = np.flatnonzero((awaited_end >= 0)[att] & (attributed >= 0))
    wa = awaited_end[att[waited]]
    w[waited] = np.maximum(0, tt[b[waited]] - np.maximum(tt[a[waited]], wa))
    # a thread idle while it waited for a CPU collective: only the time after it counts
    resumed_at = np.flatnonzero(~eb & (resume_after >= 0)[rb])
    ra_ = resume_after[rb[resumed_at]]
    w[resumed_at] = np.maximum(0, tt[b[resumed_at]] - np.maximum(tt[a[resumed_at]], ra_))
    label = np.full(len(a), CPU, dtype=np.int8)
    label[data[att]] = DATA
    label[host_comm[att]] = COMM
    label[blocking[att] & (attributed >= 0)] = SYNC
    label[top_gap] = NONE
    kind = np.full(len(a), THREAD, dtype=np.int8)
    kind[resumed_at] = RESUME
    attributed[top_gap] = -1
    return nodes[a], nodes[b], w, (label, attributed, kind)


def _chain_edges_native(
    native: ModuleType, bd: Build, order: np.ndarray, rows: RowArrays
) -> ChainEdges:
    """:func:`_chain_edges_numpy` in one C pass (``_chains.c``).  It reads entry ``k`` of the
    order as node ``order[k]``: the graph numbers a host row's start node by its place in
    ``hrows`` and its end node ``len(hrows)`` after that (``graph.build``)."""
    idx = bd.idx
    parent, awaited_end, resume_after, marks = rows
    n = max(len(order) - 1, 0)
    # node ids, rows and threads of 32 bits where the graph's ids are (half the memory of
    # the pass's inputs and outputs); times and weights int64
    ids = np.int32 if bd.start_node.dtype == np.int32 and idx.row_dtype is np.int32 else np.int64
    src, dst, attributed = (np.empty(n, dtype=ids) for _ in range(3))
    w = np.empty(n, dtype=np.int64)
    label, kind = np.empty(n, dtype=np.int8), np.empty(n, dtype=np.int8)
    row_ints = [idx.thread, idx.start, idx.end, parent, awaited_end, resume_after]
    m = native.chains(
        np.ascontiguousarray(order, dtype=ids),
        np.ascontiguousarray(bd.hrows, dtype=ids),
        tuple(
            np.ascontiguousarray(a, dtype=ids if k in (0, 3) else np.int64)
            for k, a in enumerate(row_ints)
        ),
        tuple(np.ascontiguousarray(a, dtype=np.bool_) for a in marks),
        np.asarray([CPU, DATA, COMM, SYNC, NONE, THREAD, RESUME], dtype=np.int8),
        src,
        dst,
        w,
        label,
        attributed,
        kind,
        np.dtype(ids).itemsize,
    )
    return src[:m], dst[:m], w[:m], (label[:m], attributed[:m], kind[:m])


def handoffs(b: Build, parent: np.ndarray, hrows: np.ndarray | None = None) -> None:
    """Zero-weight edges across the threads of a process where one hands work to another:
    the autograd engine's backward thread and the threads that called ``backward()``.  For
    each top-level event of one of them, the other's last top-level event that ended after
    the thread's previous event and before this one -> this one (the thread went on once the
    other was done), as HTA merges the two threads.  ``hrows``: the rows taking part (the
    work rows: a range that holds a thread's work is no event of its own here; default the
    graph's host rows)."""
    idx = b.idx
    hrows = b.hrows if hrows is None else hrows
    start_node, end_node, edges = b.start_node, b.end_node, b.edges
    engine = idx.name.starts_with("autograd::engine::")[hrows]
    if not engine.any():  # no backward thread: nothing handed off
        return
    thread, start, end = idx.thread, idx.start, idx.end
    top = hrows[parent[hrows] < 0]
    bwd_threads = unique_ints(thread[hrows[engine]])
    if not len(top) or not len(bwd_threads):
        return
    top = top[np.lexsort((start[top], thread[top]))]
    th = thread[top]
    prev_end = np.full(len(top), np.iinfo(np.int64).min, dtype=np.int64)
    same = th[1:] == th[:-1]
    ends = end[top]
    # the latest end so far on the thread, before each event
    cut = [*np.flatnonzero(~np.concatenate([[False], same])).tolist(), len(top)]
    for lo, hi in itertools.pairwise(cut):
        if hi - lo > 1:
            prev_end[lo + 1 : hi] = np.maximum.accumulate(ends[lo : hi - 1])
    ops = hrows[idx.kind.eq("op")[hrows]]
    # the process of each op (rank and pid), and per backward thread the threads of its
    # process that run ops: the callers it hands work to and takes it from
    n_pid = len(idx.pid.values) + 1
    proc = idx.rank[ops].astype(np.int64) * n_pid + idx.pid.codes[ops]
    callers: dict[int, np.ndarray] = {}
    for bt in bwd_threads.tolist():
        r0 = int(hrows[thread[hrows] == bt][0])
        p0 = int(idx.rank[r0]) * n_pid + int(idx.pid.codes[r0])
        callers[bt] = unique_ints(thread[ops[(proc == p0) & (thread[ops] != bt)]])
    del proc, ops
    # every node of the callers' host rows (ranges included), by thread and time: a caller
    # goes on at its first node after the backward thread is done (the end of a range it
    # waited in, e.g. ``## backward ##``), not only at its next op.  Only the callers' rows,
    # and each array sorted in turn (at 10M events these were the graph's largest temporaries)
    allr = b.hrows
    is_caller = np.zeros(int(thread.max()) + 1, dtype=bool)
    for th_codes in callers.values():
        is_caller[th_codes] = True
    allr = allr[is_caller[thread[allr]]]
    n_th = np.concatenate([thread[allr], thread[allr]])
    n_t = np.concatenate([start[allr], end[allr]])
    n_order = np.lexsort((n_t, n_th))
    n_t = n_t[n_order]
    n_th = n_th[n_order]
    n_id = np.concatenate([start_node[allr], end_node[allr]])[n_order]
    del n_order, allr
    for bt in bwd_threads.tolist():
        for ot in callers[bt].tolist():
            for t_to, t_from in ((ot, bt), (bt, ot)):
                g = th == t_to
                fb, lo_t = top[g], prev_end[g]
                cand = top[th == t_from]
                if not len(fb) or not len(cand):
                    continue
                cand = cand[np.argsort(end[cand], kind="stable")]
                k = np.searchsorted(end[cand], start[fb], side="right") - 1
                u = cand[np.maximum(k, 0)]
                ok = (k >= 0) & (end[u] > lo_t)
                u_ok, to = u[ok], start_node[fb[ok]]
                to_t = start[fb[ok]]
                if t_to != bt:
                    lo = np.searchsorted(n_th, t_to, side="left")
                    hi = np.searchsorted(n_th, t_to, side="right")
                    j = lo + np.searchsorted(n_t[lo:hi], end[u_ok], side="left")
                    earlier = (j < hi) & (n_t[np.minimum(j, len(n_t) - 1)] < to_t)
                    jj = np.minimum(j, len(n_t) - 1)
                    to = np.where(earlier, n_id[jj], to)
                    to_t = np.where(earlier, n_t[jj], to_t)
                # the engine's time between the hand-off and the next node: untraced
                gap = to_t - end[u_ok]
                gap = np.where((gap > 0) & (gap <= GAP_LIMIT_NS), gap, 0)
                edges.add(
                    end_node[u_ok],
                    to,
                    gap,
                    (np.where(gap > 0, UNTRACED, NONE), -1, HANDOFF),
                )


# how many of a caller's starts after its collective's mid are looked at for the one its wait
# ended at (an idle caller has few; a busy one is not waiting)
EARLY_RESUME_SCAN = 64


def _by_end(idx: EventIndex, hrows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The host rows sorted by thread, then end, with their threads and ends: what
    :func:`_last_ended` searches."""
    rows = hrows[np.lexsort((idx.end[hrows], idx.thread[hrows]))]
    return rows, idx.thread[rows], idx.end[rows]


def _last_ended(by_end: tuple[np.ndarray, np.ndarray, np.ndarray], tcode: int, t: int) -> int:
    """The row of thread ``tcode`` that ended last at or before ``t`` (-1 none)."""
    rows, th, ends = by_end
    a = int(np.searchsorted(th, tcode, side="left"))
    b = int(np.searchsorted(th, tcode, side="right"))
    k = a + int(np.searchsorted(ends[a:b], t, side="right")) - 1
    return int(rows[k]) if k >= a else -1


def _busy_at(
    idx: EventIndex,
    by_end: tuple[np.ndarray, np.ndarray, np.ndarray],
    calls: np.ndarray,
    at: np.ndarray,
    nxt: np.ndarray,
) -> np.ndarray:
    """Per collective call, its work's end ``at`` and the next start ``nxt`` on the call's
    thread after it: whether the thread was busy at ``at`` inside an event that ended before
    ``nxt`` started (a ``record_function`` range that sleeps, an op running on), so that it
    did not sit waiting for the work and the start after it was not resumed by it.  A
    collective call itself (a synchronous one spans its work) waits: it is not busy.  The
    event of the thread that ended last before ``nxt`` started is the one to look at: an
    event that ends by then and started before ``at`` spans it."""
    out = np.zeros(len(at), dtype=bool)
    start, end, thread = idx.start, idx.end, idx.thread
    waits = np.zeros(idx.n, dtype=bool)
    waits[calls] = True
    for i in np.flatnonzero(nxt >= 0).tolist():
        last = _last_ended(by_end, int(thread[calls[i]]), int(start[nxt[i]]))
        if last >= 0:
            out[i] = bool(end[last] > at[i] and start[last] < at[i] and not waits[last])
    return out


def host_collectives(
    bd: Build, links: dict[int, int], mids: dict[int, tuple[int, int]] | None = None
) -> np.ndarray:
    """gloo: the call -> its range on gloo's thread (start -> start), and the range's end ->
    the calling thread's next start.  A caller that sat idle and resumed shortly before the
    range's recorded end (gloo notes the work done before it closes its range, 1.5-2.5 ms
    later on a 4-rank CPU job) waited for the collective as well: its edge comes from the
    range's mid node (``mids``: ``{range row: (mid node, its time)}``, after the last rank
    arrived; the range's start where it has none), the transfer (``gpu_comm``), so that its
    wait is the collective's and a job path follows the rank that arrived last.  Returns, per
    host row, the time of the collective point it resumed after (-1 none), for the caller's
    idle gap to weigh only the time after it."""
    idx, host, hrows = bd.idx, bd.host, bd.hrows
    start_node, end_node, edges = bd.start_node, bd.end_node, bd.edges
    resume_after = np.full(idx.n, -1, dtype=np.int64)
    pairs = [(r, c) for r, c in links.items() if 0 <= r < idx.n and 0 <= c < idx.n]
    pairs = [(r, c) for r, c in pairs if host[r] and host[c] and r != c]
    if not pairs:
        return resume_after
    arr = np.asarray(pairs, dtype=np.int64)
    ranges, calls = arr[:, 0], arr[:, 1]
    start, end, thread = idx.start, idx.end, idx.thread
    edges.add(
        start_node[calls],
        start_node[ranges],
        start[ranges] - start[calls],
        (LAUNCH, calls, LAUNCH_EDGE),
    )
    hs = hrows[np.lexsort((start[hrows], thread[hrows]))]
    th, hst = thread[hs], start[hs]
    t = thread[calls]
    lo = np.searchsorted(th, t, side="left")
    hi = np.searchsorted(th, t, side="right")
    # the first start on the caller's thread at or after the range's end
    nxt = np.full(len(ranges), -1, dtype=np.int64)
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
        k = a + int(np.searchsorted(hst[a:b], end[ranges[i]], side="left"))
        if k < b:
            nxt[i] = hs[k]
    by_end = _by_end(idx, hrows)
    ok = (nxt >= 0) & ~_busy_at(idx, by_end, calls, end[ranges], nxt)
    r_ok, n_ok = ranges[ok], nxt[ok]
    np.maximum.at(resume_after, n_ok, end[r_ok])
    edges.add(end_node[r_ok], start_node[n_ok], start[n_ok] - end[r_ok], (CPU, n_ok, RESUME))
    _early_resumes(bd, (ranges, calls), (hs, lo, hi, by_end), mids or {}, resume_after)
    return resume_after


def _early_resumes(
    bd: Build,
    pairs: tuple[np.ndarray, np.ndarray],
    by_thread: tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]],
    mids: dict[int, tuple[int, int]],
    resume_after: np.ndarray,
) -> None:
    """The callers that sat idle while their collective was in flight and resumed before its
    range's recorded end: an edge from its mid (or start) to the resumed start, the gap before
    that start weighing nothing (see :func:`host_collectives`).  The resumed start is the first
    on the caller's thread in the second half of the time from the mid to the range's end
    whose idle gap before it is at least half the time since the mid
    (:data:`EARLY_RESUME_SCAN` starts looked at).  ``by_thread``: the host rows
    sorted by thread and start, each call's slice of them, and :func:`_by_end`'s order."""
    idx, start_node = bd.idx, bd.start_node
    start, end, thread = idx.start, idx.end, idx.thread
    ranges, calls = pairs
    hs, lo, hi, by_end = by_thread
    hst = start[hs]
    src: list[int] = []
    dst: list[int] = []
    t_src: list[int] = []
    for i in range(len(ranges)):
        r = int(ranges[i])
        node, t0 = mids.get(r, (int(start_node[r]), int(start[r])))
        if node < 0:
            continue
        a, b = int(lo[i]), int(hi[i])
        tcode = int(thread[calls[i]])
        first = a + int(np.searchsorted(hst[a:b], t0, side="left"))
        for k in range(first, min(b, first + EARLY_RESUME_SCAN)):
            t = int(hst[k])
            if t >= end[r]:
                break  # the ordinary resume edge's
            # the thread's idle gap before this start: from the last end before it
            m = _last_ended(by_end, tcode, t)
            g0 = int(end[m]) if m >= 0 else t0
            late = t >= t0 + (int(end[r]) - t0) / 2  # in the second half of the wait
            if late and t - g0 >= (t - t0) / 2:
                src.append(node)
                dst.append(int(hs[k]))
                t_src.append(t0)
                break
    if not src:
        return
    d = np.asarray(dst, dtype=np.int64)
    t_arr = np.asarray(t_src, dtype=np.int64)
    np.maximum.at(resume_after, d, start[d])  # the wait is the collective's: the gap weighs 0
    bd.edges.add(
        np.asarray(src, dtype=np.int64), start_node[d], start[d] - t_arr, (COMM, d, RESUME)
    )
