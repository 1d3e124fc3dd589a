"""The dependency graph of one rank's window: what had to happen before what, and how long.

Nodes are points in time: the start and end of every event that takes part (and, for the
first work of a collective, the moment the last rank arrived: its *mid* node).  Edges say
"this could not happen before that"; an edge's **weight** is the time it accounts for when it
lies on the path, and its **label** and **row** (the event it is attributed to) say what that
time was.  The critical path is the longest path through the graph (:mod:`.path`).

Which events: host ops and runtime calls (Python frames, annotations and events of zero
duration are left out; a CPU backend's collective ranges are in), and device work (kernels,
copies, sets, collectives, Neuron executions) except work launched before the trace began, as
the timeline counts it (:func:`opscope.analysis.timeline.drop_pre_window`).

Edges (all built with NumPy over the event index, no per-event Python):

* **host threads** - on each thread the start and end nodes in call order (a parent's start,
  its children, its end); consecutive nodes are joined, the weight is the time between them,
  attributed as HTA does: to the event that starts (start -> start/end), to the one that ends
  (end -> end), and between siblings to their parent.  A gap between two top-level events
  weighs nothing (nothing on the thread accounts for it).  Labels: ``cpu``, ``data_loading``
  (under a data loader's ``__next__``), ``sync`` (a blocking sync call), ``gpu_comm`` (a CPU
  backend's collective work, gloo's ``gloo:*`` ranges).
* **launch** - a runtime call -> the device work it launched (start -> start);
* **device streams** - each work -> the next on its stream (end -> start);
* **cross-stream waits** - ``cudaStreamWaitEvent``: the work recorded by the awaited
  ``cudaEventRecord`` -> the next work on the waiting stream;
* each device work has one *binding* cause, the latest of: its launch (ready when the call
  returned), its stream predecessor's end, a cross-stream wait.  Only that edge carries time:
  ``launch_overhead`` (launch start -> work start, as HTA counts it; none when that, or the
  time from the call's return, is over :data:`GAP_LIMIT_NS`: the work waited for something
  the trace does not show, e.g. the legacy default stream's implicit sync),
  ``kernel_kernel_gap`` (predecessor's end or awaited end -> work start; a gap above
  :data:`GAP_LIMIT_NS` carries none).  The others are kept with no weight: they still order
  the work (and what-if reads them);
* **sync** - a host call that blocks until device work is done (``*Synchronize``, Neuron's
  ``kbl_exec_wait``, a copy call that returns after its copy) -> edges from the end of the
  work it waited for to its end.  The awaited work: per ``Stream Sync``/``Context Sync``/
  ``Event Sync`` device record, the last work issued before the call on the stream (all
  streams of the device for a context sync, the stream of the awaited ``cudaEventRecord`` for
  an event sync); for a call with no such record, the last work of every stream.  Work that
  ends after the call returned was not waited for.  The call's own span then weighs only the
  time after the awaited work ended (label ``sync``): while it waited, the path runs through
  the device;
* **CPU collectives** (gloo) - the ``c10d::*`` call -> its ``gloo:*`` range (start -> start,
  ``launch_overhead``), and the range's end -> the calling thread's next event, when the
  thread sat idle across that end (it was waiting: that gap then weighs only the part after
  the range ended).
* **collectives** - a collective's first work is split at ``mid`` (own arrival + the rank's
  wait for the last arrival, given by the job's matching; mid = start when unknown): start ->
  mid is ``wait_for_peer``, mid -> end ``gpu_comm``.  :mod:`.job` joins the ranks there.

Times are each rank's own clock, in ns.  Weights are never negative.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from opscope.analysis.timeline import drop_pre_window
from opscope.trace.schema import DEVICE_WORK_KINDS

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex

LABELS = (
    "cpu",
    "data_loading",
    "launch_overhead",
    "gpu_compute",
    "gpu_comm",
    "kernel_kernel_gap",
    "sync",
    "wait_for_peer",
)
CPU, DATA, LAUNCH, COMPUTE, COMM, GAP, SYNC, WAIT = range(len(LABELS))
NONE = -1  # an edge that carries no time (ordering only)

# Edge kinds (why the edge exists), for what-if and the docs.
EDGE_KINDS = (
    "thread",
    "span",
    "launch",
    "stream",
    "wait",
    "sync",
    "resume",
    "split",
    "join",
    "handoff",
    "inferred",
)
(THREAD, SPAN, LAUNCH_EDGE, STREAM, CROSS, SYNC_EDGE, RESUME, SPLIT, JOIN, HANDOFF, INFERRED) = (
    range(len(EDGE_KINDS))
)

# A gap between two works on a stream larger than this is not device overhead (HTA: 1.5 ms).
GAP_LIMIT_NS = 1_500_000
# A work that starts this soon after another stream's work ends, and later than everything
# the trace shows it waiting for, waited for that work.
INFER_SLACK_NS = 20_000
# A sync call "waited for" work that ended at most this long after the call returned (the
# clocks of host and device records differ by about a microsecond).
SYNC_SLACK_NS = 1_000

# Host events that take part: ops and runtime calls.  Annotations (``ProfilerStep#N``,
# ``record_function`` ranges) are not work: time under one that no op accounts for is not on
# the path (as in HTA), except a CPU backend's collective ranges, which are the work itself.
HOST_KINDS = ("op", "runtime", "sync")
# A launch call this many times its name's median, and this long, waited for a queue slot.
BACK_PRESSURE = 10.0
BACK_PRESSURE_MIN_NS = 50_000
# Host calls that block until device work is done (lower-cased substrings).
BLOCKING = ("synchronize", "kbl_exec_wait")
DATA_LOADING = re.compile(r"dataloader|data_loader|_next_data|DataLoaderIter", re.IGNORECASE)
HOST_COMM = re.compile(r"^gloo:")


@dataclass
class Graph:
    """One rank's graph (or several ranks' concatenated by :mod:`.job`).

    Node arrays: ``time`` (ns), ``row`` (the event's row in the index), ``role`` (0 start,
    1 end, 2 mid).  Edge arrays: ``src``, ``dst``, ``weight`` (ns), ``label`` (index into
    :data:`LABELS`, -1: no time), ``row`` (the attributed event's row, -1 none), ``kind``
    (index into :data:`EDGE_KINDS`).  ``base`` holds each edge's weight before any what-if.
    """

    time: np.ndarray
    row: np.ndarray
    role: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    label: np.ndarray
    edge_row: np.ndarray
    kind: np.ndarray
    rank: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def n_nodes(self) -> int:
        return len(self.time)

    @property
    def n_edges(self) -> int:
        return len(self.src)


class _Edges:
    """Edge arrays gathered piece by piece."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []

    def add(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        weight: np.ndarray | int,
        what: tuple[np.ndarray | int, np.ndarray | int, np.ndarray | int],
    ) -> None:
        """Edges ``src -> dst`` of ``weight`` (negative: none); ``what`` is their label,
        attributed row and kind (arrays, or one value for all)."""
        label, row, kind = what
        n = len(src)
        if not n:
            return

        def full(v: np.ndarray | int) -> np.ndarray:
            if isinstance(v, np.ndarray):
                return v.astype(np.int64, copy=False)
            return np.full(n, v, dtype=np.int64)

        self.parts.append(
            (
                src.astype(np.int64, copy=False),
                dst.astype(np.int64, copy=False),
                np.maximum(full(weight), 0),
                full(label),
                full(row),
                full(kind),
            )
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        if not self.parts:
            return tuple(np.zeros(0, dtype=np.int64) for _ in range(6))
        return tuple(np.concatenate([p[i] for p in self.parts]) for i in range(6))


@dataclass
class _Build:
    """What the edge builders share: the index, the window's host and device rows, the
    nodes of each row and the edges gathered so far."""

    idx: EventIndex
    sel: np.ndarray  # the window (row mask)
    host: np.ndarray  # host rows taking part (row mask)
    work: np.ndarray  # device work taking part (row mask)
    hrows: np.ndarray
    drows: np.ndarray
    start_node: np.ndarray  # per row, -1 when not a node
    end_node: np.ndarray
    edges: _Edges


def _args(idx: EventIndex, row: int) -> dict[str, Any]:
    text = idx.args_text(row)
    if not text:
        return {}
    try:
        out = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}


def under(idx: EventIndex, marked: np.ndarray) -> np.ndarray:
    """Rows that are marked or have a marked ancestor in the op tree; runtime and device rows
    through the op that issued them."""
    out = marked.copy()
    up = idx.tree_parent
    act = np.flatnonzero(~out & (up >= 0))
    cur = up[act]
    while len(act):
        hit = out[cur]
        out[act[hit]] = True
        act, cur = act[~hit], up[cur[~hit]]
        keep = cur >= 0
        act, cur = act[keep], cur[keep]
    op = idx.op
    issued = (op >= 0) & ~idx.is_framework
    out[issued] |= out[op[issued]]
    return np.asarray(out, dtype=bool)


def build(
    idx: EventIndex,
    window: np.ndarray | None = None,
    *,
    comm_work: dict[int, int] | None = None,
    host_links: dict[int, int] | None = None,
    rank: int = 0,
) -> Graph:
    """The graph of the rows in ``window`` (a row mask; all rows when None).

    ``comm_work``: ``{row of a collective's first work (a device work or a gloo range): its
    wait for the last arrival in ns}``; each such work gets a mid node (wait 0 when unknown).
    ``host_links``: ``{gloo range row: row of the host call it serves}``
    (:func:`opscope.analysis.critical.collectives.links`).  ``rank`` is kept on the graph."""
    n = idx.n
    sel = np.ones(n, dtype=bool) if window is None else np.asarray(window, dtype=bool)
    start, end, dur = idx.start, idx.end, idx.dur
    kind = idx.kind
    names = idx.name
    host_comm = names.matches(HOST_COMM.pattern) & idx.is_framework
    host = sel & (idx.is_framework | idx.is_runtime) & (kind.isin(HOST_KINDS) | host_comm)
    host &= (dur > 0) & (~idx.is_framework | idx.in_tree)
    work = sel & idx.is_device & kind.isin(DEVICE_WORK_KINDS)
    # work launched before the trace began (its launch is not here) is left out, as the
    # timeline leaves it out
    kept, _pre = drop_pre_window(idx.events, np.flatnonzero(work), idx.source, dur)
    work = np.zeros(n, dtype=bool)
    work[kept] = True
    hrows = np.flatnonzero(host)
    drows = np.flatnonzero(work)
    waits = {r: int(w) for r, w in (comm_work or {}).items() if 0 <= r < n and (work[r] or host[r])}
    mrows = np.asarray(sorted(waits), dtype=np.int64)

    # -- nodes: host start/end, device start/end, mids ----------------------------------------
    nh, nd, nm = len(hrows), len(drows), len(mrows)
    mwait = np.asarray([waits[int(r)] for r in mrows.tolist()], dtype=np.int64)
    mwait = np.minimum(np.maximum(mwait, 0), dur[mrows])
    node_time = np.concatenate(
        [start[hrows], end[hrows], start[drows], end[drows], start[mrows] + mwait]
    ).astype(np.int64)
    node_row = np.concatenate([hrows, hrows, drows, drows, mrows]).astype(np.int64)
    node_role = np.concatenate(
        [np.zeros(nh), np.ones(nh), np.zeros(nd), np.ones(nd), np.full(nm, 2)]
    ).astype(np.int8)
    start_node = np.full(n, -1, dtype=np.int64)
    end_node = np.full(n, -1, dtype=np.int64)
    start_node[hrows] = np.arange(nh)
    end_node[hrows] = nh + np.arange(nh)
    start_node[drows] = 2 * nh + np.arange(nd)
    end_node[drows] = 2 * nh + nd + np.arange(nd)
    mid_node = 2 * nh + 2 * nd + np.arange(nm)

    edges = _Edges()
    blocking = names.passing(lambda s: any(b in s.lower() for b in BLOCKING)) & idx.is_runtime
    data = under(idx, names.matches(DATA_LOADING.pattern) & idx.is_framework)

    b = _Build(idx, sel, host, work, hrows, drows, start_node, end_node, edges)
    awaited_end, cross, own_copies = _sync_edges(b, blocking)
    unexplained = _device_edges(b, cross)
    # a copy call whose copy started late for no reason the trace shows spent that time in
    # the call: its whole span is host time
    if len(own_copies):
        late = unexplained[own_copies[:, 0]]
        awaited_end[own_copies[late, 1]] = -1
    resume_after = _host_collectives(b, host_links or {})
    _host_chains(b, awaited_end, resume_after, (blocking, host_comm, data))

    src, dst, weight, label, erow, ekind = edges.arrays()
    if nm:
        src, dst, weight, label, erow, ekind = _split(
            (src, dst, weight, label, erow, ekind),
            (start_node[mrows], end_node[mrows], mid_node),
            mwait,
            mrows,
        )
    return Graph(
        time=node_time,
        row=node_row,
        role=node_role,
        src=src,
        dst=dst,
        weight=weight,
        label=label,
        edge_row=erow,
        kind=ekind,
        rank=rank,
    )


def acyclic(graph: Graph) -> Graph:
    """The graph itself when it has no cycle; else without the edges that run against the
    clock (their destination before their source), which only an inconsistent trace makes,
    and a note saying how many were dropped."""
    from opscope.analysis.critical.longest import CycleError, longest_paths

    try:
        longest_paths(graph.src, graph.dst, graph.weight, graph.n_nodes)
        return graph
    except CycleError:
        pass
    t = graph.time
    keep = t[graph.dst] >= t[graph.src]
    out = Graph(
        time=graph.time,
        row=graph.row,
        role=graph.role,
        src=graph.src[keep],
        dst=graph.dst[keep],
        weight=graph.weight[keep],
        label=graph.label[keep],
        edge_row=graph.edge_row[keep],
        kind=graph.kind[keep],
        rank=graph.rank,
        notes=[
            *graph.notes,
            f"the trace's links formed a cycle: {int((~keep).sum())} edges that run against "
            "the clock were left out",
        ],
    )
    longest_paths(out.src, out.dst, out.weight, out.n_nodes)  # raises if still cyclic
    return out


def _split(
    arrays: tuple[np.ndarray, ...],
    nodes: tuple[np.ndarray, np.ndarray, np.ndarray],
    waits: np.ndarray,
    rows: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """Replace each collective work's span edge (start -> end) by start -> mid (its wait,
    ``wait_for_peer``) and mid -> end (the transfer, ``gpu_comm``)."""
    starts, ends, mids = nodes
    src, dst, weight = arrays[0], arrays[1], arrays[2]
    key = src * (1 << 31) + dst
    want = starts * (1 << 31) + ends
    span = np.isin(key, want)
    keep = ~span
    out = [a[keep] for a in arrays]
    dur = np.zeros(len(rows), dtype=np.int64)
    pos = {int(k): i for i, k in enumerate(want.tolist())}
    for e in np.flatnonzero(span).tolist():
        dur[pos[int(key[e])]] = weight[e]
    extra = (
        np.concatenate([starts, mids]),
        np.concatenate([mids, ends]),
        np.concatenate([np.minimum(waits, dur), np.maximum(dur - waits, 0)]),
        np.concatenate([np.full(len(rows), WAIT), np.full(len(rows), COMM)]),
        np.concatenate([rows, rows]),
        np.concatenate([np.full(len(rows), SPLIT), np.full(len(rows), SPAN)]),
    )
    return tuple(np.concatenate([o, x.astype(np.int64)]) for o, x in zip(out, extra, strict=True))


def _host_parent(idx: EventIndex, host: np.ndarray) -> np.ndarray:
    """Innermost enclosing host row of each row (-1 none): the op-tree parent for framework
    rows, the issuing op for runtime rows; parents outside ``host`` count as none."""
    par = np.where(idx.is_framework, idx.tree_parent, idx.op)
    par = np.where(par == np.arange(idx.n), -1, par)
    ok = par >= 0
    ok[ok] = host[par[ok]]
    return np.where(ok, par, -1)


def _host_chains(
    bd: _Build,
    awaited_end: np.ndarray,
    resume_after: np.ndarray,
    marks: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """Each host thread's start/end nodes in call order, joined one to the next."""
    idx, hrows = bd.idx, bd.hrows
    start_node, end_node, edges = bd.start_node, bd.end_node, bd.edges
    blocking, host_comm, data = marks
    if not len(hrows):
        return
    host = np.zeros(idx.n, dtype=bool)
    host[hrows] = True
    parent = _host_parent(idx, host)
    depth = np.zeros(idx.n, dtype=np.int64)  # among host rows: orders equal times only
    p = parent[hrows]
    act, p = hrows[p >= 0], p[p >= 0]
    while len(act):
        depth[act] += 1
        p = parent[p]
        keep = p >= 0
        act, p = act[keep], p[keep]
    thread = idx.thread
    nh = len(hrows)
    rows2 = np.concatenate([hrows, hrows])
    is_end = np.concatenate([np.zeros(nh, dtype=bool), np.ones(nh, dtype=bool)])
    t = np.concatenate([idx.start[hrows], idx.end[hrows]])
    cls = np.where(is_end, 0, 2)
    dk = np.where(is_end, -depth[rows2], depth[rows2])
    order = np.lexsort((is_end, rows2, dk, cls, t, thread[rows2]))
    r, e, tt = rows2[order], is_end[order], t[order]
    nodes = np.where(e, end_node[r], start_node[r])
    a = np.flatnonzero(thread[r[1:]] == thread[r[:-1]])
    b = a + 1
    ra, rb, ea, eb = r[a], r[b], e[a], e[b]
    attributed = np.where(~ea, ra, np.where(eb, rb, parent[ra]))
    w = tt[b] - tt[a]
    top_gap = ea & ~eb & (attributed < 0)
    w = np.where(top_gap, 0, w)
    att = np.maximum(attributed, 0)
    # a blocking call's span weighs only what follows the device work it waited for
    waited = (attributed >= 0) & (awaited_end[att] >= 0)
    w = np.where(waited, np.maximum(0, tt[b] - np.maximum(tt[a], awaited_end[att])), w)
    # a thread idle while it waited for a CPU collective: only the time after it counts
    resumed = ~eb & (resume_after[rb] >= 0)
    w = np.where(resumed, np.maximum(0, tt[b] - np.maximum(tt[a], resume_after[rb])), w)
    label = np.full(len(a), CPU, dtype=np.int64)
    label[data[att]] = DATA
    label[host_comm[att]] = COMM
    label[blocking[att] & (attributed >= 0)] = SYNC
    label[top_gap] = NONE
    kind = np.where(resumed, RESUME, THREAD)
    edges.add(nodes[a], nodes[b], w, (label, np.where(top_gap, -1, attributed), kind))
    _handoffs(bd, parent)


def _handoffs(b: _Build, parent: np.ndarray) -> None:
    """Zero-weight edges across the threads of a process where one hands work to another:
    the autograd engine's backward thread and the threads that called ``backward()``.  For
    each top-level event of one of them, the other's last top-level event that ended after
    the thread's previous event and before this one -> this one (the thread went on once the
    other was done), as HTA merges the two threads."""
    idx, hrows = b.idx, b.hrows
    start_node, end_node, edges = b.start_node, b.end_node, b.edges
    thread, start, end = idx.thread, idx.start, idx.end
    top = hrows[parent[hrows] < 0]
    engine = idx.name.starts_with("autograd::engine::")
    bwd_threads = np.unique(thread[hrows[engine[hrows]]])
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
    proc = idx.rank.astype(np.int64) * (len(idx.pid.values) + 1) + idx.pid.codes
    for bt in bwd_threads.tolist():
        p0 = proc[hrows[thread[hrows] == bt][0]]
        others = np.unique(thread[ops[(proc[ops] == p0) & (thread[ops] != bt)]])
        for ot in others.tolist():
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
                edges.add(end_node[u[ok]], start_node[fb[ok]], 0, (NONE, -1, HANDOFF))


def _streams(
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


class _Streams:
    """Lookups over the device streams of a window."""

    def __init__(self, idx: EventIndex, drows: np.ndarray) -> None:
        self.idx = idx
        start, launch = idx.start, idx.launch
        issue = np.where(launch >= 0, start[np.maximum(launch, 0)], start)
        self.rows, self.iss, self.slices = _streams(idx, drows, issue)
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
            corr = idx.events.column("correlation").take(rec).to_pylist() if len(rec) else []
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


def _sync_edges(b: _Build, blocking: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    st = _Streams(idx, drows)
    thread, rank, pid = idx.thread, idx.rank, idx.pid.codes
    pairs: list[tuple[int, int]] = []  # (awaited device row, waiting host row)
    cross: list[tuple[int, int]] = []  # (awaited device row, waiting device row)
    handled = np.zeros(idx.n, dtype=bool)
    for srow in np.flatnonzero(idx.is_device & idx.kind.eq("sync") & sel).tolist():
        caller = int(launch[srow])
        args = _args(idx, srow)
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
    # blocking calls with no device record: every stream of the rank
    for caller in np.flatnonzero(host & blocking & ~handled).tolist():
        r = int(rank[caller])
        for (rr, _p), streams in st.by_device.items():
            if rr == r:
                for s in streams:
                    got = st.last_before(s, int(start[caller]))
                    if got >= 0:
                        pairs.append((got, caller))
    pairs += _back_pressure(idx, host, drows)
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


def _long_calls(idx: EventIndex, calls: np.ndarray) -> np.ndarray:
    """Which of these launch calls took over :data:`BACK_PRESSURE` times the median of their
    name's calls here and over :data:`BACK_PRESSURE_MIN_NS`."""
    dur = idx.dur[calls]
    if not len(calls):
        return np.zeros(0, dtype=bool)
    uniq, inv = np.unique(idx.name.codes[calls], return_inverse=True)
    med = np.zeros(len(uniq))
    for i in range(len(uniq)):
        med[i] = float(np.median(dur[inv == i]))
    return np.asarray((dur > BACK_PRESSURE * med[inv]) & (dur > BACK_PRESSURE_MIN_NS))


def _back_pressure(idx: EventIndex, host: np.ndarray, drows: np.ndarray) -> list[tuple[int, int]]:
    """Launch calls held up by a full launch queue: a call that took over
    :data:`BACK_PRESSURE` times its name's median (and over :data:`BACK_PRESSURE_MIN_NS`),
    whose work started that long after it returned, and while device work ended during it,
    returned when a queue slot freed, i.e. after the last
    work that ended before it returned: ``(that work, the call)``.  Its span then weighs only
    what follows that end (what-if would otherwise take the wait for host work)."""
    launch = idx.launch[drows]
    calls = np.unique(launch[launch >= 0])
    calls = calls[host[calls]]
    if not len(calls):
        return []
    start, end = idx.start, idx.end
    long = _long_calls(idx, calls)
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


def _device_edges(b: _Build, cross: np.ndarray) -> np.ndarray:
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
    isrc = _inferred_waits(idx, rows, np.maximum(np.maximum(ready_launch, ready_prev), ready_cross))
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
    calls = np.unique(lrow[lm])
    slow[calls[_long_calls(idx, calls)]] = True
    from_end = slow[np.maximum(lrow, 0)] & lm & (delay >= 0)
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
    return unexplained


def _inferred_waits(idx: EventIndex, rows: np.ndarray, ready: np.ndarray) -> np.ndarray:
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
    for d in np.unique(device[rows[waiting]]).tolist():
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


def _host_collectives(bd: _Build, links: dict[int, int]) -> np.ndarray:
    """gloo: the call -> its range on gloo's thread (start -> start), and the range's end ->
    the calling thread's next start.  Returns, per host row, the end of a collective range it
    resumed after (-1 none), for the caller's idle gap to weigh only the time after it."""
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
    ok = nxt >= 0
    r_ok, n_ok = ranges[ok], nxt[ok]
    np.maximum.at(resume_after, n_ok, end[r_ok])
    edges.add(end_node[r_ok], start_node[n_ok], start[n_ok] - end[r_ok], (CPU, n_ok, RESUME))
    return resume_after


__all__ = [
    "EDGE_KINDS",
    "GAP_LIMIT_NS",
    "LABELS",
    "Graph",
    "acyclic",
    "build",
    "under",
]
