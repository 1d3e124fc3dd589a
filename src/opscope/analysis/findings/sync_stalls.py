"""sync_stalls: the host blocks on the device, and the device then idles while the host catches
up.

Contract: a *sync* is, in the window,

* a runtime call that blocks the host until the device (or a stream, or an event) is done:
  ``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, ``cudaEventSynchronize``, their ``hip``
  twins, other runtimes' ``synchronize`` calls, and blocking copies (``cudaMemcpy``,
  ``hipMemcpy``, ``hipMemcpyWithStream``);
* an ``aten::_local_scalar_dense`` (what ``.item()``, ``bool(tensor)``, ``if tensor:`` and
  printing a device tensor run) that has no such runtime call under it (some runtimes do not
  record one).

Syncs inside opscope's own ``opscope::synchronize`` range are left out: that is the intended
end-of-step synchronisation.  ``cudaStreamWaitEvent`` is not a sync: it makes a *stream* wait,
not the host.

Cost of a sync: the device idle time that follows it (``details.device_idle_after_us``) - from
when the device ran dry (or the sync began, if later) until the next execution starts on that
rank's device; each idle gap is charged to the first sync that opens it.  While the host waits
the device drains its queue; after the host resumes it must launch new work, and the device
idles until then.  A sync during which the device stays busy (another stream) costs nothing.
``time_at_stake_us`` is, per sync, the smaller of that idle time and the host's wait in the
sync: without the sync the host would have run ahead by at most what it waited, so that is the
most of the idle time removing it can recover (the rest is the host being slow, which
:mod:`.idle_gaps` and :mod:`.launch_bound` report).  Syncs are grouped by call name and the op
that issued them (``cudaStreamSynchronize`` from ``aten::_local_scalar_dense < aten::item``).

Threshold: a group is reported when the device idle time after its syncs is at least
:data:`MIN_WALL_SHARE` (1 %) of the window's wall time and at least :data:`MIN_IDLE_US`; at most
:data:`MAX_FINDINGS` groups.  On a CPU-only trace there is no device to wait for: no finding.

Below the threshold (:mod:`._per_step`): a group of explicit syncs - ``synchronize`` calls
(``torch.cuda.synchronize()``, ``Event.synchronize()``, ``torch.neuron.synchronize()``) that
no ``aten::`` op issued, as opposed to the scalar reads and blocking copies an op needs for
its result - lying inside the profiler steps, in every step of the window
(:func:`._per_step.every_step`), with time at stake above zero, is still reported, at the
severity its share gives (``info`` under 1 %) and with ``details.below_threshold`` true: a sync
inside the step is avoidable per-step work however little it costs now (the host cannot run
ahead of the device past it).  Such findings come after the above-threshold ones and count
towards :data:`MAX_FINDINGS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
from opscope.analysis.intervals import merge_intervals
from opscope.markers import SYNC_ANNOTATION
from opscope.trace.arrays import unique_ints

MIN_WALL_SHARE = 0.01
MIN_IDLE_US = 20.0
MAX_FINDINGS = 5
OWN_SYNC = SYNC_ANNOTATION

SYNC_CALL = (
    r"synchronize|^cudaMemcpy$|^hipMemcpy$|^hipMemcpyWithStream$|^cuMemcpy(DtoH|HtoD)?(_v2)?$"
)
SCALAR_OPS = ("aten::_local_scalar_dense",)


@dataclass
class _Group:
    rows: list[int] = field(default_factory=list)
    idle_ns: int = 0
    wait_ns: int = 0
    stake_ns: int = 0


def _ancestors(v: EventView, row: int) -> list[int]:
    out = []
    cur = int(v.op[row]) if v.source[row] != "framework" else row
    while cur >= 0:
        out.append(cur)
        cur = int(v.parent[cur])
    return out


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    if v.device_is_host or v.n == 0:
        return []
    rt = np.flatnonzero(v.index.is_runtime & v.in_window)
    sync_rows = rt[v.name_matches(SYNC_CALL, ignore_case=True)[rt]].tolist()
    covered: set[int] = set()
    candidates: list[tuple[int, list[int]]] = []
    for r in sync_rows:
        anc = _ancestors(v, r)
        covered.update(anc)
        candidates.append((r, anc))
    # a scalar read that touched the device (a runtime call under it) but recorded no sync;
    # without any runtime call under it, it read a CPU tensor: no sync at all
    touched = set(v.op[rt].tolist())
    scalar = np.flatnonzero(v.index.name.isin(SCALAR_OPS) & v.in_window)
    for r in scalar.tolist():
        if r not in covered and r in touched:
            candidates.append((r, _ancestors(v, r)))
    if not candidates:
        return []

    # device busy intervals per rank (all executions of the window)
    ex = np.flatnonzero(v.is_exec)
    busy: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for rank in unique_ints(v.rank[ex]).tolist():
        r = ex[v.rank[ex] == rank]
        busy[rank] = merge_intervals(v.start[r], v.end[r])

    groups: dict[tuple[str, str], _Group] = {}
    claimed: set[tuple[int, int]] = set()  # (rank, gap): each idle gap is counted once
    candidates.sort(key=lambda c: (int(v.end[c[0]]), c[0]))
    for r, anc in candidates:
        if any(v.name[a] == OWN_SYNC for a in anc):
            continue
        intervals = busy.get(int(v.rank[r]))
        if intervals is None or len(intervals[0]) == 0:
            continue
        bs, be = intervals
        t_end = int(v.end[r])
        i = int(np.searchsorted(bs, t_end, side="right")) - 1
        if i >= 0 and be[i] > t_end:
            idle = 0  # the device is still busy when the host resumes
        elif i + 1 < len(bs) and (int(v.rank[r]), i) not in claimed:
            claimed.add((int(v.rank[r]), i))
            dry = int(be[i]) if i >= 0 else int(v.start[r])
            idle = int(bs[i + 1]) - max(dry, int(v.start[r]))
        else:
            idle = 0  # nothing ran after it in the window
        op_chain = v.chain(anc[0], limit=3) if anc and anc[0] != r else ""
        if v.source[r] == "framework":
            op_chain = v.chain(r, limit=3)
        key = (str(v.name[r]), op_chain)
        g = groups.setdefault(key, _Group())
        g.rows.append(r)
        g.idle_ns += max(idle, 0)
        g.wait_ns += int(v.dur[r])
        # removing the sync lets the host run ahead by at most what it waited for
        g.stake_ns += min(max(idle, 0), int(v.dur[r]))

    floor = max(MIN_IDLE_US, MIN_WALL_SHARE * ctx.wall_us)
    out: list[Finding] = []
    per_step: list[tuple[str, str, _Group]] = []  # in-step syncs below the threshold
    for (name, chain), g in sorted(groups.items(), key=lambda kv: -kv[1].idle_ns):
        if g.idle_ns / 1e3 >= floor:
            if len(out) < MAX_FINDINGS:
                out.append(_finding(ctx, v, name, chain, g))
        elif g.stake_ns > 0 and _explicit(v, g) and every_step(v, np.asarray(g.rows, np.int64)):
            per_step.append((name, chain, g))
    per_step.sort(key=lambda t: -t[2].stake_ns)
    for name, chain, g in per_step[: MAX_FINDINGS - len(out)]:
        f = _finding(ctx, v, name, chain, g)
        out.append(f.updated(details={**f.details, "below_threshold": True}))
    return out


def _explicit(v: EventView, g: _Group) -> bool:
    """Whether the group's syncs are ``synchronize`` runtime calls that no ``aten::`` op issued
    (the program asked for the sync itself)."""
    for r in g.rows:
        if v.source[r] != "runtime" or "synchronize" not in str(v.name[r]).lower():
            return False
        if any(v.is_aten[a] for a in _ancestors(v, r)):
            return False
    return True


def _finding(ctx: Context, v: EventView, name: str, chain: str, g: _Group) -> Finding:
    idle_us, wait_us, stake_us, n = g.idle_ns / 1e3, g.wait_ns / 1e3, g.stake_ns / 1e3, len(g.rows)
    issued = f" from {chain}" if chain else ""
    scalar = "_local_scalar_dense" in chain or "item" in chain or name in SCALAR_OPS
    blocking_copy = "memcpy" in name.lower() and "synchronize" not in name.lower()
    if scalar:
        fix = (
            "A device scalar is read on the host (.item(), bool(t), if t:, print, a Python "
            "float() of a tensor). Keep the value on the device (torch.where, masks, "
            "accumulate losses as tensors and read them every N steps), or read it once at "
            "the end of the step."
        )
    elif blocking_copy:
        fix = (
            "A blocking copy: use a pinned host buffer and .to(device, non_blocking=True) / "
            "copy_(src, non_blocking=True), and read results only when needed."
        )
    else:
        kind = ctx.trace.device.kind
        backend = {"rocm": "cuda"}.get(kind, kind)  # ROCm runs under torch.cuda
        event = (
            f"an event that a later step waits on (torch.{backend}.Event.record / wait_event)"
            if backend in ("cuda", "xpu", "mtia")
            else "an event a later step waits on"
        )
        fix = (
            f"Remove the explicit {name}{issued} from the step (it is needed only for timing "
            f"and at the very end), or replace it by {event}."
        )
    sh = share_of_wall(ctx, stake_us)
    return make_finding(
        ctx.wall_us,
        severity=severity_of(sh),
        title=(
            f"{n} × {name}{issued}: host blocked {fmt_us(wait_us)}, device idle "
            f"{fmt_us(idle_us)} after them"
        ),
        time_at_stake_us=stake_us,
        share=sh,
        evidence=[ids_evidence(v, g.rows, note=f"{name} calls")],
        recommendation=fix,
        confidence="high" if idle_us > 0 else "medium",
        # the fix: the calls no longer block (their waits cut, their own time gone)
        fix=Fix((FixPart(0.0, rows=np.asarray(g.rows, dtype=np.int64), unblock=True),)),
        details={
            "call": name,
            "issued_by": chain or None,
            "count": n,
            "host_wait_us": wait_us,
            "device_idle_after_us": idle_us,
            "time_at_stake_rule": "per sync: min(device idle after it, host wait in it)",
        },
    )


RULE = Rule(
    name="sync_stalls",
    description="Host-device synchronisations inside steps and the device idle time after them",
    find=run,
)
