"""fusion: chains of elementwise device executions that one fused kernel would replace.

Contract: the rule looks at *units* (the ops the program called, see
:mod:`opscope.analysis.findings._view`) that did device work in the window, in call order per
thread and per enclosing scope (the nearest non-``aten::`` op: a module, a ``record_function``
range, the profiler step).  It reports three patterns, one finding per distinct chain (same
scope name, same op names), occurrences summed:

* **elementwise runs** - at least :data:`MIN_RUN` consecutive units that are elementwise,
  cast or reduction ops (:data:`FUSABLE`), whose executions are all kernels (no copies) - small
  ones cost a launch each, large ones a memory pass each that a fused kernel saves - on the
  same data (the leading dimensions of
  their largest tensor input agree, when shapes were recorded).  The naive RMSNorm
  ``aten::mul, aten::mean, aten::add, aten::rsqrt, aten::mul, aten::mul`` is one.  A run inside
  an ``aten::`` op (a built-in that decomposes, e.g. ``aten::rms_norm`` on the CPU) is not a
  unit sequence and is never reported: the program already calls the built-in.
* **unfused attention** - ``bmm/matmul``, optional scale/mask, ``softmax``, optional dropout,
  ``bmm/matmul``: ``torch.nn.functional.scaled_dot_product_attention``.
* **matmul + bias** - ``aten::mm``/``aten::matmul`` directly followed by ``aten::add`` of a
  1-D tensor: ``torch.addmm`` / ``torch.nn.functional.linear`` with ``bias``.

``time_at_stake_us``: for a run, its device time minus its longest unit's (a fused kernel
still reads the inputs and writes the result once, which costs about one pass); for attention,
the time of the units between the two matmuls (the score matrix is never materialised by the
fused kernel); for matmul + bias, the ``add``.  ``step_savings_us`` is the critical path's
what-if of that change over every occurrence: those executions gone, the rest as recorded.
``details`` give launches saved (executions minus one per occurrence) and, when ``Input
Dims``/``Input type`` were recorded, the bytes of the intermediates the chain writes to memory
and reads back.

Threshold: a chain is reported when its time at stake is at least :data:`MIN_WALL_SHARE`
(1 %) of the window's wall time and at least :data:`MIN_AT_STAKE_US`; at most
:data:`MAX_FINDINGS` chains, largest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opscope.analysis.costs import itemsize
from opscope.analysis.critical.fixes import Fix, FixPart
from opscope.analysis.findings._view import (
    EventView,
    TensorInputs,
    fmt_us,
    ids_evidence,
    numel,
    view,
)
from opscope.analysis.findings.base import Context, Finding, Rule, make_finding
from opscope.analysis.opsets import ELEMENTWISE, MATMULS, REDUCTIONS, SOFTMAX
from opscope.trace.arrays import unique_ints

MIN_RUN = 3
MIN_WALL_SHARE = 0.01
MIN_AT_STAKE_US = 5.0
MAX_FINDINGS = 5
MAX_CHAIN = 12  # longer runs are cut into chains of this length (keeps signatures readable)

FUSABLE = ELEMENTWISE | REDUCTIONS
PATTERNS = ("run", "attention", "bias")
_MAX_MEMBERS = MAX_CHAIN  # an attention chain has at most 6 members, a bias chain 2


def base_name(name: str) -> str:
    """``aten::add_`` -> ``add``; ``aten::mean.dim`` -> ``mean``; non-aten names unchanged."""
    if not name.startswith("aten::"):
        return name
    b = name[6:].split(".", 1)[0]
    return b[:-1] if b.endswith("_") and len(b) > 1 else b


@dataclass
class Chain:
    pattern: str  # run | attention | bias
    scope: str
    names: tuple[str, ...]
    occurrences: int = 0
    device_ns: int = 0
    at_stake_ns: int = 0
    launches_saved: int = 0
    intermediate_bytes: int | None = None
    exec_rows: list[int] = field(default_factory=list)
    first_range: tuple[int, int] | None = None
    # the executions the fused op would no longer run, over every occurrence
    removed_rows: np.ndarray | None = None


@dataclass
class _Units:
    """The units with device work, sorted into sequences (per rank, thread and scope, in call
    order): one entry per unit, arrays in that order."""

    row: np.ndarray  # the unit's event row
    name: np.ndarray  # name code (text codes of the index)
    scope: np.ndarray  # scope code: a name code, or the code of a fixed label
    seq_lo: np.ndarray  # first position of the unit's sequence
    seq_hi: np.ndarray  # one past its last position
    device_ns: np.ndarray
    n_exec: np.ndarray
    kernels_only: np.ndarray  # every execution a kernel (no copies)
    exec_lo: np.ndarray  # the unit's executions: execs[exec_lo : exec_lo + n_exec]
    execs: np.ndarray  # execution rows, grouped by unit, by start within a unit
    base: dict[int, str]  # name code -> base name
    scope_names: dict[int, str]


@dataclass
class _Occurrences:
    """Chain occurrences (member units ``lo .. lo + size - 1``), in the order the scan of
    each sequence meets them."""

    pattern: np.ndarray  # index into PATTERNS
    lo: np.ndarray
    size: np.ndarray
    at_stake_ns: np.ndarray
    inter: np.ndarray  # intermediate bytes, -1 when unknown
    order: np.ndarray  # (sequence, phase, position) rank: the scan order


def _units(v: EventView) -> _Units | None:
    """Units with device work, grouped into sequences (per rank/thread/scope, call order)."""
    e = np.flatnonzero(v.is_exec & (v.op >= 0))
    if len(e) == 0:
        return None
    ix = v.index
    unit = v.unit_of(v.op[e])
    order = np.lexsort((v.start[e], unit))
    e, unit = e[order], unit[order]
    uniq, first = np.unique(unit, return_index=True)
    n_exec = np.diff(np.append(first, len(e)))
    dev = np.add.reduceat(v.exec_dur[e], first)
    not_kernel = ~ix.kind.isin(("kernel", "exec", "op"))[e]
    kernels_only = np.add.reduceat(not_kernel.astype(np.int64), first) == 0
    # sequences: (rank, pid, tid, scope) in that order, then start; ties by row (a stable sort
    # of the rows, which np.unique sorted)
    pid, tid = ix.pid.text_codes()[uniq], ix.tid.text_codes()[uniq]
    parent = v.parent[uniq]
    s = np.lexsort((v.start[uniq], parent, tid, pid, v.rank[uniq]))
    rows = uniq[s]
    rank, pid, tid, parent = v.rank[rows], pid[s], tid[s], parent[s]
    n = len(rows)
    new = np.ones(n, dtype=bool)
    new[1:] = (
        (rank[1:] != rank[:-1])
        | (pid[1:] != pid[:-1])
        | (tid[1:] != tid[:-1])
        | (parent[1:] != parent[:-1])
    )
    starts = np.flatnonzero(new)
    seq = np.cumsum(new) - 1
    ends = np.append(starts[1:], n)
    names = ix.name.text_codes()
    name = names[rows].astype(np.int64)
    labels = {"top level": -1, "the profiler step": -2}
    label_code = {k: ix.name.code(k) if ix.name.code(k) >= 0 else c for k, c in labels.items()}
    scope = np.where(
        parent < 0,
        label_code["top level"],
        np.where(
            v.is_steplike[np.maximum(parent, 0)],
            label_code["the profiler step"],
            names[np.maximum(parent, 0)],
        ),
    ).astype(np.int64)
    scope_names = {code: text for text, code in label_code.items()}
    base_of = {
        c: base_name(str(ix.name.values[c]) if c >= 0 else "") for c in unique_ints(name).tolist()
    }
    return _Units(
        row=rows,
        name=name,
        scope=scope,
        seq_lo=starts[seq],
        seq_hi=ends[seq],
        device_ns=dev[s],
        n_exec=n_exec[s],
        kernels_only=kernels_only[s],
        exec_lo=first[s],
        execs=e,
        base=base_of,
        scope_names=scope_names,
    )


def _shape_info(inputs: TensorInputs, reduction: bool) -> tuple[tuple[int, ...] | None, int | None]:
    """(data key, output bytes) of a unit from its recorded input shapes."""
    if not inputs:
        return None, None
    shape, dtype = max(inputs, key=lambda it: (numel(it[0]), len(it[0])))
    key = tuple(shape[:-1]) if len(shape) >= 2 else None
    elems = numel(shape)
    if reduction and shape:
        elems //= max(shape[-1], 1)  # a norm-style reduction over the last dimension
    return key, elems * (itemsize(dtype) or 4)


def _base_is(u: _Units, bases: frozenset[str]) -> np.ndarray:
    """Per unit: whether its base name is one of ``bases`` (decided once per name)."""
    codes = np.array(sorted(u.base), dtype=np.int64)
    hit = np.array([u.base[c] in bases for c in codes.tolist()], dtype=bool)
    if not len(codes):
        return np.zeros(len(u.name), dtype=bool)
    return np.asarray(hit[np.searchsorted(codes, u.name)], dtype=bool)


def _data(v: EventView, u: _Units, fusable_base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per unit: a data-key id (-1 unknown) and the output bytes (-1 unknown), for the units
    whose base is fusable; parsed once per distinct recorded shape."""
    n = len(u.row)
    key = np.full(n, -1, dtype=np.int64)
    out = np.full(n, -1, dtype=np.int64)
    idx = np.flatnonzero(fusable_base)
    if not len(idx):
        return key, out
    red = _base_is(u, REDUCTIONS)[idx]
    codes = v.input_codes(u.row[idx])
    keys: dict[tuple[int, ...], int] = {}
    uniq, inverse = np.unique(codes * 2 + red, return_inverse=True)
    inverse = inverse.reshape(-1)
    for j, pair in enumerate(uniq.tolist()):
        code, is_red = pair // 2, bool(pair % 2)
        at = idx[inverse == j]
        if code == -2:  # args the index does not read: one by one
            for i in at.tolist():
                k, b = _shape_info(v.tensor_inputs(int(u.row[i])), is_red)
                key[i] = -1 if k is None else keys.setdefault(k, len(keys))
                out[i] = -1 if b is None else b
            continue
        k, b = _shape_info([] if code == -1 else v.inputs_of_code(code), is_red)
        key[at] = -1 if k is None else keys.setdefault(k, len(keys))
        out[at] = -1 if b is None else b
    return key, out


def _runs(u: _Units, fus: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Elementwise runs: (first unit, length) of each, in scan order.

    The scan takes maximal stretches of fusable units in a sequence whose neighbours share
    their data key (or one of them has none), cuts each into pieces of :data:`MAX_CHAIN` from
    its start, and splits a piece that repeats one chain back to back into its repetitions
    (:func:`_periods` of one piece); runs shorter than :data:`MIN_RUN` are dropped.
    """
    n = len(fus)
    if not fus.any():
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    idx = np.arange(n)
    prev = np.maximum(idx - 1, 0)
    first_in_seq = idx == u.seq_lo
    compat = (key < 0) | (key[prev] < 0) | (key == key[prev])
    new_stretch = fus & (first_in_seq | ~fus[prev] | ~compat)
    stretch = np.cumsum(new_stretch) - 1
    stretch_start = idx[new_stretch]
    pos = idx - stretch_start[np.maximum(stretch, 0)]
    piece_first = fus & (pos % MAX_CHAIN == 0)
    lo = idx[piece_first]
    piece = np.cumsum(piece_first) - 1
    size = np.bincount(piece[fus], minlength=len(lo)).astype(np.int64)
    # back-to-back repetitions: the smallest period p (MIN_RUN <= p <= size // 2) with
    # name[i] == name[i + p] over the whole piece
    period = np.zeros(len(lo), dtype=np.int64)
    for p in range(MIN_RUN, MAX_CHAIN // 2 + 1):
        same = np.zeros(n, dtype=bool)
        if p < n:
            same[: n - p] = u.name[: n - p] == u.name[p:]
        bad = np.concatenate(([0], np.cumsum(~same)))
        end = np.clip(lo + size - p, lo, n)
        ok = (period == 0) & (size // 2 >= p) & (bad[end] - bad[lo] == 0)
        period[ok] = p
    step = np.where(period > 0, period, size)
    count = -(-size // np.maximum(step, 1))
    which = np.repeat(np.arange(len(lo)), count)
    k = np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count)
    r_lo = lo[which] + k * step[which]
    r_size = np.minimum(step[which], size[which] - k * step[which])
    keep = r_size >= MIN_RUN
    return r_lo[keep], r_size[keep]


def _occurrences(v: EventView, u: _Units) -> _Occurrences:
    n = len(u.row)
    fusable_base = _base_is(u, FUSABLE)
    is_matmul = _base_is(u, MATMULS)
    is_softmax = _base_is(u, SOFTMAX)
    is_mm = _base_is(u, frozenset(("mm", "matmul")))
    is_add = _base_is(u, frozenset(("add",)))
    # any duration: small executions cost launches, large ones are memory-bound passes that
    # write intermediates out and read them back - a fused kernel saves both
    fus = fusable_base & u.kernels_only & (u.n_exec > 0)
    key, out = _data(v, u, fusable_base)
    cum = np.concatenate(([0], np.cumsum(u.device_ns)))
    out_known = np.concatenate(([0], np.cumsum(out < 0)))
    out_sum = np.concatenate(([0], np.cumsum(np.maximum(out, 0))))
    parts: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    # elementwise runs (phase 0)
    r_lo, r_size = _runs(u, fus, key)
    if len(r_lo):
        hi = r_lo + r_size
        gather = r_lo[:, None] + np.arange(MAX_CHAIN)[None, :]
        inside = gather < hi[:, None]
        longest = np.where(inside, u.device_ns[np.minimum(gather, n - 1)], 0).max(axis=1)
        stake = cum[hi] - cum[r_lo] - longest
        # each intermediate is written once and read back once
        known = out_known[hi - 1] - out_known[r_lo] == 0
        inter = np.where(known, 2 * (out_sum[hi - 1] - out_sum[r_lo]), -1)
        parts.append((0, r_lo, r_size, stake, inter, r_lo))

    # unfused attention: matmul, up to two ops, softmax, up to one op, matmul (phase 1)
    soft = np.flatnonzero(is_softmax)
    if len(soft):
        lo = np.full(len(soft), -1, dtype=np.int64)
        for d in (1, 2, 3):
            c = soft - d
            ok = (lo < 0) & (c >= u.seq_lo[soft]) & is_matmul[np.maximum(c, 0)]
            lo[ok] = c[ok]
        hi = np.full(len(soft), -1, dtype=np.int64)
        for d in (1, 2):
            c = soft + d
            ok = (hi < 0) & (c < u.seq_hi[soft]) & is_matmul[np.minimum(c, n - 1)]
            hi[ok] = c[ok]
        ok = (lo >= 0) & (hi >= 0)
        lo, hi, at = lo[ok], hi[ok], soft[ok]
        stake = cum[hi] - cum[lo + 1]
        parts.append((1, lo, hi - lo + 1, stake, np.full(len(lo), -1), at))

    # matmul then the add of a 1-D bias (phase 1)
    mm = np.flatnonzero(is_mm)
    if len(mm):
        nxt = mm + 1
        ok = (nxt < u.seq_hi[mm]) & is_add[np.minimum(nxt, n - 1)]
        mm, nxt = mm[ok], nxt[ok]
        if len(mm):
            has_bias = v.inputs_flag(u.row[nxt], lambda ins: any(len(s) == 1 for s, _ in ins))
            mm, nxt = mm[has_bias], nxt[has_bias]
            parts.append((2, mm, np.full(len(mm), 2), u.device_ns[nxt], np.full(len(mm), -1), mm))

    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return _Occurrences(empty, empty, empty, empty, empty, empty)
    pattern = np.concatenate([np.full(len(p[1]), p[0]) for p in parts])
    lo = np.concatenate([p[1] for p in parts])
    at = np.concatenate([p[5] for p in parts])
    phase = np.minimum(pattern, 1)
    seq_of = u.seq_lo[lo]
    order = np.lexsort((at, phase, seq_of))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return _Occurrences(
        pattern=pattern,
        lo=lo,
        size=np.concatenate([p[2] for p in parts]).astype(np.int64),
        at_stake_ns=np.concatenate([p[3] for p in parts]).astype(np.int64),
        inter=np.concatenate([p[4] for p in parts]).astype(np.int64),
        order=rank,
    )


def _chains(v: EventView) -> list[Chain]:
    """Every chain found, in the order the scan first meets them (``exec_rows`` and
    ``first_range`` are filled by :func:`_fill`)."""
    u = _units(v)
    if u is None:
        return []
    occ = _occurrences(v, u)
    if not len(occ.lo):
        return []
    # one chain per (pattern, scope, member names)
    width = 3 + _MAX_MEMBERS
    sig = np.full((len(occ.lo), width), -3, dtype=np.int64)
    sig[:, 0] = occ.pattern
    sig[:, 1] = u.scope[occ.lo]
    sig[:, 2] = occ.size
    for j in range(_MAX_MEMBERS):
        inside = occ.size > j
        sig[inside, 3 + j] = u.name[occ.lo[inside] + j]
    _, chain_of = np.unique(sig, axis=0, return_inverse=True)
    chain_of = chain_of.reshape(-1)
    k = int(chain_of.max()) + 1
    # totals per chain (integers: exact in any order)
    launches = np.maximum(_window_sum(u.n_exec, occ.lo, occ.size) - 1, 0)
    device = _window_sum(u.device_ns, occ.lo, occ.size)
    totals = np.zeros((4, k), dtype=np.int64)
    for row, values in enumerate(
        (np.ones(len(occ.lo), np.int64), device, occ.at_stake_ns, launches)
    ):
        np.add.at(totals[row], chain_of, values)
    known = occ.inter >= 0
    inter = np.zeros(k, dtype=np.int64)
    np.add.at(inter, chain_of[known], occ.inter[known])
    has_inter = np.bincount(chain_of[known], minlength=k) > 0
    first_seen = np.full(k, len(occ.lo), dtype=np.int64)
    np.minimum.at(first_seen, chain_of, occ.order)
    chains: list[Chain] = []
    names = v.index.name
    for c in np.argsort(first_seen, kind="stable").tolist():
        at = int(np.flatnonzero(chain_of == c)[0])
        lo, size = int(occ.lo[at]), int(occ.size[at])
        scope = int(u.scope[lo])
        chains.append(
            Chain(
                pattern=PATTERNS[int(occ.pattern[at])],
                scope=u.scope_names[scope] if scope in u.scope_names else str(names.values[scope]),
                names=tuple(str(names.values[x]) if x >= 0 else "" for x in u.name[lo : lo + size]),
                occurrences=int(totals[0, c]),
                device_ns=int(totals[1, c]),
                at_stake_ns=int(totals[2, c]),
                launches_saved=int(totals[3, c]),
                intermediate_bytes=int(inter[c]) if has_inter[c] else None,
            )
        )
    v.cache["fusion"] = (u, occ, chain_of, np.argsort(first_seen, kind="stable"))
    return chains


def _window_sum(values: np.ndarray, lo: np.ndarray, size: np.ndarray) -> np.ndarray:
    cum = np.concatenate(([0], np.cumsum(values)))
    return np.asarray(cum[lo + size] - cum[lo], dtype=np.int64)


def _fill(v: EventView, chain_index: int, c: Chain) -> None:
    """The executions of a chain's first occurrences (until 50 are collected) and the time
    range of its first occurrence."""
    u, occ, chain_of, order = v.cache["fusion"]
    mine = np.flatnonzero(chain_of == int(order[chain_index]))
    mine = mine[np.argsort(occ.order[mine], kind="stable")]
    rows: list[int] = []
    for i, at in enumerate(mine.tolist()):
        lo, size = int(occ.lo[at]), int(occ.size[at])
        execs = [
            r
            for m in range(lo, lo + size)
            for r in u.execs[u.exec_lo[m] : u.exec_lo[m] + u.n_exec[m]].tolist()
        ]
        if i == 0:
            arr = np.asarray(execs, dtype=np.int64)
            c.first_range = (int(v.start[arr].min()), int(v.end[arr].max()))
        if len(rows) >= 50:
            break
        rows.extend(execs)
    c.exec_rows = rows
    c.removed_rows = _removed(u, occ, mine)


def _removed(u: _Units, occ: _Occurrences, mine: np.ndarray) -> np.ndarray:
    """The executions a chain's fused op would not run, over every occurrence: a run keeps its
    longest unit (the fused kernel's one pass), attention loses the units between its two
    matmuls, matmul + bias its add (what ``time_at_stake_us`` counts)."""
    out: list[np.ndarray] = []
    for at in mine.tolist():
        lo, size, pattern = int(occ.lo[at]), int(occ.size[at]), PATTERNS[int(occ.pattern[at])]
        members = np.arange(lo, lo + size)
        if pattern == "run":
            members = np.delete(members, int(np.argmax(u.device_ns[lo : lo + size])))
        else:
            members = members[1:-1] if pattern == "attention" else members[1:]
        for m in members.tolist():
            out.append(u.execs[u.exec_lo[m] : u.exec_lo[m] + u.n_exec[m]])
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)


def builtin_for(names: Sequence[str]) -> str | None:
    """The built-in that computes a chain of elementwise/reduction ops in one kernel."""
    b = {base_name(n) for n in names}
    if "rsqrt" in b and "mean" in b and not b & {"sub", "var", "var_mean"}:
        return "torch.nn.functional.rms_norm (torch.rms_norm, nn.RMSNorm)"
    if b & {"rsqrt", "sqrt"} and (b & {"var", "var_mean"} or {"sub", "mean"} <= b):
        return "torch.nn.functional.layer_norm (nn.LayerNorm)"
    if b & {"tanh", "erf"} and "mul" in b:
        approx = ', approximate="tanh"' if "tanh" in b else ""
        return f"torch.nn.functional.gelu(x{approx})"
    if {"exp", "sum", "div"} <= b and b & {"amax", "max", "sub"}:
        return "torch.softmax"
    if {"sigmoid", "mul"} <= b and len(b) <= 3:
        return "torch.nn.functional.silu"
    return None


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    chains = _chains(v)
    floor = max(MIN_AT_STAKE_US, MIN_WALL_SHARE * ctx.wall_us)
    out: list[Finding] = []
    ranked = sorted(range(len(chains)), key=lambda i: -chains[i].at_stake_ns)
    for i in ranked:
        c = chains[i]
        at_stake = c.at_stake_ns / 1e3
        if at_stake < floor or len(out) >= MAX_FINDINGS:
            continue
        _fill(v, i, c)
        out.append(_finding(ctx, v, c, at_stake))
    return out


def _finding(ctx: Context, v: EventView, c: Chain, at_stake: float) -> Finding:
    arrow = " → ".join(c.names)
    where = f"in {c.scope}"
    occ = f"{c.occurrences} occurrence{'s' if c.occurrences != 1 else ''}"
    details: dict[str, Any] = {
        "pattern": c.pattern,
        "ops": list(c.names),
        "scope": c.scope,
        "occurrences": c.occurrences,
        "device_us": c.device_ns / 1e3,
        "launches_saved": c.launches_saved,
        "intermediate_bytes": c.intermediate_bytes,
    }
    if c.pattern == "attention":
        title = f"Unfused attention {where}: {arrow} ({occ})"
        fix = (
            "Replace the matmul/softmax/matmul chain with "
            "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=..., "
            "dropout_p=..., is_causal=...): one flash/memory-efficient kernel that never "
            "writes the score matrix."
        )
        builtin: str | None = "torch.nn.functional.scaled_dot_product_attention"
    elif c.pattern == "bias":
        title = f"Matmul then bias add {where}: {arrow} ({occ})"
        fix = (
            "Add the bias inside the matmul: torch.addmm(bias, x, w) or "
            "torch.nn.functional.linear(x, weight, bias) (the GEMM epilogue adds it for free)."
        )
        builtin = "torch.addmm / torch.nn.functional.linear(bias=...)"
    else:
        builtin = builtin_for(c.names)
        title = f"{len(c.names)} unfused elementwise ops {where}: {arrow} ({occ})"
        if builtin:
            fix = (
                f"Replace the chain {arrow} with {builtin}: one kernel instead of "
                f"{len(c.names)}, no intermediates in memory. Or torch.compile the function "
                "or module that contains it."
            )
        else:
            fix = (
                f"torch.compile the function or module that runs {arrow} ({c.scope}); "
                "Inductor fuses such elementwise/reduction chains into one kernel."
            )
    details["builtin"] = builtin
    inter = c.intermediate_bytes
    if inter:
        fix += f" Saves about {inter / 1e6:.2f} MB of intermediate traffic in the window."
    note = f"executions of {c.occurrences} occurrence(s)"
    return make_finding(
        ctx.wall_us,
        title=title,
        time_at_stake_us=at_stake,
        evidence=[ids_evidence(v, c.exec_rows, note=note)],
        recommendation=fix + f" At most {fmt_us(at_stake)} to gain.",
        confidence="medium" if c.pattern == "run" else "high",
        details=details,
        fix=Fix((FixPart(0.0, rows=c.removed_rows),)) if c.removed_rows is not None else None,
    )


RULE = Rule(
    name="fusion",
    description="Chains of small elementwise/reduction executions a fused built-in would replace",
    find=run,
)
