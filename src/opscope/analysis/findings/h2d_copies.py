"""h2d_copies: host-to-device copies that recur in the steady state, and the op behind each.

Contract: a host-to-device copy is, in the window,

* a device memcpy whose name says host to device (``Memcpy HtoD (Pageable -> Device)``,
  ``Memcpy HtoD (Pinned -> Device)``, ROCm ``CopyHostToDevice``);
* a runtime call that writes host memory to the device without a device event of its own
  (Neuron ``nrt_tensor_write``, MTIA ``memcpyHtoD``).

Copies are grouped by the op the program called to cause them (the unit of
:mod:`opscope.analysis.findings._view`: ``aten::to``, ``aten::copy_``, an ``aten::add``
whose CPU scalar-tensor operand had to be moved, or a compiled region whose lifted CPU scalar
is written to the device before each execution) and the scope around it.  A group's cost
(``time_at_stake_us``) is, per copy, the longer of the device copy and the host call that
issued it (pageable copies block the host for their whole length).  A Neuron
``nrt_tensor_write`` has no launching call; its issuing host call is the framework event it is
linked to (same ``correlation``, e.g. TorchNeuron's ``neuron_copy_h2d``), and its size the
``size`` attribute.

Steady state: a group is reported only when its copies recur - at least :data:`MIN_COPIES`
copies in the window, and, when the window has two or more profiler steps, copies in at least
two of them - so a one-time upload of weights or of the first batch is not a finding.  A
window of exactly one profiler step numbered 1 or more (the profiler's wait/warm-up steps ran
the same code before it) counts a single copy as recurring: the first iteration's one-time
uploads are not in it (confidence ``medium``).

Threshold: the group's cost is at least :data:`MIN_WALL_SHARE` (1 %) of the window's wall time
and at least :data:`MIN_US`; at most :data:`MAX_FINDINGS` groups.  The advice depends on the
size: copies of at most :data:`SMALL_BYTES` are scalars or tiny tensors created on the host
each step (create them on the device once, or use a Python scalar); larger pageable copies want
``pin_memory`` and ``non_blocking``.

Below the threshold (:mod:`._per_step`): a group of implicit scalar copies - every copy of a
known size of at most :data:`SMALL_BYTES`, made inside an op that computes (not an explicit
transfer the program asked for: :data:`TRANSFER_OPS`, ``tensor.to(device)`` of small index or
split tensors is data the device needs), in every profiler step of the window
(:func:`._per_step.every_step`) - is still reported, at the severity its share gives (``info``
under 1 %) and with ``details.below_threshold`` true: it is avoidable per-step work however
little it costs (the eager naive RMSNorm's ``x + EPS`` with a CPU ``EPS`` tensor writes 4 B to
the device in every call).  Such findings come after the above-threshold ones and count
towards :data:`MAX_FINDINGS`.
"""

from __future__ import annotations

import numpy as np

from opscope.analysis.critical.fixes import Fix, FixPart
from opscope.analysis.findings._per_step import every_step
from opscope.analysis.findings._view import (
    EventView,
    fmt_us,
    ids_evidence,
    view,
)
from opscope.analysis.findings.base import (
    Context,
    Finding,
    Rule,
    make_finding,
    severity_of,
    share_of_wall,
)

MIN_COPIES = 2
MIN_WALL_SHARE = 0.01
MIN_US = 10.0
SMALL_BYTES = 1024
MAX_FINDINGS = 5
# units that are themselves the transfer the program asked for (not an operand moved inside an op)
TRANSFER_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_", "aten::lift_fresh_copy"})

DEVICE_H2D = r"HtoD|Host ?-?> ?Device|HostToDevice"
RUNTIME_H2D = r"nrt_tensor_write|memcpyHtoD"


def _bytes(v: EventView, row: int) -> int | None:
    a = v.args(row)
    b = a.get("bytes")
    if b is None and v.source[row] == "runtime":
        b = a.get("size")  # Neuron nrt_tensor_write
    return int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) else None


def _issuing_calls(v: EventView, rows: np.ndarray) -> np.ndarray:
    """For runtime writes without a launch: the framework-side host call linked to them
    (same rank and correlation, the longest one) - it is what the host waited in; -1 if none."""
    out = np.full(len(rows), -1, dtype=np.int64)
    corr = v.cache.get("correlation")
    if corr is None:
        return out
    runtime = v.index.is_runtime
    for i, r in enumerate(rows.tolist()):
        c = corr[r]
        if c < 0 or not runtime[r]:
            continue
        same = np.flatnonzero((corr == c) & (v.rank == v.rank[r]) & runtime)
        same = same[(same != r) & (v.cat[same] != "neuron_rt")]
        same = same[(v.start[same] <= v.start[r]) & (v.end[same] >= v.end[r])]
        if len(same):
            out[i] = int(same[np.argmax(v.dur[same])])
    return out


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    if v.device_is_host or v.n == 0:
        return []
    dev = np.flatnonzero(v.is_exec & v.index.kind.eq("memcpy"))
    dev = dev[v.name_matches(DEVICE_H2D, ignore_case=True)[dev]]
    rt = np.flatnonzero(
        v.index.is_runtime & v.in_window & v.name_matches(RUNTIME_H2D, ignore_case=True)
    )
    # a runtime write that launched a device copy is already counted by that copy
    launched = set(v.launch[dev].tolist())
    rt = np.asarray([r for r in rt.tolist() if r not in launched], dtype=np.int64)
    rows = np.concatenate([dev, rt]).astype(np.int64)
    if len(rows) == 0:
        return []
    op = v.op[rows]
    unit = v.unit_of(op)
    groups: dict[tuple[str, str], list[int]] = {}
    for r, u in zip(rows.tolist(), unit.tolist(), strict=True):
        if u >= 0:
            scope_row = v.user_scope(u)
            scope = str(v.name[scope_row]) if scope_row >= 0 else ""
            key = (str(v.name[u]), scope)
        else:
            key = ("(no op recorded)", "")
        groups.setdefault(key, []).append(r)

    if "correlation" not in v.cache:
        v.cache["correlation"] = np.asarray(
            ctx.trace.events.column("correlation").fill_null(-1).to_numpy(zero_copy_only=False),
            dtype=np.int64,
        )
    n_steps = len({int(s) for s in v.step[rows].tolist() if s >= 0})
    window_steps = {int(s) for s in v.step[v.in_window & v.is_steplike].tolist() if s >= 0}
    # one post-warm-up step: what it copies, every iteration copies (see the docstring)
    after_warmup = len(window_steps) == 1 and min(window_steps) >= 1
    floor = max(MIN_US, MIN_WALL_SHARE * ctx.wall_us)
    scored = []
    per_step = []  # scalar copies below the threshold (see the docstring)
    for key, rs in groups.items():
        arr = np.asarray(rs, dtype=np.int64)
        if len(arr) < MIN_COPIES and not (after_warmup and key[0] != "(no op recorded)"):
            continue
        steps = {int(s) for s in v.step[arr].tolist() if s >= 0}
        if n_steps >= 2 and len(steps) < 2:
            continue
        launch = v.launch[arr]
        issuer = _issuing_calls(v, arr)
        caller = np.where(launch >= 0, launch, issuer)
        host = np.where(caller >= 0, v.dur[np.maximum(caller, 0)], 0)
        cost_us = float(np.maximum(v.dur[arr], host).sum()) / 1e3
        if cost_us >= floor:
            scored.append((cost_us, key, arr))
        elif cost_us > 0 and _scalar_copies(v, key, arr):
            per_step.append((cost_us, key, arr))
    scored.sort(key=lambda t: -t[0])
    per_step.sort(key=lambda t: -t[0])
    out = [
        _finding(ctx, v, key, arr, cost, single_step=after_warmup and len(arr) < MIN_COPIES)
        for cost, key, arr in scored[:MAX_FINDINGS]
    ]
    for cost, key, arr in per_step[: MAX_FINDINGS - len(out)]:
        f = _finding(ctx, v, key, arr, cost, single_step=after_warmup and len(arr) < MIN_COPIES)
        out.append(f.updated(details={**f.details, "below_threshold": True}))
    return out


def _scalar_copies(v: EventView, key: tuple[str, str], arr: np.ndarray) -> bool:
    """Avoidable per-step copies: every copy of a known size of at most :data:`SMALL_BYTES`,
    made inside an op that is not itself a transfer, in every step of the window."""
    if key[0] == "(no op recorded)" or key[0] in TRANSFER_OPS:
        return False
    sizes = [_bytes(v, int(r)) for r in arr.tolist()]
    if any(b is None or b > SMALL_BYTES for b in sizes):
        return False
    return every_step(v, arr)


def _finding(
    ctx: Context,
    v: EventView,
    key: tuple[str, str],
    arr: np.ndarray,
    cost_us: float,
    *,
    single_step: bool = False,
) -> Finding:
    op_name, scope = key
    sizes = [b for b in (_bytes(v, int(r)) for r in arr) if b is not None]
    mean_bytes = sum(sizes) / len(sizes) if sizes else None
    pageable = int(sum("Pageable" in str(n) for n in v.name[arr]))
    first_op = int(v.op[arr[0]])
    chain = v.chain(first_op, limit=4) if first_op >= 0 else op_name
    where = f" in {scope}" if scope else ""
    neuron = bool(np.any(v.name[arr] == "nrt_tensor_write"))
    compiled = "Compiled Region" in op_name or "Compiled Region" in scope
    if neuron and not compiled and mean_bytes is not None and mean_bytes <= SMALL_BYTES:
        fix = (
            f"{op_name}{where} writes a tiny host tensor ({mean_bytes:.0f} B on average) to "
            "the NeuronCore before its execution (nrt_tensor_write) - a CPU scalar tensor "
            "operand (a global like EPS = torch.tensor(1e-6)) moved to the device on every "
            "call. Pass a Python float instead (x + 1e-6), or create the tensor on the device "
            "once (torch.tensor(..., device='neuron'), outside the loop)."
        )
    elif neuron and mean_bytes is not None and mean_bytes <= SMALL_BYTES:
        fix = (
            f"{op_name}{where} writes a tiny host tensor ({mean_bytes:.0f} B on average) to "
            "the NeuronCore before its execution (nrt_tensor_write) - typically a CPU scalar "
            "tensor (a global like EPS = torch.tensor(1e-6)) that torch.compile lifted as a "
            "graph input. Make it a Python float (a constant folded into the NEFF), or create "
            "it on the device once (torch.tensor(..., device='neuron'))."
        )
    elif mean_bytes is not None and mean_bytes <= SMALL_BYTES:
        fix = (
            f"{op_name}{where} copies a tiny host tensor ({mean_bytes:.0f} B on average) to "
            "the device every time - typically a CPU scalar tensor (torch.tensor(0.5), a "
            "tensor built from a Python list) combined with a device tensor. Create it on the "
            "device once (torch.tensor(..., device=x.device), outside the loop) or pass a "
            "Python number instead of a tensor."
        )
    elif pageable:
        fix = (
            f"{op_name}{where} copies from pageable host memory, which blocks the host and "
            "runs at reduced bandwidth. Pin the source (DataLoader(pin_memory=True) or "
            "tensor.pin_memory()) and copy with .to(device, non_blocking=True) so the copy "
            "overlaps compute; or keep the data on the device between steps."
        )
    else:
        fix = (
            f"{op_name}{where} copies host data to the device every step. Keep the data on the "
            "device between steps, or prefetch the next batch on a side stream with "
            "non_blocking=True so the copy overlaps compute."
        )
    sh = share_of_wall(ctx, cost_us)
    size = (
        f", {mean_bytes / 1e6:.2f} MB each"
        if mean_bytes and mean_bytes > SMALL_BYTES
        else (f", {mean_bytes:.0f} B each" if mean_bytes is not None else "")
    )
    return make_finding(
        ctx.wall_us,
        severity=severity_of(sh),
        title=f"{len(arr)} host-to-device cop{'ies' if len(arr) != 1 else 'y'} caused by "
        f"{op_name}{where}{size}",
        time_at_stake_us=cost_us,
        share=sh,
        evidence=[ids_evidence(v, arr.tolist(), note=f"host-to-device copies from {chain}")],
        recommendation=fix + f" At most {fmt_us(cost_us)} to gain.",
        fix=_fix(v, arr),
        confidence="low" if first_op < 0 else "medium" if single_step else "high",
        details={
            "op": op_name,
            "issued_by": chain,
            "scope": scope or None,
            "copies": len(arr),
            "pageable": pageable,
            "mean_bytes": mean_bytes,
            "total_bytes": sum(sizes) if sizes else None,
            "device_us": float(v.dur[arr].sum()) / 1e3,
            "single_step_window": single_step,
        },
    )


RULE = Rule(
    name="h2d_copies",
    description="Recurring host-to-device copies in the steady state and the op behind each",
    find=run,
)


def _fix(v: EventView, copies: np.ndarray) -> Fix:
    """The copies gone: their device time, and the host calls that issued them no longer
    blocking (a pageable copy holds its call until it is done)."""
    rows = np.asarray(copies, dtype=np.int64)
    device = rows[v.index.is_device[rows]]
    calls = np.concatenate([rows[~v.index.is_device[rows]], v.launch[device]])
    calls = calls[calls >= 0]
    return Fix((FixPart(0.0, rows=device), FixPart(0.0, rows=calls, unblock=True)))
