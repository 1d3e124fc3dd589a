"""compile: torch.compile costs - compilation inside the window, recompilations (and whether
shapes drive them), graph breaks, Dynamo's per-call guard checks.

Contract: two sources, either may be missing.

* ``run.json`` of a run folder (``ctx.run_info``; written by ``capture.session``): ``compile``
  is a list of compile records (``capture.compile_metrics.CompileRecord.to_dict``: ``wall_s``,
  ``frames_compiled``, ``recompiles``, ``recompile_reasons``, ``graph_breaks``,
  ``graph_break_reasons``, ``fail_reasons``), ``compiled_in_window`` the steps during which
  Dynamo compiled while the profiler recorded.
* The trace, in the window: Dynamo's compile spans (``... (dynamo_timed)``, outermost only),
  ``Torch-Compiled Region: F/R`` ranges (``R > 0`` is the R-th recompilation of frame ``F``)
  and ``TorchDynamo Cache Lookup`` (guard evaluation on every call of a compiled function).

Findings and thresholds:

* **compile inside the window** - compile spans summing to at least :data:`MIN_WALL_SHARE`
  (1 %) of the window's wall time, or ``compiled_in_window`` non-empty.  At stake: the spans'
  time.  Fix: warm up before the measured steps.
* **recompilations** - any recompile reason in ``run.json``, or a compiled region with
  ``R > 0`` in the trace.  Shape-driven reasons (size/stride/shape/dim mismatches) get
  static-shape advice: pad or bucket the varying dimension, or ``mark_dynamic`` it.  At stake:
  the compile time inside the window when there is any, else 0 (the cost was paid before the
  window; it is reported so it is not paid again in production).
* **graph breaks** - ``graph_breaks > 0`` in ``run.json``.  At stake 0 in the window (the
  eager code between graphs is visible in the other rules); the reasons are in ``details``.
* **guard overhead** - ``TorchDynamo Cache Lookup`` summing to at least :data:`MIN_WALL_SHARE`
  of the wall time.  At stake: that time.
* **Neuron: a new NEFF per shape** - on Neuron every distinct graph is compiled to its own NEFF
  (``nc_exec_running``'s ``model_name``).  An op (unit) whose executions in the window ran at
  least :data:`MIN_NEFFS` different NEFFs with as many different input shapes is recompiled
  per shape (in eager mode each new shape compiles a NEFF; under torch.compile each new shape
  recompiles the graph).  At stake: the NEFF loads and model switches in the window
  (``nrt_load``/``model_load``/``nrt_model_switch``), else 0 (the compilations were paid
  before the window; they are reported so they are not paid again in production).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from opscope.analysis.findings._view import (
    EventView,
    fmt_us,
    ids_evidence,
    pct,
    severity,
    share,
    view,
)
from opscope.analysis.findings.base import Context, Evidence, Finding, Rule

MIN_WALL_SHARE = 0.01
REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)")
SHAPE_REASON = re.compile(r"size|stride|shape|dim|numel|rank", re.IGNORECASE)
CACHE_LOOKUP = "TorchDynamo Cache Lookup"
MIN_NEFFS = 2
NEFF_LOAD_RE = r"^(nrt_load|model_load|nrt_model_switch|nc_model_switch)$"


def _records(ctx: Context) -> list[dict[str, Any]]:
    info = ctx.run_info or {}
    recs = info.get("compile")
    return [r for r in recs if isinstance(r, dict)] if isinstance(recs, list) else []


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    out: list[Finding] = []
    recs = _records(ctx)
    win = np.flatnonzero(v.in_window & (v.source == "framework"))
    names = v.name[win]

    # compile spans in the window, outermost only
    spans = win[v.name_matches(r" \(dynamo_timed\)$")[win]]
    span_set = set(spans.tolist())
    outer = [r for r in spans.tolist() if not _has_ancestor_in(v, r, span_set)]
    compile_us = float(v.dur[outer].sum()) / 1e3 if outer else 0.0
    in_window = (ctx.run_info or {}).get("compiled_in_window") or []
    if share(ctx, compile_us) >= MIN_WALL_SHARE or in_window:
        sh = share(ctx, compile_us)
        out.append(
            Finding(
                kind="compile",
                severity=severity(sh) if compile_us else "medium",
                title=(
                    f"torch.compile compiled inside the measured window: {fmt_us(compile_us)} "
                    f"({pct(sh)} of the window)"
                    if compile_us
                    else f"torch.compile compiled during profiled steps {in_window}"
                ),
                time_at_stake_us=compile_us,
                share=sh,
                evidence=[ids_evidence(v, outer, note="compile spans")],
                recommendation=(
                    "Run the compiled function on representative inputs before the measured "
                    "steps (warm-up, e.g. inside opscope's watch_compile()), so the window "
                    "holds steady-state work; if it compiles again, see the recompilation "
                    "finding."
                ),
                confidence="high",
                details={"compile_us": compile_us, "spans": len(outer), "steps": in_window},
            )
        )

    # recompilations
    regions = win[v.name_matches(REGION.pattern)[win]]
    recompiled = [r for r in regions.tolist() if int(REGION.match(str(v.name[r])).group(2)) > 0]  # type: ignore[union-attr]
    reasons = [str(x) for rec in recs for x in rec.get("recompile_reasons") or []]
    n_recompiles = sum(int(rec.get("recompiles") or 0) for rec in recs) or len(reasons)
    trace_ids = sorted({str(v.name[r]).split(": ", 1)[1] for r in recompiled})
    if reasons or n_recompiles or trace_ids:
        out.append(
            _recompile_finding(
                ctx,
                v,
                reasons=reasons,
                n=n_recompiles,
                trace_ids=trace_ids,
                recompiled=recompiled,
                compile_us=compile_us,
            )
        )

    # graph breaks
    breaks = sum(int(rec.get("graph_breaks") or 0) for rec in recs)
    if breaks:
        why: dict[str, int] = {}
        for rec in recs:
            for k, n in (rec.get("graph_break_reasons") or {}).items():
                why[str(k)] = why.get(str(k), 0) + int(n)
        top = sorted(why.items(), key=lambda kv: -kv[1])[:5]
        first = top[0][0].splitlines()[0][:160] if top else "see details"
        frames = {str(v.name[r]).split(": ", 1)[1].split("/")[0] for r in regions.tolist()}
        out.append(
            Finding(
                kind="compile",
                severity="low",
                title=f"{breaks} graph break{'s' if breaks != 1 else ''} in compiled code "
                f"(first: {first})",
                time_at_stake_us=0.0,
                share=0.0,
                evidence=[ids_evidence(v, regions.tolist(), note="compiled regions")],
                recommendation=(
                    "Each graph break splits the model into separately compiled graphs with "
                    "eager Python between them (no fusion across the break, extra guards). "
                    "Find them with torch._dynamo.explain(fn)(*args) or "
                    "torch.compile(fullgraph=True), and remove the cause (data-dependent "
                    "Python control flow, .item(), print, unsupported calls)."
                ),
                confidence="high",
                details={
                    "graph_breaks": breaks,
                    "reasons": dict(top),
                    "compiled_frames_in_window": len(frames),
                },
            )
        )

    # guard evaluation on every call
    lookups = win[names == CACHE_LOOKUP]
    lookup_us = float(v.dur[lookups].sum()) / 1e3
    if len(lookups) and share(ctx, lookup_us) >= MIN_WALL_SHARE:
        sh = share(ctx, lookup_us)
        out.append(
            Finding(
                kind="compile",
                severity=severity(sh),
                title=(
                    f"Dynamo guard checks cost {fmt_us(lookup_us)} ({len(lookups)} cache "
                    f"lookups, {fmt_us(lookup_us / len(lookups))} each)"
                ),
                time_at_stake_us=lookup_us,
                share=sh,
                evidence=[
                    ids_evidence(
                        v,
                        lookups[np.argsort(-v.dur[lookups])].tolist(),
                        note="TorchDynamo Cache Lookup",
                    )
                ],
                recommendation=(
                    "Every call of a compiled function first checks its guards. Compile a "
                    "larger region called less often (the whole step rather than a small "
                    "function in a loop), remove graph breaks and recompiles (each adds a "
                    "cache entry to check), or capture the step with CUDA graphs "
                    '(mode="reduce-overhead").'
                ),
                confidence="high",
                details={"lookups": len(lookups), "lookup_us": lookup_us},
            )
        )
    neff = _neff_per_shape(ctx, v)
    if neff is not None:
        out.append(neff)
    return out


def _neff_per_shape(ctx: Context, v: EventView) -> Finding | None:
    """The Neuron check of the module docstring."""
    if ctx.trace.device.kind != "neuron":
        return None
    ex = np.flatnonzero(v.is_exec & (v.cat == "neuron_hw") & (v.op >= 0))
    if len(ex) == 0:
        return None
    units = v.unit_of(v.op[ex])
    by_unit: dict[str, tuple[set[str], set[str], list[int]]] = {}
    shape_of: dict[int, str] = {}
    for r, u in zip(ex.tolist(), units.tolist(), strict=True):
        model = v.args(r).get("model_name")
        if not isinstance(model, str) or u < 0:
            continue
        if u not in shape_of:
            a = v.args(u)
            shape_of[u] = repr((a.get("Input Dims"), a.get("Input type")))
        neffs, shapes, rows = by_unit.setdefault(str(v.name[u]), (set(), set(), []))
        neffs.add(model)
        shapes.add(shape_of[u])
        rows.append(r)
    hit = {
        k: x
        for k, x in by_unit.items()
        if len(x[0]) >= MIN_NEFFS and len(x[1]) >= MIN_NEFFS and len(x[0]) <= len(x[1])
    }
    if not hit:
        return None
    loads = np.flatnonzero(v.in_window & v.name_matches(NEFF_LOAD_RE))
    load_us = float(v.dur[loads].sum()) / 1e3
    worst = max(hit.items(), key=lambda kv: len(kv[1][0]))
    name, (neffs, shapes, rows) = worst
    sh = share(ctx, load_us)
    return Finding(
        kind="compile",
        severity=severity(sh) if load_us else "medium",
        title=f"{name} ran {len(neffs)} NEFFs for {len(shapes)} input shapes: Neuron compiles "
        "a graph per shape",
        time_at_stake_us=load_us,
        share=sh,
        evidence=[
            ids_evidence(v, rows, note="executions of different NEFFs"),
            *(
                [ids_evidence(v, loads.tolist(), note="NEFF loads / model switches")]
                if len(loads)
                else []
            ),
        ],
        recommendation=(
            "Each new input shape compiles (neuronx-cc, seconds to minutes) and loads a new "
            "NEFF. Pad or bucket the varying dimension to a few fixed sizes (e.g. sequence "
            "lengths rounded up to a multiple of 128), keep batch sizes constant (drop_last="
            "True), and keep the persistent NEFF cache between runs; under torch.compile mark "
            "the dimension dynamic only if the Neuron backend supports it."
        ),
        confidence="medium",
        details={
            "op": name,
            "neffs": sorted(neffs)[:20],
            "shapes": len(shapes),
            "ops": {k: len(x[0]) for k, x in hit.items()},
            "load_us": load_us,
        },
    )


def _has_ancestor_in(v: EventView, row: int, rows: set[int]) -> bool:
    cur = int(v.parent[row])
    while cur >= 0:
        if cur in rows:
            return True
        cur = int(v.parent[cur])
    return False


def _recompile_finding(
    ctx: Context,
    v: EventView,
    *,
    reasons: list[str],
    n: int,
    trace_ids: list[str],
    recompiled: list[int],
    compile_us: float,
) -> Finding:
    shape_driven = [r for r in reasons if SHAPE_REASON.search(r)]
    count = max(n, len(trace_ids))
    first = reasons[0].splitlines()[0][:160] if reasons else f"compiled regions {trace_ids[:5]}"
    if shape_driven:
        fix = (
            "Recompiles are shape-driven: the inputs change size between calls. Pad the varying "
            "dimension to a fixed size or to a few buckets (e.g. sequence lengths rounded up to "
            "a multiple of 64), or mark it dynamic once: torch._dynamo.mark_dynamic(x, dim) / "
            "torch.compile(dynamic=True), so one graph serves all sizes."
        )
    else:
        fix = (
            "Each recompilation compiles the function again and adds a guard entry. Make the "
            "guarded values stable (constant Python scalars, same dtype/device/requires_grad, "
            "no changing global state) - the reasons name the guard that failed; "
            "TORCH_LOGS=recompiles shows them live."
        )
    sh = share(ctx, compile_us)
    evidence: list[Evidence] = [ids_evidence(v, recompiled, note="recompiled regions")]
    return Finding(
        kind="compile",
        severity="medium" if count > 1 or compile_us else "low",
        title=f"{count} recompilation{'s' if count != 1 else ''}"
        f"{' (shape-driven)' if shape_driven else ''}: {first}",
        time_at_stake_us=compile_us,
        share=sh,
        evidence=evidence,
        recommendation=fix,
        confidence="high" if reasons else "medium",
        details={
            "recompiles": count,
            "reasons": reasons[:10],
            "shape_driven": len(shape_driven),
            "recompiled_regions_in_trace": trace_ids[:20],
        },
    )


RULE = Rule(
    name="compile",
    description="torch.compile: compile time in the window, recompiles, graph breaks, guards",
    run=run,
)
