"""Collectives: one record per collective call on a rank, matched across the ranks of a job.

:func:`collective_records` reads one rank's trace; :func:`match_collectives` lines the records
of several ranks up into instances (one per collective of the job); :func:`stragglers` names
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
own when its ``args`` name the collective (``Collective name``, recent Kineto).

**Sizes.**  ``bytes`` is ``max(In msg nelems, Out msg nelems)`` times the dtype's size when
``record_param_comms`` says so; otherwise the recorded shapes (``record_shapes=True``) of the
chain's events: the largest argument (a tensor list counts as its total) over the chain, times
the size of the first tensor type recorded.  For an ``all_gather`` into a list only the input
is recorded, so ``bytes`` is the input's size there.  (Gloo traces of PyTorch 2.13 hold no
``record_param_comms``: their type comes from the ``c10d::*`` op, their size from its shapes
and the ``gloo:*`` range's, and they carry no ``seq``.)

**Order.**  ``index`` counts the collectives of one process group in issue order (the anchor's
start), 0-based; point-to-point calls (send, recv) are counted apart, since a send on one rank
pairs with a recv on another and would shift every later collective's index.  With a step
window (``steps``) the count starts at the window: analyse every rank over the same steps.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

if TYPE_CHECKING:
    from opscope.trace import Trace

# -- names -----------------------------------------------------------------------------------

# Host op prefixes of the collectives (c10d ops, functional collectives)
_OP_PREFIXES = ("c10d::", "_c10d_functional::", "c10d_functional::")
# Backend ranges: nested in the host op (nccl:, ucc:) or on the backend's thread (gloo:)
_RANGE_PREFIXES = ("nccl:", "gloo:", "ucc:", "mpi:", "xccl:", "hccl:")
_PARAM_COMMS = "record_param_comms"
# Backends whose range is the work itself (CPU backends); an NCCL range on the host thread
# only enqueues the kernel
_INLINE_RANGES = ("gloo:", "mpi:", "ucc:")

# compact spelling (lower case, no underscores, suffixes cut) -> collective type
_TYPES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "allgatherv": "all_gather",
    "reducescatter": "reduce_scatter",
    "reducescatterv": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoallv": "all_to_all",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv",
    "sendrecv": "send_recv",
    "barrier": "barrier",
    "monitoredbarrier": "barrier",
    "wait": "wait",
    "waittensor": "wait",
}
_SUFFIXES = ("coalesced", "intotensor", "tensor", "single", "base", "inplace")
COLLECTIVE_TYPES = frozenset(_TYPES.values()) - {"wait"}
#: Point-to-point types: counted and matched apart from the collectives.
P2P_TYPES = frozenset({"send", "recv", "send_recv"})
#: Types whose size is the same on every rank (the matcher checks ``bytes`` only for these).
SAME_SIZE_TYPES = frozenset(
    {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "barrier"}
)


def _collective_type(name: str) -> str:
    """The collective type of a collective's name as traces spell it: a ``Collective name``
    (``allreduce``, ``_allgather_base``, ``allgather_into_tensor_coalesced``), a host op
    (``c10d::allreduce_``, ``_c10d_functional::all_gather_into_tensor``), a backend range
    (``nccl:all_reduce``, ``gloo:all_gather``) or an NCCL kernel
    (``ncclKernel_AllReduce_RING_LL_Sum_float(...)``, ``ncclDevKernel_AllGather_RING_LL``).
    Coalesced, base and into-tensor variants are their base type (``raw_name`` keeps the
    detail).  An unknown name gives its compact lower-case spelling."""
    text = name.strip()
    low = text.lower()
    if low.startswith(("nccldevkernel_", "ncclkernel_")):
        text = text.split("_", 2)[1]
    else:
        for prefix in _OP_PREFIXES + _RANGE_PREFIXES:
            if low.startswith(prefix):
                text = text[len(prefix) :]
                break
        text = text.split("(", 1)[0]
    compact = text.lower().replace("_", "").replace(" ", "")
    changed = True
    while changed and compact not in _TYPES:
        changed = False
        for suffix in _SUFFIXES:
            if compact.endswith(suffix) and len(compact) > len(suffix):
                compact = compact[: -len(suffix)]
                changed = True
    return _TYPES.get(compact, compact)


# -- dtypes ----------------------------------------------------------------------------------

#: Element sizes by ScalarType name, as ``record_param_comms`` spells the ``dtype``.
DTYPE_BYTES = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Int": 4,
    "Long": 8,
    "Short": 2,
    "Byte": 1,
    "Char": 1,
    "Bool": 1,
    "ComplexHalf": 4,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
    "QInt8": 1,
    "QUInt8": 1,
    "QInt32": 4,
    "QUInt4x2": 1,
    "QUInt2x4": 1,
    "Float8_e4m3fn": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2": 1,
    "Float8_e5m2fnuz": 1,
    "Float8_e8m0fnu": 1,
    "Float4_e2m1fn_x2": 1,
}
# ``Input type`` (record_shapes) spells C++ types: the ScalarType of each
_CPP_TYPES = {
    "float": "Float",
    "double": "Double",
    "int": "Int",
    "long": "Long",
    "long int": "Long",
    "long long": "Long",
    "int64_t": "Long",
    "short": "Short",
    "short int": "Short",
    "unsigned char": "Byte",
    "signed char": "Char",
    "bool": "Bool",
    "c10::complex<float>": "ComplexFloat",
    "c10::complex<double>": "ComplexDouble",
    "c10::complex<c10::Half>": "ComplexHalf",
    "unsigned short": "UInt16",
    "unsigned int": "UInt32",
    "unsigned long": "UInt64",
}


def _scalar_type(spelling: Any) -> str | None:
    """A tensor type as ScalarType name (``float`` -> ``Float``, ``c10::BFloat16`` ->
    ``BFloat16``); None for what is not a tensor type (``TensorList``, ``Scalar``, ``""``)."""
    if not isinstance(spelling, str) or not spelling:
        return None
    if spelling in DTYPE_BYTES:
        return spelling
    if spelling in _CPP_TYPES:
        return _CPP_TYPES[spelling]
    bare = spelling.removeprefix("c10::")
    return bare if bare in DTYPE_BYTES else None


def _nelems(dims: Any) -> int | None:
    """Elements of one recorded argument: a shape (``[96, 64]``), a tensor list's shapes
    (``[[96, 64], [96]]``, summed), None when nothing is recorded."""
    if not isinstance(dims, list) or not dims:
        return None
    if all(isinstance(d, int) for d in dims):
        return math.prod(dims)
    total = [_nelems(d) for d in dims]
    known = [t for t in total if t is not None]
    return sum(known) if known else None


def _shape_size(args: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """(elements of the largest recorded argument, first tensor type) of an event's args."""
    dims = args.get("Input Dims")
    types = args.get("Input type")
    counts = [_nelems(d) for d in dims] if isinstance(dims, list) else []
    known = [c for c in counts if c is not None]
    dtype = None
    if isinstance(types, list):
        dtype = next((t for t in map(_scalar_type, types) if t is not None), None)
    return (max(known) if known else None), dtype


def _int_arg(args: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


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
    ``end_ns``, ``dur_us`` (``end_ns - arrival_ns``).
    """
    idx = trace.index
    if idx.n == 0:
        return []
    values = [str(v) for v in idx.name.values]
    is_op_name = np.array(
        [
            v == _PARAM_COMMS
            or (v.startswith(_OP_PREFIXES) and _collective_type(v) in COLLECTIVE_TYPES)
            for v in values
        ],
        dtype=bool,
    )
    is_range_name = np.array(
        [v.startswith(_RANGE_PREFIXES) and _collective_type(v) != "wait" for v in values],
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
    ctx = _Ctx(idx, range_rows, pg_sizes, next(iter(pg_sizes)) if len(pg_sizes) == 1 else None)
    ranks = idx.rank
    window = idx.in_steps(steps)

    found: list[tuple[int, dict[str, Any]]] = []  # (anchor row, record)
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
    for k in orphans:
        if window[k]:
            rec = _kernel_record(ctx, k)
            if rec is not None:
                found.append((k, rec))
    found.sort(key=lambda f: (int(ranks[f[0]]), int(start[f[0]]), f[0]))
    counters: dict[tuple[int, str, bool], int] = {}
    out: list[dict[str, Any]] = []
    for row, rec in found:
        rec["rank"] = int(ranks[row])
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
)


def _link_work(hosts: list[_Chain], works: list[_Chain], start: np.ndarray, names: Any) -> set[int]:
    """Link each host chain lacking a backend range to a backend range of its type on another
    thread (gloo), first in first out (see the module docstring); the linked anchors."""
    by_type: dict[str, list[_Chain]] = {}
    for w in works:
        by_type.setdefault(_collective_type(names[w.anchor]), []).append(w)
    for group in by_type.values():
        group.sort(key=lambda w: int(start[w.anchor]))
    hosts_by_type: dict[str, list[_Chain]] = {}
    for h in hosts:
        hosts_by_type.setdefault(_collective_type(names[h.anchor]), []).append(h)
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


def _pg_fields(
    args: Mapping[str, Any], pg_sizes: Mapping[str, int], only_pg: str | None
) -> tuple[str, int | None]:
    name = args.get("Process Group Name")
    pg = str(name) if name not in (None, "") else (only_pg if only_pg is not None else "0")
    size = _int_arg(args, "Group size")
    if size is None:
        size = pg_sizes.get(pg)
    return pg, size


def _bytes_of(nelems: int | None, dtype: str | None) -> int | None:
    if nelems is None or dtype is None or dtype not in DTYPE_BYTES:
        return None
    return int(nelems) * DTYPE_BYTES[dtype]


def _timed(rec: dict[str, Any], arrival: int, end: int) -> dict[str, Any]:
    rec["arrival_ns"] = int(arrival)
    rec["end_ns"] = int(end)
    rec["dur_us"] = round((int(end) - int(arrival)) / 1000.0, 3)
    return rec


def _host_record(ctx: _Ctx, c: _Chain, kernels: list[int]) -> dict[str, Any] | None:
    idx, range_rows = ctx.idx, ctx.range_rows
    names = idx.name
    params = [r for r in c.rows if names[r] == _PARAM_COMMS]
    rpc = _args(idx, params[0]) if params else {}
    coll_name = rpc.get("Collective name")
    members = list(c.rows) + ([c.work] if c.work >= 0 else [])
    ranges = [r for r in members if range_rows[r]]
    if isinstance(coll_name, str) and coll_name:
        kind = _collective_type(coll_name)
    else:
        named = [r for r in c.rows if names[r] != _PARAM_COMMS] + ranges
        if not named:  # a record_param_comms alone that names nothing
            return None
        kind = _collective_type(names[named[0]])
    if kind == "wait":
        return None
    kernel_args = [_args(idx, k) for k in kernels[:1]]
    seq = _int_arg(rpc, "Seq", "seq")
    if seq is None and kernel_args:
        seq = _int_arg(kernel_args[0], "Seq", "seq")
    sized = ("In msg nelems", "Out msg nelems")
    src = next((a for a in [rpc, *kernel_args] if any(k in a for k in sized)), {})
    pg, pg_size = _pg_fields(src or rpc, ctx.pg_sizes, ctx.only_pg)
    if src:
        ins = _int_arg(src, "In msg nelems")
        outs = _int_arg(src, "Out msg nelems")
        counts = [n for n in (ins, outs) if n is not None]
        nelems = max(counts) if counts else None
        dtype = _scalar_type(src.get("dtype"))
    else:
        nelems, dtype = None, None
        types: list[str] = []
        for r in sorted(members, key=lambda r: (not range_rows[r], r)):
            n, t = _shape_size(_args(idx, r))
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
        "bytes": _bytes_of(nelems, dtype),
        "dtype": dtype,
    }
    if kernels:
        k = np.asarray(kernels, dtype=np.int64)
        return _timed(rec, int(idx.start[k].min()), int(idx.end[k].max()))
    if c.work >= 0:
        return _timed(rec, int(idx.start[c.work]), int(idx.end[c.work]))
    inline = [r for r in ranges if names[r].startswith(_INLINE_RANGES)]
    if inline:  # a backend that works on the calling thread, inside the call (gloo send)
        return _timed(rec, int(idx.start[inline[0]]), int(idx.end[inline[0]]))
    return _timed(rec, int(idx.start[c.anchor]), int(idx.end[c.anchor]))


def _range_record(ctx: _Ctx, row: int) -> dict[str, Any] | None:
    """A backend range with no host call in the trace (gloo work whose call is outside)."""
    idx = ctx.idx
    kind = _collective_type(idx.name[row])
    if kind == "wait":
        return None
    nelems, dtype = _shape_size(_args(idx, row))
    pg, pg_size = _pg_fields({}, ctx.pg_sizes, ctx.only_pg)
    rec: dict[str, Any] = {
        "name": kind,
        "raw_name": idx.name[row],
        "pg": pg,
        "pg_size": pg_size,
        "seq": None,
        "bytes": _bytes_of(nelems, dtype),
        "dtype": dtype,
    }
    return _timed(rec, int(idx.start[row]), int(idx.end[row]))


def _kernel_record(ctx: _Ctx, row: int) -> dict[str, Any] | None:
    """A comm kernel no host op in the trace issued, when its args name the collective."""
    idx = ctx.idx
    args = _args(idx, row)
    coll_name = args.get("Collective name")
    if not isinstance(coll_name, str) or not coll_name:
        return None
    kind = _collective_type(coll_name)
    if kind == "wait":
        return None
    pg, pg_size = _pg_fields(args, ctx.pg_sizes, ctx.only_pg)
    counts = [n for n in (_int_arg(args, "In msg nelems"), _int_arg(args, "Out msg nelems")) if n]
    dtype = _scalar_type(args.get("dtype"))
    rec: dict[str, Any] = {
        "name": kind,
        "raw_name": idx.name[row],
        "pg": pg,
        "pg_size": pg_size,
        "seq": _int_arg(args, "Seq", "seq"),
        "bytes": _bytes_of(max(counts) if counts else None, dtype),
        "dtype": dtype,
    }
    return _timed(rec, int(idx.start[row]), int(idx.end[row]))


# -- matching across ranks -------------------------------------------------------------------


@dataclass
class CollectiveColumns:
    """The records of several ranks as arrays (one entry per record, ranks concatenated):
    what :func:`match_collectives` works on.  Codes index ``pgs``/``names``; ``seq`` and
    ``bytes`` are -1 where None (``has_seq`` tells a seq of -1 from none)."""

    rank: np.ndarray
    pg: np.ndarray
    pgs: list[str]
    name: np.ndarray
    names: list[str]
    seq: np.ndarray
    has_seq: np.ndarray
    index: np.ndarray
    bytes: np.ndarray
    arrival: np.ndarray
    end: np.ndarray
    dur_us: np.ndarray
    pg_size: np.ndarray  # -1 where None

    def __len__(self) -> int:
        return len(self.rank)


def _codes(values: list[str], table: dict[str, int]) -> np.ndarray:
    """Codes of strings, growing ``table`` (first seen, first code)."""
    get = table.setdefault
    return np.fromiter((get(v, len(table)) for v in values), dtype=np.int64, count=len(values))


def _int_or(values: Iterable[Any], count: int) -> tuple[np.ndarray, np.ndarray]:
    """(values with None as -1, which were not None)."""
    raw = list(values)
    has = np.fromiter((v is not None for v in raw), dtype=bool, count=count)
    if has.all():
        return np.fromiter(raw, dtype=np.int64, count=count), has
    return np.fromiter((-1 if v is None else v for v in raw), dtype=np.int64, count=count), has


def collective_columns(
    records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
) -> CollectiveColumns:
    """The records of each rank (lists of :func:`collective_records` dicts) as columns; the
    record's own ``rank`` is ignored in favour of the key it is filed under."""
    pg_table: dict[str, int] = {}
    name_table: dict[str, int] = {}
    parts: dict[str, list[np.ndarray]] = {
        k: []
        for k in (
            "rank",
            "pg",
            "name",
            "seq",
            "has_seq",
            "index",
            "bytes",
            "arrival",
            "end",
            "dur_us",
            "pg_size",
        )
    }
    for r, recs in records_by_rank.items():
        n = len(recs)
        if not n:
            continue
        parts["rank"].append(np.full(n, int(r), dtype=np.int64))
        parts["pg"].append(_codes([str(p) for p in map(itemgetter("pg"), recs)], pg_table))
        parts["name"].append(_codes(list(map(itemgetter("name"), recs)), name_table))
        seq, has = _int_or(map(itemgetter("seq"), recs), n)
        parts["seq"].append(seq)
        parts["has_seq"].append(has)
        parts["index"].append(np.fromiter(map(itemgetter("index"), recs), np.int64, n))
        parts["bytes"].append(_int_or(map(itemgetter("bytes"), recs), n)[0])
        parts["arrival"].append(np.fromiter(map(itemgetter("arrival_ns"), recs), np.int64, n))
        parts["end"].append(np.fromiter(map(itemgetter("end_ns"), recs), np.int64, n))
        parts["dur_us"].append(np.fromiter(map(itemgetter("dur_us"), recs), np.float64, n))
        parts["pg_size"].append(_int_or(map(itemgetter("pg_size"), recs), n)[0])
    empty = {"has_seq": np.zeros(0, dtype=bool), "dur_us": np.zeros(0, dtype=np.float64)}
    cols = {
        k: np.concatenate(v) if v else empty.get(k, np.zeros(0, dtype=np.int64))
        for k, v in parts.items()
    }
    return CollectiveColumns(
        pgs=list(pg_table),
        names=list(name_table),
        **cols,
    )


#: The keys of an instance, in order.
INSTANCE_KEYS = (
    "name",
    "pg",
    "seq",
    "ranks",
    "last_rank",
    "start_skew_us",
    "end_skew_us",
    "wait_us",
    "dur_us",
    "bytes",
)


def match_collectives(
    records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]] | CollectiveColumns,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Line the ranks' collective records up into instances: ``(instances, warnings)``.

    Per process group, records are matched by ``seq`` when every record of the group (on
    every rank) has one, else by ``index``; point-to-point records (send, recv) are not
    matched (a send pairs with a recv on another rank, not with a send).  Every rank of an
    instance must agree on the collective type and, for the types whose size is the same on
    every rank (:data:`SAME_SIZE_TYPES`), on ``bytes`` (where known).  At the first instance
    where they do not, a warning names the ranks that differ from the majority and matching
    of that group stops there: the later records of the group could be shifted by one, and a
    shifted match would give wrong waits without a sign of it.  A rank with no record of an
    instance (its window started later or ended earlier, or a record is missing) is left out
    of that instance and named in one warning per group and rank; a group with records from
    fewer ranks than its ``pg_size`` says so too.  A rank with two records of one ``seq``
    keeps the first.

    Instance keys: ``name``, ``pg``, ``seq`` (the seq, or the index), ``ranks``,
    ``last_rank`` (the last to arrive; the lowest of a tie), ``start_skew_us`` (last
    arrival - first), ``end_skew_us`` (last end - first), ``wait_us`` (``{"<rank>": last
    arrival - own arrival}``), ``dur_us`` (the transfer time: the shortest record duration
    over the ranks, the last arrival's in effect) and ``bytes`` (the largest known).
    Instances come per group (groups by name), in ``seq``/index order.
    """
    cols = (
        records_by_rank
        if isinstance(records_by_rank, CollectiveColumns)
        else collective_columns(records_by_rank)
    )
    instances: list[dict[str, Any]] = []
    warnings: list[str] = []
    if not len(cols):
        return instances, warnings
    p2p_codes = [i for i, n in enumerate(cols.names) if n in P2P_TYPES]
    p2p = np.isin(cols.name, p2p_codes) if p2p_codes else np.zeros(len(cols), dtype=bool)
    for pg_code in sorted(range(len(cols.pgs)), key=lambda i: cols.pgs[i]):
        sel = np.flatnonzero((cols.pg == pg_code) & ~p2p)
        if len(sel):
            _match_group(cols, cols.pgs[pg_code], sel, instances, warnings)
    return instances, warnings


def _majority_outliers(values: np.ndarray, ranks: np.ndarray) -> tuple[Any, list[int]]:
    """The most common value (ties: the smallest) and the ranks holding another."""
    uniq, counts = np.unique(values, return_counts=True)
    ref = uniq[int(np.argmax(counts))]
    return ref, sorted(int(r) for r in ranks[values != ref])


def _rank_codes(rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ranks, sorted; each record's position among them)."""
    lo, hi = int(rank.min()), int(rank.max())
    if lo >= 0 and hi < 1 << 22:  # ranks: small integers, counted rather than sorted
        present = np.bincount(rank, minlength=hi + 1) > 0
        code = np.cumsum(present) - 1
        return np.flatnonzero(present).astype(np.int64), code[rank].astype(np.int64)
    uniq, inverse = np.unique(rank, return_inverse=True)
    return uniq.astype(np.int64), inverse.reshape(-1).astype(np.int64)


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic collector paused: building 10^5 instance dicts otherwise sets it off again
    and again over containers that hold no cycle."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _match_group(
    cols: CollectiveColumns,
    pg: str,
    sel: np.ndarray,
    instances: list[dict[str, Any]],
    warnings: list[str],
) -> None:
    whole = len(sel) == len(cols)  # sel is sorted: all records, no gathers needed
    by_seq = bool((cols.has_seq if whole else cols.has_seq[sel]).all())
    key_src = cols.seq if by_seq else cols.index
    key_all = key_src if whole else key_src[sel]
    rank_all = cols.rank if whole else cols.rank[sel]
    # one stable sort on (key, rank): each rank's records come in key order already, so the
    # sort merges one sorted run per rank
    group_ranks, rank_codes = _rank_codes(rank_all)
    n_codes = len(group_ranks)
    k_min = int(key_all.min())
    composite = (key_all - k_min) * n_codes + rank_codes
    order = np.argsort(composite, kind="stable")
    rows = order if whole else sel[order]
    composite = composite[order]
    key = composite // n_codes + k_min
    code = composite % n_codes  # position among the group's ranks
    rank = group_ranks[code]
    label = "seq" if by_seq else "index"
    # a rank with two records of one key keeps the first
    dup = np.zeros(len(rows), dtype=bool)
    if len(rows) > 1:
        dup[1:] = composite[1:] == composite[:-1]
    if dup.any():
        doubled = sorted({int(r) for r in rank[dup]})
        warnings.append(
            f"pg {pg}: ranks {doubled} have several records of one {label} "
            f"({int(dup.sum())} extra, first at {label} {int(key[dup][0])}); the first is kept"
        )
        keep = ~dup
        rows, key, rank, code = rows[keep], key[keep], rank[keep], code[keep]
    n_ranks = n_codes
    known_size = int((cols.pg_size if whole else cols.pg_size[sel]).max())
    if known_size > n_ranks:
        warnings.append(
            f"pg {pg}: records from {n_ranks} of its {known_size} ranks "
            f"({', '.join(map(str, group_ranks.tolist()))}); waits and skews cover those only"
        )
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, len(rows)])
    n_groups = len(starts)

    # agreement: type on every rank; size where the type's size is the same on every rank
    name = cols.name[rows]
    nbytes = cols.bytes[rows]
    name_bad = np.minimum.reduceat(name, starts) != np.maximum.reduceat(name, starts)
    big = np.iinfo(np.int64).max
    b_min = np.minimum.reduceat(np.where(nbytes >= 0, nbytes, big), starts)
    b_max = np.maximum.reduceat(nbytes, starts)
    same_size = np.isin(
        cols.name[rows[starts]],
        [i for i, n in enumerate(cols.names) if n in SAME_SIZE_TYPES] or [-1],
    )
    size_bad = same_size & (b_max >= 0) & (b_min != big) & (b_min != b_max)
    bad = np.flatnonzero(name_bad | size_bad)
    if len(bad):
        g = int(bad[0])
        a, b = int(starts[g]), int(starts[g] + counts[g])
        at = f"{label} {int(key[a])}"
        if name_bad[g]:
            ref, odd = _majority_outliers(name[a:b], rank[a:b])
            found = sorted({cols.names[int(v)] for v in name[a:b] if v != ref})
            what = f"not {cols.names[int(ref)]} but {', '.join(found)}"
        else:
            valid = nbytes[a:b] >= 0
            ref, odd = _majority_outliers(nbytes[a:b][valid], rank[a:b][valid])
            what = f"bytes differ from {int(ref)}"
        later = n_groups - g
        warnings.append(
            f"pg {pg}: ranks {odd} disagree at {at} ({what}); matching of pg {pg} stopped "
            f"there ({later} instance{'s' if later != 1 else ''} from it on not matched)"
        )
        cut = a
        rows, key, rank, code = rows[:cut], key[:cut], rank[:cut], code[:cut]
        starts, counts = starts[:g], counts[:g]
        n_groups = g
        nbytes = nbytes[:cut]
        b_max = b_max[:g]
        if not n_groups:
            return

    group_of = np.repeat(np.arange(n_groups), counts)
    # missing ranks, one warning per rank
    short = np.flatnonzero(counts < n_ranks)
    if len(short):
        in_short = (counts < n_ranks)[group_of]
        present = np.zeros((len(short), n_ranks), dtype=bool)
        present[np.searchsorted(short, group_of[in_short]), code[in_short]] = True
        for j in np.flatnonzero(~present.all(axis=0)).tolist():
            miss = np.flatnonzero(~present[:, j])
            warnings.append(
                f"pg {pg}: rank {int(group_ranks[j])} has no record of {len(miss)} "
                f"instance{'s' if len(miss) != 1 else ''} (first: {label} "
                f"{int(key[starts[short[miss[0]]]])}); matched without it"
            )

    arrival = cols.arrival[rows]
    end = cols.end[rows]
    first = np.minimum.reduceat(arrival, starts)
    last = np.maximum.reduceat(arrival, starts)
    end_skew = np.maximum.reduceat(end, starts) - np.minimum.reduceat(end, starts)
    dur = np.minimum.reduceat(cols.dur_us[rows], starts)
    last_of = last[group_of]
    # the last to arrive (the lowest rank of a tie: records are in rank order per instance)
    at_last = np.flatnonzero(arrival == last_of)
    firsts = np.r_[True, group_of[at_last][1:] != group_of[at_last][:-1]]
    last_rank = rank[at_last[firsts]]
    wait = np.round((last_of - arrival) / 1000.0, 3)

    full_ranks = group_ranks.tolist()
    full_keys = [str(r) for r in full_ranks]
    full = counts == n_ranks
    with _no_gc():
        # wait dicts: the instances every rank is in as one 2-D block, the others one by one
        waits: list[dict[str, float]] = [{}] * n_groups
        full_at = np.flatnonzero(full)
        if len(full_at):
            # one flat list, each dict taking the next n_ranks values (zip stops at the keys)
            flat = iter(wait[np.repeat(full, counts)].tolist())
            for g in full_at.tolist():
                waits[g] = dict(zip(full_keys, flat))  # noqa: B905
        ranks_of: list[list[int] | None] = [None] * n_groups
        for g in np.flatnonzero(~full).tolist():
            a, b = int(starts[g]), int(starts[g] + counts[g])
            ranks_g = rank[a:b].tolist()
            ranks_of[g] = ranks_g
            waits[g] = dict(zip(map(str, ranks_g), wait[a:b].tolist(), strict=True))
        names = cols.names
        instances.extend(
            {
                "name": names[nm],
                "pg": pg,
                "seq": k,
                "ranks": list(full_ranks) if rk is None else rk,
                "last_rank": lr,
                "start_skew_us": ss,
                "end_skew_us": es,
                "wait_us": w,
                "dur_us": d,
                "bytes": by if by >= 0 else None,
            }
            for nm, k, rk, lr, ss, es, w, d, by in zip(
                cols.name[rows[starts]].tolist(),
                key[starts].tolist(),
                ranks_of,
                last_rank.tolist(),
                np.round((last - first) / 1000.0, 3).tolist(),
                np.round(end_skew / 1000.0, 3).tolist(),
                waits,
                dur.tolist(),
                b_max.tolist(),
                strict=True,
            )
        )


# -- stragglers ------------------------------------------------------------------------------

#: A straggler's caused wait is at least this many times the median of the other ranks'.
STRAGGLER_RATIO = 3.0
#: ... and at least this share of the time all ranks spent in the matched collectives.
STRAGGLER_SHARE = 0.25


def stragglers(instances: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ranks the others wait for, worst first (empty when no rank stands out).

    For each rank: ``times_last`` (instances of two ranks or more where it arrived last),
    ``caused_wait_us`` (over those instances, the others' waits summed), ``own_wait_us`` (its
    own waits summed) and ``cause`` (None: the trace tells when a rank arrived late, not
    why).  A rank *stands out* when both hold:

    * its caused wait is at least :data:`STRAGGLER_RATIO` times the median caused wait of the
      other ranks (it, not chance, makes the others wait: with ranks late in turn by noise,
      each causes a similar share); and
    * its caused wait is at least :data:`STRAGGLER_SHARE` of the rank-time in the matched
      collectives (every rank's wait plus the transfer time, over all instances): the waiting
      matters next to the collectives themselves.  (Gloo jobs on a shared two-core CPU, no rank
      slowed, gave the most-waited-for rank at most about a tenth; a rank slowed before each
      step's first collective gave 0.8 and more.)

    Only the ranks that stand out are returned.
    """
    caused: dict[str, float] = {}
    own: dict[str, float] = {}
    times_last: dict[str, int] = {}
    rank_time = 0.0
    by_keys: dict[tuple[str, ...], list[Iterable[float]]] = {}
    for inst in instances:
        waits: Mapping[str, float] = inst["wait_us"]
        n = len(waits)
        rank_time += float(inst["dur_us"]) * n
        if n < 2:
            continue
        total = sum(waits.values())
        rank_time += total
        last = str(inst["last_rank"])
        caused[last] = caused.get(last, 0.0) + total
        times_last[last] = times_last.get(last, 0) + 1
        by_keys.setdefault(tuple(waits), []).append(waits.values())
    for keys, rows in by_keys.items():
        flat = np.fromiter(chain.from_iterable(rows), dtype=np.float64, count=len(keys) * len(rows))
        sums = flat.reshape(len(rows), len(keys)).sum(axis=0)
        for k, s in zip(keys, sums.tolist(), strict=True):
            own[k] = own.get(k, 0.0) + s
    ranks = sorted(own, key=int)
    out: list[dict[str, Any]] = []
    for r in ranks:
        mine = caused.get(r, 0.0)
        others = [caused.get(o, 0.0) for o in ranks if o != r]
        median = float(np.median(others)) if others else 0.0
        if mine <= 0 or mine < STRAGGLER_RATIO * median or mine < STRAGGLER_SHARE * rank_time:
            continue
        out.append(
            {
                "rank": int(r),
                "times_last": times_last.get(r, 0),
                "caused_wait_us": round(mine, 3),
                "own_wait_us": round(own.get(r, 0.0), 3),
                "cause": None,
            }
        )
    out.sort(key=lambda d: (-d["caused_wait_us"], d["rank"]))
    return out


__all__ = [
    "COLLECTIVE_TYPES",
    "DTYPE_BYTES",
    "INSTANCE_KEYS",
    "P2P_TYPES",
    "RECORD_KEYS",
    "SAME_SIZE_TYPES",
    "CollectiveColumns",
    "collective_columns",
    "collective_records",
    "match_collectives",
    "stragglers",
]
