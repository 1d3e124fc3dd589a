"""hotspots: the ops that hold most of the device time, and what kind of hotspot each is.

Contract: one finding per op (by name, from the op table's ``device_self_us``: the device time
of the work the op launched directly; on a CPU-only trace the execution of its computing
leaves) among the top :data:`MAX_FINDINGS` ops.

Threshold: an op is a hotspot when its device self time is at least :data:`MIN_DEVICE_SHARE`
(10 %) of all device time in the window *and* at least :data:`MIN_WALL_SHARE` (1 %) of the
window's wall time, and the window holds at least :data:`MIN_DEVICE_US` of device time (a
trace with a handful of microseconds of work says nothing about hotspots).

Character (``details.character``), from the op's executions in the window:

* ``one expensive kernel`` - at most :data:`FEW_CALLS` executions, or the longest execution
  carries at least half the op's device time: look at that execution's shapes, dtype and
  algorithm (roofline), not at launch overhead.
* ``many small executions`` - at least :data:`MANY_CALLS` executions with a mean below
  :data:`SMALL_MEAN_US`: launch and dispatch overhead and memory traffic dominate; fuse,
  batch or capture them (``torch.compile``, CUDA graphs).
* ``repeated executions`` - anything in between.

Counts: ``details.calls`` is the op table's ``calls`` of the op; ``details.executions`` the
device executions of the work it launched directly (the table's ``device_calls``: one call of a
convolution may run several kernels, a copy may run none on the device), over which
``mean_us`` is taken.  The text gives the calls and, where they differ, the executions, each
named (``265 calls, 1465 device executions × 144 µs``), so that a number in a finding is the
op table's or says what it counts.

``time_at_stake_us`` is the op's device self time: removing the op entirely is the most any fix
can save.  ``step_savings_us`` is that removal's what-if on the critical path
(``details.what_if``: ``NAME=0``, or ``NAME@self=0`` where ops under it launch work of their
own or, on a CPU-only trace, run), the figure ``opscope report --what-if`` gives for it.
Severity is ``info`` below 30 % of the device time, ``medium`` above: a hotspot is a pointer
to where to look, not a defect in itself.
"""

from __future__ import annotations

import re

import numpy as np

from opscope.analysis.critical.fixes import OWN_SUFFIX, Fix, FixPart
from opscope.analysis.findings._view import fmt_us, ids_evidence, pct, view
from opscope.analysis.findings.base import Context, Finding, Rule, make_finding, share_of_wall
from opscope.analysis.findings.fusion import base_name
from opscope.analysis.opsets import MATMULS

# devices whose matmuls have bf16/tf32 paths worth suggesting
_LOW_PRECISION_MATMULS = frozenset({"cuda", "rocm", "xpu", "mtia", "neuron"})
# op names that wait rather than compute (an event wait, a synchronize)
_WAIT = re.compile(r"wait|synchroni[sz]e|Sync\b|::sync", re.IGNORECASE)

MIN_DEVICE_SHARE = 0.10
MIN_WALL_SHARE = 0.01
MIN_DEVICE_US = 50.0
MAX_FINDINGS = 5
FEW_CALLS = 3
MANY_CALLS = 20
SMALL_MEAN_US = 20.0
EVIDENCE_EXECUTIONS = 20


def run(ctx: Context) -> list[Finding]:
    table = ctx.op_table
    total = table.device_time_us
    if total < MIN_DEVICE_US:
        return []
    v = view(ctx)
    exec_rows = np.flatnonzero(v.is_exec)
    exec_op = v.op[exec_rows]
    names = v.index.name
    # the name code of each execution's op: len(values) for none, -1 for a null name (the
    # last slot); both read as ""
    exec_code = np.where(exec_op >= 0, names.codes[np.maximum(exec_op, 0)], len(names.values))
    out: list[Finding] = []
    for row in table.sorted("device_self_us")[:MAX_FINDINGS]:
        dev_share = row.device_self_us / total
        if dev_share < MIN_DEVICE_SHARE or share_of_wall(ctx, row.device_self_us) < MIN_WALL_SHARE:
            continue
        is_row = np.append(names.values == row.name, [row.name == ""] * 2)
        mine = exec_rows[is_row[exec_code]]
        durs = v.exec_dur[mine] / 1e3
        executions = len(mine) or row.device_calls
        longest = float(durs.max()) if len(durs) else 0.0
        mean = row.device_self_us / executions if executions else 0.0
        counted, runs = _counts(row.name, row.calls, executions, ctx.op_table.device_is_host)
        kind = ctx.trace.device.kind
        if executions <= FEW_CALLS or longest >= 0.5 * row.device_self_us:
            character = "one expensive kernel"
            lower = (
                "bf16/tf32 for this matmul, "
                if base_name(row.name) in MATMULS and kind in _LOW_PRECISION_MATMULS
                else ""
            )
            advice = (
                f"Look at the longest execution of {row.name} ({fmt_us(longest)}): its shapes, "
                "dtype and algorithm decide the time (check it against the device's peak on "
                f"the roofline; {lower}a better layout, or a fused built-in)."
            )
        elif executions >= MANY_CALLS and mean < SMALL_MEAN_US:
            character = "many small executions"
            graphs = (
                ', or capture the step with CUDA graphs (torch.compile(mode="reduce-overhead"))'
                if kind in ("cuda", "rocm")
                else ""
            )
            advice = (
                f"{runs} at {fmt_us(mean)} each: per-launch overhead "
                "and memory round trips dominate. Batch the calls (one call over stacked "
                "inputs) or fuse them with their neighbours (torch.compile of the enclosing "
                f"module){graphs}."
            )
        else:
            character = "repeated executions"
            advice = (
                f"{runs} at {fmt_us(mean)} each; speed up the op itself "
                "(dtype, shapes, a fused built-in) or call it less often."
            )
        if _WAIT.search(row.name):  # its time is what it waits for, not work of its own
            advice = (
                f"{row.name} is a wait, not work: its {fmt_us(row.device_self_us)} is the time "
                "until what it waits for is done. Follow it to that work (opscope explore: "
                "its dependency chain; report --critical-path) and speed that up or overlap "
                "it; the wait itself has nothing to optimise."
            )
        top = mine[np.argsort(-v.exec_dur[mine], kind="stable")[:EVIDENCE_EXECUTIONS]]
        at_stake = row.device_self_us
        # the fix: the op's own device work gone (what --what-if NAME=0 asks, or NAME@self=0
        # where ops under it launch work of their own)
        own = row.device_total_us > row.device_self_us * (1 + 1e-9) + 1e-9
        if ctx.op_table.device_is_host:  # the op's own host time: its children are theirs
            own = own or row.cpu_total_us > row.cpu_self_us * (1 + 1e-9) + 1e-9
        fix = Fix(
            (FixPart(0.0, name=row.name, own=own),),
            what_if=f"{row.name}{OWN_SUFFIX if own else ''}=0",
        )
        out.append(
            make_finding(
                ctx.wall_us,
                severity="medium" if dev_share >= 0.30 else "info",
                title=(
                    f"{row.name} holds {pct(dev_share)} of device time "
                    f"({character}: {counted} × {fmt_us(mean)})"
                ),
                time_at_stake_us=at_stake,
                evidence=[ids_evidence(v, top, note=f"longest executions of {row.name}")],
                recommendation=advice,
                confidence="high",
                details={
                    "op": row.name,
                    "character": character,
                    "calls": row.calls,
                    "executions": executions,
                    "device_self_us": row.device_self_us,
                    "device_share": dev_share,
                    "mean_us": mean,
                    "max_us": longest,
                    "cpu_total_us": row.cpu_total_us,
                },
                fix=fix,
            )
        )
    return out


def _counts(name: str, calls: int, executions: int, on_host: bool) -> tuple[str, str]:
    """The op's counts as the title (``265 calls, 1465 device executions``) and the advice
    (``aten::x's 265 calls run 1465 device executions``) say them: the calls alone where the
    executions are as many."""
    unit = "executions" if on_host else "device executions"
    if executions == calls:
        return f"{calls} call{'s' if calls != 1 else ''}", f"{name} runs {calls} times"
    title = f"{calls} call{'s' if calls != 1 else ''}, {executions} {unit}"
    verb = "calls run" if calls != 1 else "call runs"
    return title, f"{name}'s {calls} {verb} {executions} {unit}"


RULE = Rule(
    name="hotspots",
    description="Top ops by device time: one expensive kernel or many small executions",
    find=run,
)
