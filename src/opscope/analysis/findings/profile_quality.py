"""profile_quality: problems of the profile itself that make the other numbers wrong or partial.

Contract: each check below yields at most one finding.  Their ``time_at_stake_us`` is 0 (they
cost nothing in the program; they limit what the analysis can say) except profiling overhead,
whose time is in the window.  Severity says how far the rest of the report can be trusted.

* **no device events** (high) - the trace holds runtime kernel launches, or ``run.json`` names
  an accelerator, but not one device execution: the device activity was not recorded (CUDA /
  XPU / PrivateUse1 activity missing from ``activities``) or the profiler stopped before the
  device finished (no synchronize before the profiler's step/exit).
* **empty window** (high) - the selected steps hold no events, or the window has no duration.
* **truncated or repaired trace** (medium) - the reader reported warnings
  (``ctx.trace.meta.warnings``: a cut file, a recovered tail).
* **skipped malformed events** (low) - ``ctx.trace.meta.skipped`` counts events the reader
  could not use, other than instant events (``ph`` i/I), which carry no duration by design.
* **profiling overhead** - profiler bookkeeping events (``Activity Buffer Request``, category
  ``overhead``, ``CUPTI``/``Profiler overhead``) summing to at least :data:`MIN_OVERHEAD_SHARE`
  (1 %) of the window's wall time.
* **last step incomplete** (medium) - with at least :data:`MIN_STEPS` steps, the last one has
  fewer than :data:`LAST_STEP_RATIO` (half) of the median device executions of the others
  (the profiler stopped before the device finished it: no synchronize at the step's end).
* **no PyTorch events** (high) - events were read, but none of a category the analysis knows
  (framework ops, runtime calls, device executions): not a PyTorch/Kineto profile.
* **Neuron profile problems** (``ctx.trace.meta.extra["neuron"]``, written by
  :mod:`opscope.trace.neuron`): raw capture files that do not pair (a NEFF without its NTFF or
  the reverse - Neuron's ``ERROR_PROCESS_INCOMPLETE`` - an empty NTFF, NTFFs without NEFFs:
  medium), a capture not processed by ``neuron-explorer view`` (high when no device execution
  was read, else medium; the finding carries the command), and Neuron Explorer's own
  ``Warning`` table (data-quality hints, low), one finding per check.  Reader warnings starting
  with ``neuron:`` (schema columns ignored, schema version) are one low finding, not a
  truncation.
"""

from __future__ import annotations

import re

import numpy as np

from opscope.analysis.findings._view import (
    EventView,
    fmt_us,
    ids_evidence,
    pct,
    view,
)
from opscope.analysis.findings.base import (
    Context,
    Evidence,
    Finding,
    Rule,
    clip_words,
    make_finding,
    severity_of,
    share_of_wall,
)
from opscope.trace.arrays import unique_ints

# Reader warnings about a Neuron profile's format (opscope.trace.neuron.WARNING_PREFIX): not a
# cut file.  Written here rather than imported so the rule does not load the Neuron reader.
NEURON_WARNING_PREFIX = "neuron: "

MIN_OVERHEAD_SHARE = 0.01
MIN_STEPS = 3
LAST_STEP_RATIO = 0.5
BENIGN_SKIPS = re.compile(r"untimed event \(ph [iI]\)")
OVERHEAD_RE = r"Activity Buffer Request|CUPTI.*overhead|Profiler overhead"
LAUNCH_RE = r"LaunchKernel|LaunchCooperativeKernel|GraphLaunch|ModuleLaunch"


def _finding(
    ctx: Context,
    kind_title: str,
    severity_: str,
    fix: str,
    details: dict[str, object],
    *,
    at_stake: float = 0.0,
    sh: float = 0.0,
    evidence: list[Evidence] | None = None,
) -> Finding:
    return make_finding(
        ctx.wall_us,
        severity=severity_,
        share=sh,
        title=kind_title,
        time_at_stake_us=at_stake,
        evidence=evidence or [],
        recommendation=fix,
        confidence="high",
        details=details,
    )


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    meta = ctx.trace.meta
    out: list[Finding] = []
    ix = v.index
    n_device = int(np.count_nonzero(ix.is_device))
    info_device = (ctx.run_info or {}).get("device") or {}
    run_kind = info_device.get("kind") if isinstance(info_device, dict) else None
    rt = np.flatnonzero(ix.is_runtime)
    launches = rt[v.name_matches(LAUNCH_RE, ignore_case=True)[rt]]
    if n_device == 0 and (len(launches) or (run_kind not in (None, "cpu"))):
        out.append(
            _finding(
                ctx,
                "No device executions in the trace although "
                + (
                    f"{len(launches)} kernel launches were recorded"
                    if len(launches)
                    else f"the run used a {run_kind} device"
                ),
                "high",
                "Record the device activity (torch.profiler activities must include the "
                "device's: CUDA for CUDA/ROCm, XPU, PrivateUse1 for Neuron and other plug-in "
                "devices - opscope.profile picks it), and synchronize the device before the "
                "profiler stops (torch.cuda.synchronize() / opscope's p.step()). Device "
                "columns of this report are empty.",
                {"launches": len(launches), "run_device": run_kind},
                evidence=[ids_evidence(v, launches[:50].tolist(), note="launches")],
            )
        )
    known = v.n - int(np.count_nonzero(ix.source.eq("other")))
    if v.n and known == 0:
        out.append(
            _finding(
                ctx,
                f"No PyTorch profiler events recognised ({v.n} events of other categories)",
                "high",
                "This trace holds no framework ops, runtime calls or device executions in the "
                "categories torch.profiler writes (cpu_op, cuda_runtime, kernel, ...): it is "
                "not a Kineto trace of a PyTorch program, or its categories are renamed. Record "
                "it with torch.profiler / opscope.profile.",
                {"events": v.n, "categories": _categories(v)[:20]},
            )
        )
    elif v.n and (not v.in_window.any() or ctx.wall_us <= 0):
        out.append(
            _finding(
                ctx,
                "The analysed window is empty"
                + (
                    f" (steps {ctx.window_steps[0]}..{ctx.window_steps[1]})"
                    if ctx.window_steps
                    else ""
                ),
                "high",
                "Select steps that exist in the trace (see the report's steps), or profile "
                "enough steps for the schedule's active window (wait + warmup + active).",
                {"window_steps": list(ctx.window_steps) if ctx.window_steps else None},
            )
        )
    cut = [w for w in meta.warnings if not w.startswith(NEURON_WARNING_PREFIX)]
    if cut:
        out.append(
            _finding(
                ctx,
                f"Trace truncated or repaired: {clip_words(cut[0], 160)}",
                "medium",
                "The trace file is incomplete (the writer was interrupted or the file was cut); "
                "the tail of the timeline is missing. Re-export it, and let the program finish "
                "(or the profiler exit) before copying the file.",
                {"warnings": cut[:10]},
            )
        )
    out.extend(_neuron(ctx, n_device))
    bad = {k: n for k, n in meta.skipped.items() if not BENIGN_SKIPS.search(k) and n > 0}
    if bad:
        total = sum(bad.values())
        out.append(
            _finding(
                ctx,
                f"{total} malformed event{'s' if total != 1 else ''} skipped while reading",
                "low",
                "Some events had no usable time or structure and were left out (see details). "
                "Numbers involving them may be slightly low; a writer bug or a cut file is the "
                "usual cause.",
                {"skipped": bad},
            )
        )
    is_overhead = v.name_matches(OVERHEAD_RE, ignore_case=True) | ix.cat.eq("overhead")
    ov = np.flatnonzero(v.in_window & is_overhead)
    ov_us = float(v.dur[ov].sum()) / 1e3
    if len(ov) and share_of_wall(ctx, ov_us) >= MIN_OVERHEAD_SHARE:
        sh = share_of_wall(ctx, ov_us)
        out.append(
            _finding(
                ctx,
                f"Profiler overhead: {fmt_us(ov_us)} ({pct(sh)} of the window)",
                severity_of(sh),
                "The profiler's own bookkeeping takes a visible share of the window: profile "
                "fewer steps per window, drop with_stack/profile_memory when not needed, and "
                "compare with an unprofiled timing (opscope.bench).",
                {"events": len(ov), "overhead_us": ov_us},
                at_stake=ov_us,
                sh=sh,
                evidence=[ids_evidence(v, ov, note="profiler overhead")],
            )
        )
    last = _last_step(ctx)
    if last is not None:
        out.append(last)
    return out


def _categories(v: EventView) -> list[str]:
    """The distinct categories of the events, sorted (a null category reads as "")."""
    cat = v.index.cat
    present = unique_ints(cat.codes)
    return sorted({str(cat.values[c]) if c >= 0 else "" for c in present.tolist()})


def _neuron(ctx: Context, n_device: int) -> list[Finding]:
    """The Neuron checks of the module docstring."""
    meta = ctx.trace.meta
    info = meta.extra.get("neuron")
    info = info if isinstance(info, dict) else {}
    out: list[Finding] = []
    problems = [p for p in info.get("capture_problems") or [] if isinstance(p, dict)]
    unprocessed = [p for p in problems if p.get("code") == "NOT_PROCESSED"]
    pairing = [p for p in problems if p.get("code") != "NOT_PROCESSED"]
    if unprocessed:
        cmd = str(unprocessed[0].get("command") or "neuron-explorer view -d <capture folder>")
        out.append(
            _finding(
                ctx,
                "Neuron capture not processed: no system/device profile tables were read",
                "high" if n_device == 0 else "medium",
                f"Turn the capture into Neuron Explorer tables and report on them: {cmd} "
                "(neuron-explorer ships with the Neuron SDK; the opscope commands run it before "
                "they read a capture when it is on PATH, loading in Python never does: "
                "opscope.capture.neuron_explorer.convert). Until then device columns hold no "
                "Neuron executions.",
                {"captures": unprocessed[:10]},
            )
        )
    if pairing:
        codes = sorted({str(p.get("code")) for p in pairing})
        first = clip_words(str(pairing[0].get("message", "")), 160)
        out.append(
            _finding(
                ctx,
                f"Neuron capture incomplete ({', '.join(codes)}): {first}",
                "medium",
                "Each NEFF (compiled graph) needs its NTFF (device trace) of the same id for a "
                "device profile (model mode), and NTFFs need their NEFFs: capture with "
                "ProfileMode.DEVICE and NeuronConfig(neff_cache_dir=...) (or "
                "TORCH_NEURONX_NEFF_CACHE_DIR), call torch.neuron.synchronize() inside the "
                "profiled region, and copy the whole <instance>_pid_<pid> folder.",
                {"problems": pairing[:20]},
            )
        )
    hints = [w for w in info.get("warnings") or [] if isinstance(w, dict)]
    if hints:
        first = clip_words(str(hints[0].get("message", "")), 160)
        out.append(
            _finding(
                ctx,
                f"Neuron Explorer warns about the profile ({hints[0].get('category')}): {first}",
                "low",
                "Neuron Explorer's Warning table lists data it could not capture or decode; "
                "the numbers that depend on it (named in the message) may be partial. "
                "Missing DMA names need NEURON_RT_ENABLE_DGE_NOTIFICATIONS=1; dropped events "
                "need a larger max_events_per_nc.",
                {"warnings": hints[:20]},
            )
        )
    fmt = [w for w in meta.warnings if w.startswith(NEURON_WARNING_PREFIX)]
    fmt = [w for w in fmt if "raw Neuron capture" not in w]  # reported above with its command
    if fmt:
        out.append(
            _finding(
                ctx,
                f"Neuron profile format: {clip_words(fmt[0][len(NEURON_WARNING_PREFIX) :], 160)}",
                "low",
                "The profile was written by a newer Neuron Explorer than opscope knows: columns "
                "it does not know are left out of the analysis (they stay in the neuron_* SQL "
                "tables). Numbers from known columns are unaffected.",
                {"warnings": fmt[:10]},
            )
        )
    return out


def _last_step(ctx: Context) -> Finding | None:
    v = view(ctx)
    steps = [s for s in ctx.steps if s.step >= 0]
    if ctx.window_steps is not None:
        lo, hi = ctx.window_steps
        steps = [s for s in steps if lo <= s.step <= hi]
    if len(steps) < MIN_STEPS:
        return None
    others = np.asarray([s.device_ops for s in steps[:-1]], dtype=float)
    med = float(np.median(others))
    short = med > 0 and steps[-1].device_ops < LAST_STEP_RATIO * med
    if not short:
        return None
    last_rows = np.flatnonzero(v.index.kind.eq("step") & (v.step == steps[-1].step))
    title = (
        f"Last profiled step {steps[-1].step} looks incomplete: {steps[-1].device_ops} "
        f"device executions against a median of {med:.0f}"
    )
    return _finding(
        ctx,
        title,
        "medium",
        "Synchronize the device at the end of every profiled step (opscope's p.step() does; "
        "with torch.profiler call torch.cuda.synchronize() before prof.step()), so each step's "
        "device work is inside it and the last step is complete when the trace is exported. "
        "Per-step numbers of this report are skewed until then.",
        {
            "last_step": steps[-1].step,
            "last_step_device_ops": steps[-1].device_ops,
            "median_device_ops": med,
        },
        evidence=[ids_evidence(v, last_rows, note=f"step {steps[-1].step}")],
    )


RULE = Rule(
    name="profile_quality",
    description="Profile problems: no device events, empty window, truncation, overhead, last step",
    find=run,
)
