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
fused kernel); for matmul + bias, the ``add``.  ``details`` give launches saved (executions
minus one per occurrence) and, when ``Input Dims``/``Input type`` were recorded, the bytes of
the intermediates the chain writes to memory and reads back.

Threshold: a chain is reported when its time at stake is at least :data:`MIN_WALL_SHARE`
(1 %) of the window's wall time and at least :data:`MIN_AT_STAKE_US`; at most
:data:`MAX_FINDINGS` chains, largest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opscope.analysis.findings._view import (
    DTYPE_BYTES,
    EventView,
    fmt_us,
    ids_evidence,
    numel,
    severity,
    share,
    tensor_inputs,
    view,
)
from opscope.analysis.findings.base import Context, Finding, Rule

MIN_RUN = 3
MIN_WALL_SHARE = 0.01
MIN_AT_STAKE_US = 5.0
MAX_FINDINGS = 5
MAX_CHAIN = 12  # longer runs are cut into chains of this length (keeps signatures readable)

ELEMENTWISE = frozenset(
    (
        *("add", "sub", "rsub", "mul", "div", "neg", "exp", "exp2", "expm1", "log", "log1p"),
        *("log2", "sqrt", "rsqrt", "pow", "reciprocal", "abs", "sign", "tanh", "sigmoid"),
        *("relu", "silu", "gelu", "erf", "clamp", "clamp_min", "clamp_max", "minimum"),
        *("maximum", "where", "masked_fill", "fill", "zero", "lerp", "addcmul", "addcdiv"),
        *("square", "sin", "cos", "hardtanh", "leaky_relu", "threshold", "dropout"),
        *("native_dropout", "to", "_to_copy", "type_as", "copy", "contiguous", "clone"),
    )
)
REDUCTIONS = frozenset(("mean", "sum", "var", "std", "var_mean", "amax", "amin", "max", "min"))
FUSABLE = ELEMENTWISE | REDUCTIONS
MATMULS = frozenset(["bmm", "matmul", "mm", "baddbmm"])
SOFTMAX = frozenset(["softmax", "_softmax"])


def base_name(name: str) -> str:
    """``aten::add_`` -> ``add``; ``aten::mean.dim`` -> ``mean``; non-aten names unchanged."""
    if not name.startswith("aten::"):
        return name
    b = name[6:].split(".", 1)[0]
    return b[:-1] if b.endswith("_") and len(b) > 1 else b


@dataclass
class Unit:
    row: int
    name: str
    base: str
    device_ns: int
    execs: list[int]
    kernels_only: bool
    data_key: tuple[int, ...] | None = None
    out_bytes: int | None = None


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


def _shape_info(v: EventView, row: int, base: str) -> tuple[tuple[int, ...] | None, int | None]:
    """(data key, output bytes) of a unit from its recorded input shapes."""
    inputs = tensor_inputs(v.args(row))
    if not inputs:
        return None, None
    shape, dtype = max(inputs, key=lambda it: (numel(it[0]), len(it[0])))
    key = tuple(shape[:-1]) if len(shape) >= 2 else None
    elems = numel(shape)
    if base in REDUCTIONS and shape:
        elems //= max(shape[-1], 1)  # a norm-style reduction over the last dimension
    return key, elems * DTYPE_BYTES.get(dtype, 4)


def _units(v: EventView) -> list[list[Unit]]:
    """Units with device work, grouped into sequences (per rank/thread/scope, call order)."""
    e = np.flatnonzero(v.is_exec & (v.op >= 0))
    if len(e) == 0:
        return []
    unit = v.unit_of(v.op[e])
    order = np.lexsort((v.start[e], unit))
    e, unit = e[order], unit[order]
    uniq, first = np.unique(unit, return_index=True)
    bounds = [*first.tolist(), len(unit)]
    dev = v.exec_dur[e]
    is_kernel = np.isin(v.kind[e], ("kernel", "exec", "op"))
    units: list[Unit] = []
    for i, u in enumerate(uniq.tolist()):
        a, b = bounds[i], bounds[i + 1]
        name = str(v.name[u])
        units.append(
            Unit(
                row=int(u),
                name=name,
                base=base_name(name),
                device_ns=int(dev[a:b].sum()),
                execs=e[a:b].tolist(),
                kernels_only=bool(is_kernel[a:b].all()),
            )
        )
    keyed = sorted(
        units,
        key=lambda u: (
            int(v.rank[u.row]),
            str(v.pid[u.row]),
            str(v.tid[u.row]),
            _scope_key(v, u.row),
            int(v.start[u.row]),
        ),
    )
    seqs: list[list[Unit]] = []
    prev: tuple[int, str, str, int] | None = None
    for u in keyed:
        k = (int(v.rank[u.row]), str(v.pid[u.row]), str(v.tid[u.row]), _scope_key(v, u.row))
        if k != prev:
            seqs.append([])
            prev = k
        seqs[-1].append(u)
    return seqs


def _scope_key(v: EventView, row: int) -> int:
    """The scope of a unit: its parent op (a step, a module range, a compiled region)."""
    return int(v.parent[row])


def _scope_name(v: EventView, u: Unit) -> str:
    p = int(v.parent[u.row])
    if p < 0:
        return "top level"
    if v.is_steplike[p]:
        return "the profiler step"
    return str(v.name[p])


def _fusable(u: Unit) -> bool:
    # Any duration: small executions cost launches, large ones are memory-bound passes that
    # write intermediates out and read them back - a fused kernel saves both.
    return u.base in FUSABLE and u.kernels_only and bool(u.execs)


def _add(
    chains: dict[tuple[str, str, tuple[str, ...]], Chain],
    *,
    pattern: str,
    scope: str,
    members: Sequence[Unit],
    at_stake_ns: int,
    inter: int | None,
    v: EventView,
) -> None:
    names = tuple(u.name for u in members)
    c = chains.setdefault((pattern, scope, names), Chain(pattern, scope, names))
    c.occurrences += 1
    c.device_ns += sum(u.device_ns for u in members)
    c.at_stake_ns += at_stake_ns
    c.launches_saved += max(sum(len(u.execs) for u in members) - 1, 0)
    if inter is not None:
        c.intermediate_bytes = (c.intermediate_bytes or 0) + inter
    if len(c.exec_rows) < 50:
        c.exec_rows.extend(r for u in members for r in u.execs)
    if c.first_range is None:
        rows = [r for u in members for r in u.execs]
        c.first_range = (int(v.start[rows].min()), int(v.end[rows].max()))


def _periods(run: list[Unit]) -> list[list[Unit]]:
    """A run that repeats one chain back to back (the same function called in a loop) split
    into its repetitions; any other run unchanged."""
    names = [u.name for u in run]
    for p in range(MIN_RUN, len(run) // 2 + 1):
        if names[p:] == names[:-p]:
            return [run[k : k + p] for k in range(0, len(run), p)]
    return [run]


def _scan(
    v: EventView,
    seq: list[Unit],
    chains: dict[tuple[str, str, tuple[str, ...]], Chain],
) -> None:
    scope = _scope_name(v, seq[0])
    for u in seq:
        if u.base in FUSABLE:
            u.data_key, u.out_bytes = _shape_info(v, u.row, u.base)
    # elementwise runs
    i = 0
    while i < len(seq):
        if not _fusable(seq[i]):
            i += 1
            continue
        j = i + 1
        while (
            j < len(seq)
            and j - i < MAX_CHAIN
            and _fusable(seq[j])
            and (
                seq[j].data_key is None
                or seq[j - 1].data_key is None
                or seq[j].data_key == seq[j - 1].data_key
            )
        ):
            j += 1
        for run in _periods(seq[i:j]):
            if len(run) < MIN_RUN:
                continue
            times = [u.device_ns for u in run]
            inter = None
            if all(u.out_bytes is not None for u in run[:-1]):
                # each intermediate is written once and read back once
                inter = 2 * sum(u.out_bytes or 0 for u in run[:-1])
            _add(
                chains,
                pattern="run",
                scope=scope,
                members=run,
                at_stake_ns=sum(times) - max(times),
                inter=inter,
                v=v,
            )
        i = j
    # unfused attention and matmul + bias
    for k, u in enumerate(seq):
        if u.base in SOFTMAX:
            lo = next((a for a in range(k - 1, max(k - 4, -1), -1) if seq[a].base in MATMULS), None)
            hi = next(
                (b for b in range(k + 1, min(k + 3, len(seq))) if seq[b].base in MATMULS), None
            )
            if lo is not None and hi is not None:
                mid = seq[lo + 1 : hi]
                _add(
                    chains,
                    pattern="attention",
                    scope=scope,
                    members=seq[lo : hi + 1],
                    at_stake_ns=sum(m.device_ns for m in mid),
                    inter=None,
                    v=v,
                )
        elif u.base in ("mm", "matmul") and k + 1 < len(seq) and seq[k + 1].base == "add":
            nxt = seq[k + 1]
            if any(len(s) == 1 for s, _ in tensor_inputs(v.args(nxt.row))):
                _add(
                    chains,
                    pattern="bias",
                    scope=scope,
                    members=[u, nxt],
                    at_stake_ns=nxt.device_ns,
                    inter=None,
                    v=v,
                )


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
    chains: dict[tuple[str, str, tuple[str, ...]], Chain] = {}
    for seq in _units(v):
        _scan(v, seq, chains)
    floor = max(MIN_AT_STAKE_US, MIN_WALL_SHARE * ctx.wall_us)
    out: list[Finding] = []
    for c in sorted(chains.values(), key=lambda c: -c.at_stake_ns):
        at_stake = c.at_stake_ns / 1e3
        if at_stake < floor or len(out) >= MAX_FINDINGS:
            continue
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
    ev = [ids_evidence(v, c.exec_rows, note=note)]
    sh = share(ctx, at_stake)
    return Finding(
        kind="fusion",
        severity=severity(sh),
        title=title,
        time_at_stake_us=at_stake,
        share=sh,
        evidence=ev,
        recommendation=fix + f" At most {fmt_us(at_stake)} to gain.",
        confidence="medium" if c.pattern == "run" else "high",
        details=details,
    )


RULE = Rule(
    name="fusion",
    description="Chains of small elementwise/reduction executions a fused built-in would replace",
    run=run,
)
