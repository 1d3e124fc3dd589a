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
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from opscope.analysis.critical.fixes import Fix, FixPart
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
from opscope.trace.arrays import Codes, bools, unique_ints

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
    names = v.index.name
    win = np.flatnonzero(v.in_window & v.index.is_framework)

    # compile spans in the window, outermost only
    spans = win[v.name_matches(r" \(dynamo_timed\)$")[win]]
    outer = _outermost(v, spans)
    compile_us = float(v.dur[outer].sum()) / 1e3 if len(outer) else 0.0
    in_window = (ctx.run_info or {}).get("compiled_in_window") or []
    if share_of_wall(ctx, compile_us) >= MIN_WALL_SHARE or in_window:
        sh = share_of_wall(ctx, compile_us)
        out.append(
            make_finding(
                ctx.wall_us,
                severity=severity_of(sh) if compile_us else "medium",
                title=(
                    f"torch.compile compiled inside the measured window: {fmt_us(compile_us)} "
                    f"({pct(sh)} of the window)"
                    if compile_us
                    else f"torch.compile compiled during profiled steps {in_window}"
                ),
                time_at_stake_us=compile_us,
                evidence=[ids_evidence(v, outer, note="compile spans")],
                fix=Fix((FixPart(0.0, rows=outer, host=True),)) if len(outer) else None,
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

    # recompilations: regions named F/R with R > 0 (parsed once per distinct name)
    region_names = names.value_matches(REGION.pattern)
    regions = win[names.rows(region_names)[win]]
    region_codes = unique_ints(names.codes[regions]).tolist()
    again = {c for c in region_codes if int(REGION.match(str(names.values[c])).group(2)) > 0}  # type: ignore[union-attr]
    recompiled = regions[np.isin(names.codes[regions], sorted(again))]
    reasons = [str(x) for rec in recs for x in rec.get("recompile_reasons") or []]
    n_recompiles = sum(int(rec.get("recompiles") or 0) for rec in recs) or len(reasons)
    trace_ids = sorted({str(names.values[c]).split(": ", 1)[1] for c in again})
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
                compile_spans=outer,
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
        first = clip_words(top[0][0].splitlines()[0], 160) if top else "see details"
        frames = {str(names.values[c]).split(": ", 1)[1].split("/")[0] for c in region_codes}
        out.append(
            make_finding(
                ctx.wall_us,
                severity="low",
                share=0.0,
                title=f"{breaks} graph break{'s' if breaks != 1 else ''} in compiled code "
                f"(first: {first})",
                time_at_stake_us=0.0,
                evidence=[ids_evidence(v, regions, note="compiled regions")],
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
    lookups = win[names.eq(CACHE_LOOKUP)[win]]
    lookup_us = float(v.dur[lookups].sum()) / 1e3
    if len(lookups) and share_of_wall(ctx, lookup_us) >= MIN_WALL_SHARE:
        out.append(
            make_finding(
                ctx.wall_us,
                title=(
                    f"Dynamo guard checks cost {fmt_us(lookup_us)} ({len(lookups)} cache "
                    f"lookup{'s' if len(lookups) != 1 else ''}, "
                    f"{fmt_us(lookup_us / len(lookups))} each)"
                ),
                time_at_stake_us=lookup_us,
                evidence=[
                    ids_evidence(
                        v,
                        lookups[np.argsort(-v.dur[lookups])],
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
                fix=Fix((FixPart(0.0, rows=lookups, host=True),)),
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
    ix = v.index
    ex = np.flatnonzero(v.is_exec & ix.cat.eq("neuron_hw") & (v.op >= 0))
    if len(ex) == 0:
        return None
    units = v.unit_of(v.op[ex])
    models = v.arg_strings(ex, "model_name")
    keep = (units >= 0) & np.array([m is not None for m in models.tolist()], dtype=bool)
    ex, units, models = ex[keep], units[keep], models[keep]
    if not len(ex):
        return None
    # per unit name (in order of first execution): the NEFFs it ran, the shapes it had
    uniq_units, unit_inv = np.unique(units, return_inverse=True)
    shape_code = _codes_of(_shape_reprs(v, uniq_units))[unit_inv.reshape(-1)]
    model_code = _codes_of(models.tolist())
    name = ix.name.text_codes()[units].astype(np.int64)
    names, first, name_inv = np.unique(name, return_index=True, return_inverse=True)
    name_inv = name_inv.reshape(-1)
    neffs = _distinct_per(name_inv, model_code, len(names))
    shapes = _distinct_per(name_inv, shape_code, len(names))
    by_first = np.argsort(first, kind="stable").tolist()
    hit = [
        i
        for i in by_first
        if neffs[i] >= MIN_NEFFS and shapes[i] >= MIN_NEFFS and neffs[i] <= shapes[i]
    ]
    if not hit:
        return None
    loads = np.flatnonzero(v.in_window & v.name_matches(NEFF_LOAD_RE))
    load_us = float(v.dur[loads].sum()) / 1e3
    worst = max(hit, key=lambda i: neffs[i])
    label = {i: v.name_of(int(units[first[i]])) for i in hit}
    rows = ex[name_inv == worst]
    worst_neffs = sorted({str(m) for m in models[name_inv == worst].tolist()})
    sh = share_of_wall(ctx, load_us)
    return make_finding(
        ctx.wall_us,
        severity=severity_of(sh) if load_us else "medium",
        title=f"{label[worst]} ran {neffs[worst]} NEFFs for {shapes[worst]} input shapes: "
        "Neuron compiles a graph per shape",
        time_at_stake_us=load_us,
        evidence=[
            ids_evidence(v, rows, note="executions of different NEFFs"),
            *([ids_evidence(v, loads, note="NEFF loads / model switches")] if len(loads) else []),
        ],
        recommendation=(
            "Each new input shape compiles (neuronx-cc, seconds to minutes) and loads a new "
            "NEFF. Pad or bucket the varying dimension to a few fixed sizes (e.g. sequence "
            "lengths rounded up to a multiple of 128), keep batch sizes constant (drop_last="
            "True), and keep the persistent NEFF cache between runs; under torch.compile mark "
            "the dimension dynamic only if the Neuron backend supports it."
        ),
        confidence="medium",
        fix=Fix((FixPart(0.0, rows=loads, host=True),)) if len(loads) else None,
        details={
            "op": label[worst],
            "neffs": worst_neffs[:20],
            "shapes": int(shapes[worst]),
            "ops": {label[i]: int(neffs[i]) for i in hit},
            "load_us": load_us,
        },
    )


def _codes_of(values: list[str]) -> np.ndarray:
    """An int per string, equal for equal strings."""
    if not values:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(Codes.of(pa.array(values, pa.string())).codes, dtype=np.int64)


def _distinct_per(group: np.ndarray, value: np.ndarray, groups: int) -> np.ndarray:
    """How many distinct ``value`` each group holds."""
    if not len(value):
        return np.zeros(groups, dtype=np.int64)
    width = int(value.max()) + 1
    pairs = unique_ints(group * width + value)
    return np.bincount(pairs // width, minlength=groups)


def _shape_reprs(v: EventView, rows: np.ndarray) -> list[str]:
    """``repr((Input Dims, Input type))`` of each row's args, through the index's shapes
    (once per distinct shape) where it read them; decoded otherwise."""
    codes = v.input_codes(rows)
    shapes = v.index.shapes
    # no "Input Dims" in the text: both None, unless a type is recorded or an escape hides
    # a key
    plain = np.ones(len(rows), dtype=bool)
    none = np.flatnonzero(codes == -1)
    if len(none):
        texts = v.index.args_take(rows[none])
        plain[none] = ~bools(pc.match_substring_regex(texts, r'"Input type"|\\'))
    out: list[str] = []
    memo: dict[int, str] = {}
    for r, c, easy in zip(rows.tolist(), codes.tolist(), plain.tolist(), strict=True):
        if c >= 0:
            if c not in memo:
                d, t = shapes.dims[c], shapes.types[c]
                memo[c] = repr(
                    (
                        orjson.loads(d) if d is not None else None,
                        orjson.loads(t) if t is not None else None,
                    )
                )
            out.append(memo[c])
        elif c == -1 and easy:
            out.append(repr((None, None)))
        else:
            a = v.args(r)
            out.append(repr((a.get("Input Dims"), a.get("Input type"))))
    return out


def _outermost(v: EventView, rows: np.ndarray) -> np.ndarray:
    """The rows (in their order) that have none of the others among their ancestors."""
    mark = np.zeros(v.n, dtype=bool)
    mark[rows] = True
    covered = np.zeros(len(rows), dtype=bool)
    cur = v.parent[rows]
    while (cur >= 0).any():
        live = cur >= 0
        covered |= live & mark[np.maximum(cur, 0)]
        cur = np.where(live, v.parent[np.maximum(cur, 0)], -1)
    return np.asarray(rows[~covered], dtype=np.int64)


def _recompile_finding(
    ctx: Context,
    v: EventView,
    *,
    reasons: list[str],
    n: int,
    trace_ids: list[str],
    recompiled: np.ndarray,
    compile_us: float,
    compile_spans: np.ndarray,
) -> Finding:
    shape_driven = [r for r in reasons if SHAPE_REASON.search(r)]
    count = max(n, len(trace_ids))
    first = (
        clip_words(reasons[0].splitlines()[0], 160)
        if reasons
        else f"compiled regions {trace_ids[:5]}"
    )
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
    evidence: list[Evidence] = [ids_evidence(v, recompiled, note="recompiled regions")]
    return make_finding(
        ctx.wall_us,
        severity="medium" if count > 1 or compile_us else "low",
        title=f"{count} recompilation{'s' if count != 1 else ''}"
        f"{' (shape-driven)' if shape_driven else ''}: {first}",
        time_at_stake_us=compile_us,
        evidence=evidence,
        recommendation=fix,
        confidence="high" if reasons else "medium",
        fix=Fix((FixPart(0.0, rows=compile_spans, host=True),)) if len(compile_spans) else None,
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
    find=run,
)
