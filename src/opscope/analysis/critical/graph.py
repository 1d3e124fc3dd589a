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

Times are each rank's own clock, in ns.  Weights are never negative.  The graph's pieces are
in :mod:`.model`, the host edges in :mod:`.host`, the device edges in :mod:`.device`; this
module puts them together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from opscope.analysis.critical.boundaries import cut_at_steps, step_bounds
from opscope.analysis.critical.device import device_edges, sync_edges
from opscope.analysis.critical.host import host_chains, host_collectives
from opscope.analysis.critical.longest import ids_dtype
from opscope.analysis.critical.model import (
    BLOCKING,
    COMM,
    CONTAINER_KINDS,
    CPU,
    EDGE_KINDS,
    GAP_LIMIT_NS,
    HOST_KINDS,
    JOIN,
    LABELS,
    NONE,
    SPAN,
    SPLIT,
    THREAD,
    WAIT,
    Build,
    Edges,
    Graph,
    under,
)
from opscope.analysis.opsets import is_data_loading
from opscope.analysis.timeline import drop_pre_window
from opscope.trace.commnames import is_host_comm
from opscope.trace.heap import between_parts
from opscope.trace.schema import DEVICE_WORK_KINDS

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex


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
    # the name tests run once per distinct name (no regex kernel compiled per call)
    host_comm = names.passing(is_host_comm) & idx.is_framework
    host = sel & (idx.is_framework | idx.is_runtime) & (kind.isin(HOST_KINDS) | host_comm)
    host &= (dur > 0) & (~idx.is_framework | idx.in_tree)
    container = sel & idx.is_framework & kind.isin(CONTAINER_KINDS) & (dur > 0) & ~host
    host |= container
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
    node_row = np.concatenate([hrows, hrows, drows, drows, mrows]).astype(idx.row_dtype)
    node_role = np.concatenate(
        [np.zeros(nh), np.ones(nh), np.zeros(nd), np.ones(nd), np.full(nm, 2)]
    ).astype(np.int8)
    ids = ids_dtype(2 * nh + 2 * nd + nm, 0)  # node ids of 32 bits where they fit
    start_node = np.full(n, -1, dtype=ids)
    end_node = np.full(n, -1, dtype=ids)
    start_node[hrows] = np.arange(nh)
    end_node[hrows] = nh + np.arange(nh)
    start_node[drows] = 2 * nh + np.arange(nd)
    end_node[drows] = 2 * nh + nd + np.arange(nd)
    mid_node = 2 * nh + 2 * nd + np.arange(nm)

    edges = Edges(ids, idx.row_dtype)
    blocking = names.passing(lambda s: any(b in s.lower() for b in BLOCKING)) & idx.is_runtime
    data = under(idx, names.passing(is_data_loading) & idx.is_framework)

    b = Build(idx, sel, host, work, hrows, drows, start_node, end_node, edges, node_time)
    awaited_end, cross, own_copies = sync_edges(b, blocking)
    unexplained = device_edges(b, cross)
    # a copy call whose copy started late for no reason the trace shows spent that time in
    # the call: its whole span is host time
    if len(own_copies):
        late = unexplained[own_copies[:, 0]]
        awaited_end[own_copies[late, 1]] = -1
    mids = {
        int(r): (int(m), int(t))
        for r, m, t in zip(
            mrows.tolist(), mid_node.tolist(), (start[mrows] + mwait).tolist(), strict=True
        )
    }
    resume_after = host_collectives(b, host_links or {}, mids)
    between_parts()  # the device edges' temporaries are gone: their pages back
    host_chains(b, awaited_end, resume_after, (blocking, host_comm, data), container)

    src, dst, weight, label, erow, ekind, tie = edges.arrays()
    if nm:
        src, dst, weight, label, erow, ekind, tie = _split(
            (src, dst, weight, label, erow, ekind, tie),
            (start_node[mrows], end_node[mrows], mid_node),
            mwait,
            mrows,
        )
    # the row-sized working arrays go before the cut, the graph's peak
    del b, edges, start_node, end_node, host, container, work, sel, awaited_end, resume_after
    del blocking, data, unexplained, host_comm
    graph = Graph(
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
        tie=tie,
    )
    # the cut replaces the graph's arrays one by one: names left here would keep the old
    # ones alive beside the new (at 10M events about 1 GB more at the cut)
    del node_time, node_row, node_role, src, dst, weight, label, erow, ekind, tie
    between_parts()  # the edges' temporaries are gone: their free pages back before the cut
    return cut_at_steps(graph, step_bounds(idx))


def acyclic(graph: Graph) -> Graph:
    """The graph itself when it has no cycle; else without the edges that run against the
    clock (their destination before their source), which only an inconsistent trace makes,
    and a note saying how many were dropped."""
    from opscope.analysis.critical.longest import CycleError, longest_paths

    try:
        dist, pred = longest_paths(
            graph.src, graph.dst, graph.weight, graph.n_nodes, factor=graph.factors()
        )
        graph.longest = (graph.src, graph.dst, graph.weight, dist, pred)
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
        tie=None if graph.tie is None else graph.tie[keep],
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
    ``wait_for_peer``) and mid -> end (the transfer, ``gpu_comm``); ``arrays``: the edges'
    src, dst, weight, label, row, kind and tie class."""
    starts, ends, mids = nodes
    src, dst, weight = arrays[0], arrays[1], arrays[2]
    key = src.astype(np.int64) * (1 << 31) + dst
    want = starts.astype(np.int64) * (1 << 31) + ends
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
        np.zeros(2 * len(rows), dtype=np.int8),
    )
    return tuple(np.concatenate([o, x.astype(o.dtype)]) for o, x in zip(out, extra, strict=True))


__all__ = [
    "CPU",
    "EDGE_KINDS",
    "GAP_LIMIT_NS",
    "JOIN",
    "LABELS",
    "NONE",
    "SPAN",
    "SPLIT",
    "THREAD",
    "Graph",
    "acyclic",
    "build",
    "under",
]
