"""Collectives: one record per collective call on a rank, matched across the ranks of a job.

:func:`collective_records` reads one rank's trace; :mod:`opscope.analysis.collective_match`
lines the records of several ranks up into instances (one per collective of the job) and names
the ranks the others wait for.

**What a collective is in a trace.**  The host side of one call is a chain of nested framework
events on the calling thread: the ``c10d::*`` op (``c10d::allreduce_``; ``_c10d_functional::*``
for functional collectives), inside it ``record_param_comms`` (recent PyTorch; its ``args``
carry ``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``dtype``, ``Process Group
Name``, ``Group size`` and, from some versions on, ``Seq``) and inside that the backend's range
(``nccl:all_reduce``).  Nested candidates (through the op tree, ``EventIndex.tree_parent``)
form one chain; its topmost event is the collective's *anchor*.  ``record_param_comms`` of the
``wait`` kind (a work's wait, no communication) is no collective and is left out.

**Where the work is.**

* On a GPU the work is the comm kernel(s): device events of kind ``comm`` whose issuing op
  (``EventIndex.op``, resolved at ingest from the correlation/external id) lies inside the
  chain.  Each kernel's op is walked up the op tree to the nearest chain event.  The kernel
  starts as soon as this rank enqueued it and spins until the peers are there, so its start is
  the rank's *arrival* and its end the end of the transfer.
* With gloo the work runs on gloo's own threads (``pt_gloo_runloop``): a ``gloo:*`` range that
  nests in no host op.  Such a range is linked to a host chain with no backend range of its
  own, per collective type, first in first out: host calls in start order, each taking the
  earliest unlinked range of its type that starts at or after the call.  Gloo queues a process
  group's work and its threads take it from the queue in order, so the k-th range of a type is
  the k-th call's; a range that starts before any call is left (its call is outside the
  window) and becomes a record of its own.  Gloo traces name no process group, so calls of
  several groups share one queue here: their ranges can be linked crosswise when the groups'
  threads overlap (only the times are affected, never the counts).  The range starts when the
  rank is ready to communicate (its *arrival*) and ends when the algorithm is done.
* A gloo range nested in the call itself (gloo's send and recv work on the calling thread)
  gives the times of the work.  Otherwise the anchor's own start and end are used.

A comm kernel that no host op issued (its launch is outside the window) makes a record of its
own when its ``args`` name the collective (``Collective name``, recent Kineto).  Device
communication with no host side at all, whose ``args`` name the collective instance each
transfer belongs to (:data:`INSTANCE_KEYS`: an IBM AIU's ``CollGroup``), makes one record per
instance on each rank: from the first transfer's start to the last one's end, its type the one
the transfers' names imply (:func:`opscope.trace.commnames.collective_of`; the instance name's
own words when they do not say), its ``bytes`` the largest of the transfers' ``Bytes`` (each
transfer moves one message).

**Events.**  A record names its events by id (``trace.events`` column ``id``): ``event_id``
is the anchor's (the kernel's or the range's for a record without a host call) and
``work_event_ids`` those of the work its times come from (comm kernels, the linked or nested
gloo range; empty when the times are the host call's own), so that a front-end can find the
record of a selected event and draw the work.

**Sizes** (:mod:`opscope.analysis.collective_sizes`).  ``bytes`` is ``max(In msg nelems,
Out msg nelems)`` times the dtype's size when ``record_param_comms`` says so; otherwise the
recorded shapes (``record_shapes=True``) of the
chain's events: the largest argument (a tensor list counts as its total) over the chain, times
the size of the first tensor type recorded.  For an ``all_gather`` into a list only the input
is recorded, so ``bytes`` is the input's size there.  (Gloo traces of PyTorch 2.13 hold no
``record_param_comms``: their type comes from the ``c10d::*`` op, their size from its shapes
and the ``gloo:*`` range's, and they carry no ``seq``.)

**Process groups.**  ``pg`` is ``Process Group Name`` (the one group ``distributedInfo``
lists, else ``"0"``, the default group, when the call names none); ``pg_size`` is ``Group
size``, else the group's size in ``distributedInfo.pg_config``, else - a call that names no
group in a trace whose ``distributedInfo`` lists none (PyTorch before 2.0) - the world size:
the default group spans the world.

**Order.**  ``index`` counts the collectives of one process group in issue order (the anchor's
start), 0-based; point-to-point calls (send, recv) are counted apart, since a send on one rank
pairs with a recv on another and would shift every later collective's index.  With a step
window (``steps``) the count starts at the window: analyse every rank over the same steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from opscope.analysis.collective_sizes import bytes_of, int_arg, scalar_type, shape_size
from opscope.trace.commnames import (
    OP_PREFIXES,
    P2P_TYPES,
    PARAM_COMMS,
    RANGE_PREFIXES,
    WAIT,
    WORK_RANGE_PREFIXES,
    collective_of,
    collective_of_host_op,
    host_spelling,
    is_wait,
)

if TYPE_CHECKING:
    from opscope.trace import Trace


def _kind(name: str) -> str:
    """The collective type of a host-side name: a ``Collective name``, a c10d op, a backend
    range (:func:`opscope.trace.commnames.collective_of_host_op`); a name that the vocabulary
    does not know keeps its compact spelling (:func:`~opscope.trace.commnames.host_spelling`),
    so that a new collective makes records of its own type rather than none."""
    return collective_of_host_op(name) or host_spelling(name)


#: ``args`` keys naming the collective instance a device transfer belongs to (IBM AIU).
INSTANCE_KEYS = ("CollGroup",)

# -- per-rank records --------------------------------------------------------------------------

_MAX_HOPS = 256  # op tree depth bound when walking up


def _nearest_marked(start: np.ndarray, up: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """For each row of ``start``: itself when marked, else its nearest marked ancestor along
    ``up`` (-1 when none); vectorised over the rows, one hop per pass."""
    cur = np.asarray(start, dtype=np.int64).copy()
    act = np.flatnonzero(cur >= 0)
    act = act[~marked[cur[act]]]
    for _ in range(_MAX_HOPS):
        if not len(act):
            break
        cur[act] = up[cur[act]]
        act = act[cur[act] >= 0]
        act = act[~marked[cur[act]]]
    cur[act] = -1
    return np.asarray(cur, dtype=np.int64)


def _args(index: Any, row: int) -> dict[str, Any]:
    text = index.args_text(row)
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class _Ctx:
    """What every record of one trace is built from."""

    idx: Any  # the trace's EventIndex
    range_rows: np.ndarray  # backend ranges (nccl:*, gloo:*)
    pg_sizes: Mapping[str, int]  # process group sizes from distributedInfo
    only_pg: str | None  # the one process group distributedInfo lists, if one
    # the world size, for records that name no process group when distributedInfo lists none
    # (the default group spans the world); None when it lists some
    world: int | None = None


@dataclass
class _Chain:
    """One host collective: its anchor row and nested candidate rows."""

    anchor: int
    rows: list[int]
    work: int = -1  # linked backend range on another thread (gloo), -1 when none


def _pg_config(trace: Trace) -> dict[str, int]:
    """Process group name -> size from the trace's ``distributedInfo``."""
    info = trace.meta.distributed_info or {}
    out: dict[str, int] = {}
    for pg in info.get("pg_config") or []:
        if isinstance(pg, dict) and "pg_name" in pg and isinstance(pg.get("pg_size"), int):
            out[str(pg["pg_name"])] = int(pg["pg_size"])
    return out


def collective_records(trace: Trace, steps: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """One dict per collective call on the trace's rank (see the module docstring), in issue
    order; ``steps``: only the calls of those profiler steps.

    Keys: ``rank``, ``name`` (collective type), ``raw_name`` (the anchor event's name),
    ``pg``, ``pg_size``, ``seq``, ``index``, ``bytes``, ``dtype``, ``arrival_ns``,
    ``end_ns``, ``dur_us`` (``end_ns - arrival_ns``), ``event_id`` (the id of the call's
    anchor event, or of the work event when no host call is in the trace) and
    ``work_event_ids`` (the ids of the comm kernels or backend work ranges whose times the
    record has, in start order; empty when the times are the host call's own).
    """
    idx = trace.index
    if idx.n == 0:
        return []
    values = [str(v) for v in idx.name.values]
    is_op_name = np.array(
        [
            v == PARAM_COMMS or (v.startswith(OP_PREFIXES) and collective_of_host_op(v) is not None)
            for v in values
        ],
        dtype=bool,
    )
    is_range_name = np.array(
        [v.startswith(RANGE_PREFIXES) and not is_wait(v) for v in values],
        dtype=bool,
    )
    framework = idx.is_framework
    op_rows = framework & idx.name.rows(is_op_name)
    range_rows = framework & idx.name.rows(is_range_name)
    cand = op_rows | range_rows
    rows = np.flatnonzero(cand)
    comm = np.flatnonzero(idx.is_work & idx.kind.eq("comm"))
    if not len(rows) and not len(comm):
        return []

    tp = idx.tree_parent
    # each candidate's nearest candidate ancestor, then the topmost: the chain's anchor
    above = _nearest_marked(np.where(rows >= 0, tp[rows], -1), tp, cand)
    top = np.full(idx.n, -1, dtype=np.int64)
    top[rows] = np.where(above >= 0, above, rows)
    for _ in range(_MAX_HOPS):
        t = top[rows]
        nxt = top[t]
        if (nxt == t).all():
            break
        top[rows] = nxt
    chains: dict[int, _Chain] = {}
    for r, a in zip(rows.tolist(), top[rows].tolist(), strict=True):
        c = chains.get(a)
        if c is None:
            chains[a] = c = _Chain(anchor=a, rows=[])
        c.rows.append(r)

    start, names = idx.start, idx.name
    # chains with no host op: backend ranges on the backend's thread (gloo work)
    hosts = [c for c in chains.values() if any(op_rows[r] for r in c.rows)]
    works = [c for c in chains.values() if not any(op_rows[r] for r in c.rows)]
    needs_work = [c for c in hosts if not any(range_rows[r] for r in c.rows)]
    linked = _link_work(needs_work, works, start, names)

    # comm kernels -> the chain that issued them
    kernels: dict[int, list[int]] = {}
    orphans: list[int] = []
    if len(comm):
        issuer = _nearest_marked(idx.op[comm], tp, cand)
        anchors = np.where(issuer >= 0, top[np.maximum(issuer, 0)], -1)
        for k, a in zip(comm.tolist(), anchors.tolist(), strict=True):
            if a >= 0 and a in chains and op_rows[chains[a].rows].any():
                kernels.setdefault(a, []).append(k)
            else:
                orphans.append(k)

    pg_sizes = _pg_config(trace)
    only = next(iter(pg_sizes)) if len(pg_sizes) == 1 else None
    ctx = _Ctx(idx, range_rows, pg_sizes, only, None if pg_sizes else _world_size(trace))
    ranks = idx.rank
    window = idx.in_steps(steps)

    found: list[tuple[int, dict[str, Any]]] = []  # (anchor row, record with its "_work" rows)
    for c in hosts:
        rec = _host_record(ctx, c, kernels.get(c.anchor, []))
        if rec is not None and window[c.anchor]:
            found.append((c.anchor, rec))
    for c in works:
        if c.anchor in linked:
            continue
        if window[c.anchor]:
            rec = _range_record(ctx, c.anchor)
            if rec is not None:
                found.append((c.anchor, rec))
    grouped: dict[tuple[int, str], list[int]] = {}
    for k in orphans:
        if not window[k]:
            continue
        instance = _instance_of(ctx, k)
        if instance is not None:
            grouped.setdefault((int(ranks[k]), instance), []).append(k)
            continue
        rec = _kernel_record(ctx, k)
        if rec is not None:
            found.append((k, rec))
    for (_rank, instance), members in grouped.items():
        first, rec = _instance_record(ctx, instance, members)
        found.append((first, rec))
    found.sort(key=lambda f: (int(ranks[f[0]]), int(start[f[0]]), f[0]))
    counters: dict[tuple[int, str, bool], int] = {}
    out: list[dict[str, Any]] = []
    ids = idx.ids
    for row, rec in found:
        rec["rank"] = int(ranks[row])
        rec["event_id"] = int(ids[row])
        work = sorted(rec.pop("_work"), key=lambda r: (int(start[r]), r))
        rec["work_event_ids"] = [int(ids[r]) for r in work]
        key = (rec["rank"], rec["pg"], rec["name"] in P2P_TYPES)
        rec["index"] = counters.get(key, 0)
        counters[key] = rec["index"] + 1
        out.append({k: rec[k] for k in RECORD_KEYS})
    return out


#: The keys of a record, in order.
RECORD_KEYS = (
    "rank",
    "name",
    "raw_name",
    "pg",
    "pg_size",
    "seq",
    "index",
    "bytes",
    "dtype",
    "arrival_ns",
    "end_ns",
    "dur_us",
    "event_id",
    "work_event_ids",
)


def _link_work(hosts: list[_Chain], works: list[_Chain], start: np.ndarray, names: Any) -> set[int]:
    """Link each host chain lacking a backend range to a backend range of its type on another
    thread (gloo), first in first out (see the module docstring); the linked anchors."""
    by_type: dict[str, list[_Chain]] = {}
    for w in works:
        by_type.setdefault(_kind(names[w.anchor]), []).append(w)
    for group in by_type.values():
        group.sort(key=lambda w: int(start[w.anchor]))
    hosts_by_type: dict[str, list[_Chain]] = {}
    for h in hosts:
        hosts_by_type.setdefault(_kind(names[h.anchor]), []).append(h)
    linked: set[int] = set()
    for kind, group_hosts in hosts_by_type.items():
        free = by_type.get(kind, [])
        j = 0
        for h in sorted(group_hosts, key=lambda c: int(start[c.anchor])):
            t = int(start[h.anchor])
            while j < len(free) and int(start[free[j].anchor]) < t:
                j += 1  # started before this call: its call is not in the trace
            if j == len(free):
                break
            h.work = free[j].anchor
            linked.add(free[j].anchor)
            j += 1
    return linked


def _world_size(trace: Trace) -> int | None:
    """``distributedInfo.world_size``, when it is a positive integer."""
    world = (trace.meta.distributed_info or {}).get("world_size")
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        return None
    return world


def _pg_fields(args: Mapping[str, Any], ctx: _Ctx) -> tuple[str, int | None]:
    """(process group, its size): the args' ``Process Group Name`` and ``Group size``, else
    the size ``distributedInfo.pg_config`` gives the group, else, for a call that names no
    group in a trace whose ``distributedInfo`` lists none, the world size (the default
    group's)."""
    name = args.get("Process Group Name")
    unnamed = name in (None, "")
    pg = str(name) if not unnamed else (ctx.only_pg if ctx.only_pg is not None else "0")
    size = int_arg(args, "Group size")
    if size is None:
        size = ctx.pg_sizes.get(pg)
    if size is None and unnamed:
        size = ctx.world
    return pg, size


def _timed(rec: dict[str, Any], arrival: int, end: int, work: list[int]) -> dict[str, Any]:
    rec["_work"] = work  # rows, made ids by collective_records
    rec["arrival_ns"] = int(arrival)
    rec["end_ns"] = int(end)
    rec["dur_us"] = round((int(end) - int(arrival)) / 1000.0, 3)
    return rec


def _host_record(ctx: _Ctx, c: _Chain, kernels: list[int]) -> dict[str, Any] | None:
    idx, range_rows = ctx.idx, ctx.range_rows
    names = idx.name
    params = [r for r in c.rows if names[r] == PARAM_COMMS]
    rpc = _args(idx, params[0]) if params else {}
    coll_name = rpc.get("Collective name")
    members = list(c.rows) + ([c.work] if c.work >= 0 else [])
    ranges = [r for r in members if range_rows[r]]
    if isinstance(coll_name, str) and coll_name:
        kind = _kind(coll_name)
    else:
        named = [r for r in c.rows if names[r] != PARAM_COMMS] + ranges
        if not named:  # a record_param_comms alone that names nothing
            return None
        kind = _kind(names[named[0]])
    if kind == WAIT:
        return None
    kernel_args = [_args(idx, k) for k in kernels[:1]]
    seq = int_arg(rpc, "Seq", "seq")
    if seq is None and kernel_args:
        seq = int_arg(kernel_args[0], "Seq", "seq")
    sized = ("In msg nelems", "Out msg nelems")
    src = next((a for a in [rpc, *kernel_args] if any(k in a for k in sized)), {})
    pg, pg_size = _pg_fields(src or rpc, ctx)
    if src:
        ins = int_arg(src, "In msg nelems")
        outs = int_arg(src, "Out msg nelems")
        counts = [n for n in (ins, outs) if n is not None]
        nelems = max(counts) if counts else None
        dtype = scalar_type(src.get("dtype"))
    else:
        nelems, dtype = None, None
        types: list[str] = []
        for r in sorted(members, key=lambda r: (not range_rows[r], r)):
            n, t = shape_size(_args(idx, r))
            if n is not None:
                nelems = n if nelems is None else max(nelems, n)
            if t is not None:
                types.append(t)
        dtype = types[0] if types else None
    if kind == "barrier" and nelems is None:
        nelems, dtype = 0, dtype or "Byte"
    rec: dict[str, Any] = {
        "name": kind,
        "raw_name": names[c.anchor],
        "pg": pg,
        "pg_size": pg_size,
        "seq": seq,
        "bytes": bytes_of(nelems, dtype),
        "dtype": dtype,
    }
    if kernels:
        k = np.asarray(kernels, dtype=np.int64)
        return _timed(rec, int(idx.start[k].min()), int(idx.end[k].max()), list(kernels))
    if c.work >= 0:
        return _timed(rec, int(idx.start[c.work]), int(idx.end[c.work]), [c.work])
    inline = [r for r in ranges if names[r].startswith(WORK_RANGE_PREFIXES)]
    if inline:  # a backend that works on the calling thread, inside the call (gloo send)
        return _timed(rec, int(idx.start[inline[0]]), int(idx.end[inline[0]]), [inline[0]])
    return _timed(rec, int(idx.start[c.anchor]), int(idx.end[c.anchor]), [])


def _range_record(ctx: _Ctx, row: int) -> dict[str, Any] | None:
    """A backend range with no host call in the trace (gloo work whose call is outside)."""
    idx = ctx.idx
    kind = _kind(idx.name[row])
    if kind == WAIT:
        return None
    nelems, dtype = shape_size(_args(idx, row))
    pg, pg_size = _pg_fields({}, ctx)
    rec: dict[str, Any] = {
        "name": kind,
        "raw_name": idx.name[row],
        "pg": pg,
        "pg_size": pg_size,
        "seq": None,
        "bytes": bytes_of(nelems, dtype),
        "dtype": dtype,
    }
    return _timed(rec, int(idx.start[row]), int(idx.end[row]), [row])


def _instance_of(ctx: _Ctx, row: int) -> str | None:
    """The collective instance a comm event's args name (:data:`INSTANCE_KEYS`), or None."""
    text = ctx.idx.args_text(row)
    if not text or not any(k in text for k in INSTANCE_KEYS):
        return None
    args = _args(ctx.idx, row)
    for key in INSTANCE_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _instance_record(ctx: _Ctx, instance: str, rows: list[int]) -> tuple[int, dict[str, Any]]:
    """(first row, record) of the transfers of one collective instance on one rank."""
    idx = ctx.idx
    rows = sorted(rows, key=lambda r: (int(idx.start[r]), r))
    named = [c for r in rows if (c := collective_of(idx.name[r])) is not None]
    kind = next((c for c in named if c not in P2P_TYPES), named[0] if named else None)
    if kind is None:
        kind = _kind(instance.split("_", 1)[0])
    sizes = [b for r in rows if (b := int_arg(_args(idx, r), "Bytes")) is not None]
    pg, pg_size = _pg_fields({}, ctx)
    rec: dict[str, Any] = {
        "name": kind,
        "raw_name": instance,
        "pg": pg,
        "pg_size": pg_size,
        "seq": None,
        "bytes": max(sizes) if sizes else None,
        "dtype": None,
    }
    r = np.asarray(rows, dtype=np.int64)
    return rows[0], _timed(rec, int(idx.start[r].min()), int(idx.end[r].max()), rows)


def _kernel_record(ctx: _Ctx, row: int) -> dict[str, Any] | None:
    """A comm kernel no host op in the trace issued, when its args name the collective."""
    idx = ctx.idx
    args = _args(idx, row)
    coll_name = args.get("Collective name")
    if not isinstance(coll_name, str) or not coll_name:
        return None
    kind = _kind(coll_name)
    if kind == WAIT:
        return None
    pg, pg_size = _pg_fields(args, ctx)
    counts = [n for n in (int_arg(args, "In msg nelems"), int_arg(args, "Out msg nelems")) if n]
    dtype = scalar_type(args.get("dtype"))
    rec: dict[str, Any] = {
        "name": kind,
        "raw_name": idx.name[row],
        "pg": pg,
        "pg_size": pg_size,
        "seq": int_arg(args, "Seq", "seq"),
        "bytes": bytes_of(max(counts) if counts else None, dtype),
        "dtype": dtype,
    }
    return _timed(rec, int(idx.start[row]), int(idx.end[row]), [row])


__all__ = ["INSTANCE_KEYS", "RECORD_KEYS", "collective_records"]
