"""dtype: device work in a slower number format than the program needs.

Contract: the op that issued each device execution in the window is read from its recorded
``Input Dims``/``Input type`` (present when the profile used ``record_shapes=True``; without
shapes the rule cannot see dtypes and stays silent).

* **float64 on a device** - executions whose op has a ``double`` tensor input of at least one
  dimension (a Python ``float`` becomes a 0-dim double and is not counted).  GPUs run float64 at
  1/2 to 1/64 of the float32 rate; Neuron has no float64 and silently computes in float32.
  ``time_at_stake_us``: half of their device time (float32 is at least twice as fast on every
  GPU).  Threshold: at least :data:`MIN_WALL_SHARE` (1 %) of the window's wall time.  On
  Neuron the finding is about precision, not speed: any float64 execution is reported (severity
  ``low``), with 0 µs at stake - the results are float32 whatever the program asked for.
* **fp32 matmuls on a GPU** (CUDA/ROCm) - kernels of ``mm``/``addmm``/``bmm``/``baddbmm``/
  ``matmul``/``linear`` whose inputs are ``float`` and whose kernel name shows no TF32/XF32
  tensor-core path (``tf32``, ``xf32``, ``s1688``, ``s16816``).  Tensor-core formats (TF32,
  bf16, fp16) run matmuls several times faster; ``time_at_stake_us`` is half of those kernels'
  time (a conservative 2x).  Threshold: at least :data:`MIN_MATMUL_DEVICE_SHARE` (5 %) of the
  window's device time and :data:`MIN_WALL_SHARE` of its wall time.

On a CPU-only trace float64 may be what the program wants and there are no tensor cores: no
finding.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow.compute as pc

from opscope.analysis.critical.fixes import Fix, FixPart
from opscope.analysis.findings._view import (
    EventView,
    TensorInputs,
    fmt_us,
    ids_evidence,
    pct,
    view,
)
from opscope.analysis.findings.base import Context, Finding, Rule, make_finding, share_of_wall
from opscope.analysis.opsets import MATMULS
from opscope.trace.arrays import bools, member, unique_ints

MIN_WALL_SHARE = 0.01
MIN_MATMUL_DEVICE_SHARE = 0.05
SPEEDUP_SHARE = 0.5  # fraction of the time a faster format saves, conservatively
MATMUL_OPS = frozenset(f"aten::{n}" for n in MATMULS)
TENSOR_CORE = re.compile(r"tf32|xf32|s1688|s16816|_tf32|f32_f32_tf32", re.IGNORECASE)


def _has_double(inputs: TensorInputs) -> bool:
    return any(t == "double" and len(s) >= 1 for s, t in inputs)


def _all_fp32(inputs: TensorInputs) -> bool:
    return bool(inputs) and all(t == "float" for s, t in inputs if len(s) >= 2)


def run(ctx: Context) -> list[Finding]:
    v = view(ctx)
    if v.device_is_host or v.n == 0:
        return []
    out: list[Finding] = []
    ex = np.flatnonzero(v.is_exec & (v.op >= 0))
    if len(ex) == 0:
        return []
    kind = ctx.trace.device.kind
    f64 = _float64(ctx, v, ex, kind)
    if f64 is not None:
        out.append(f64)
    if kind in ("cuda", "rocm"):
        mm = _fp32_matmul(ctx, v, ex, kind)
        if mm is not None:
            out.append(mm)
    return out


def _double_ops(v: EventView) -> np.ndarray:
    """Rows of the framework ops with a ``double`` tensor input of at least one dimension:
    candidates from the recorded shapes (types that spell ``"double"``), parsed once per
    distinct shape."""
    ops = np.flatnonzero(v.is_op)
    codes = v.input_codes(ops)
    types = v.index.shapes.types
    spelled = np.array([t is not None and '"double"' in t for t in types] + [True], dtype=bool)
    # code -2: args the index does not read; their text is searched, then decoded one by one
    odd = ops[codes == -2]
    if len(odd):
        text = v.index.args_take(odd)
        odd = odd[bools(pc.match_substring(text, '"double"'))]
    cand = np.sort(
        np.concatenate([odd, ops[(codes >= 0) & spelled[np.where(codes >= 0, codes, -1)]]])
    )
    if len(cand):
        cand = cand[v.inputs_flag(cand, _has_double)]
    return np.asarray(cand, dtype=np.int64)


def _float64(ctx: Context, v: EventView, ex: np.ndarray, kind: str) -> Finding | None:
    doubles = _double_ops(v)
    if not len(doubles):
        return None
    hit = ex[member(v.op[ex], doubles)]
    dev_us = float(v.exec_dur[hit].sum()) / 1e3
    # Neuron runs float64 as float32 (same speed): the cost is precision, not time
    at_stake = 0.0 if kind == "neuron" else SPEEDUP_SHARE * dev_us
    if len(hit) == 0 or (kind != "neuron" and share_of_wall(ctx, at_stake) < MIN_WALL_SHARE):
        return None
    # device time per op name, summed in execution order; names in order of first execution
    code = v.index.name.text_codes()[v.op[hit]]
    uniq, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    per_name = np.zeros(len(uniq), dtype=np.float64)
    np.add.at(per_name, inverse.reshape(-1), v.exec_dur[hit] / 1e3)
    seen = np.argsort(first, kind="stable")
    ops = {v.name_of(int(v.op[hit[first[i]]])): float(per_name[i]) for i in seen.tolist()}
    top = sorted(ops.items(), key=lambda kv: -kv[1])[:5]
    names = ", ".join(n for n, _ in top[:3])
    if kind == "neuron":
        fix = (
            f"float64 tensors reach the device ({names}); Neuron has no float64 and computes "
            "them in float32 anyway. Create them as float32 (or bf16) explicitly: "
            "torch.set_default_dtype(torch.float32), dtype=torch.float32 in torch.tensor/"
            "from_numpy(...).float()."
        )
    else:
        fix = (
            f"float64 work on the device ({names}). Unless the algorithm needs it, use float32 "
            "(or bf16): NumPy arrays arrive as float64 - convert with .float() or "
            "torch.from_numpy(a).to(torch.float32); avoid torch.set_default_dtype(torch.float64)."
        )
    title = f"float64 work on the device: {len(hit)} executions, {fmt_us(dev_us)} ({names})"
    if kind == "neuron":
        title = (
            f"float64 inputs run as float32 on Neuron: {len(hit)} executions, {fmt_us(dev_us)} "
            f"({names})"
        )
    return make_finding(
        ctx.wall_us,
        severity="low" if kind == "neuron" else None,
        title=title,
        time_at_stake_us=at_stake,
        evidence=[ids_evidence(v, hit[np.argsort(-v.exec_dur[hit])], note="float64 executions")],
        recommendation=fix,
        confidence="high",
        fix=Fix((FixPart(1.0 - SPEEDUP_SHARE, rows=hit),)) if at_stake > 0 else None,
        details={
            "format": "float64",
            "executions": len(hit),
            "device_us": dev_us,
            "ops": dict(top),
            "assumed_speedup_share": 0.0 if kind == "neuron" else SPEEDUP_SHARE,
            "computed_as": "float32" if kind == "neuron" else "float64",
        },
    )


def _fp32_matmul(ctx: Context, v: EventView, ex: np.ndarray, kind: str) -> Finding | None:
    names_ix = v.index.name
    k = ex[v.index.kind.eq("kernel")[ex]]
    op = v.op[k]
    is_mm = names_ix.isin(MATMUL_OPS)[op]
    k, op = k[is_mm], op[is_mm]
    if len(k) == 0:
        return None
    ops, inverse = np.unique(op, return_inverse=True)
    fp32 = v.inputs_flag(ops, _all_fp32)[inverse.reshape(-1)]
    tensor_core = names_ix.rows(names_ix.value_matches(TENSOR_CORE.pattern, ignore_case=True))
    hit = k[fp32 & ~tensor_core[k]]
    dev_us = float(v.exec_dur[hit].sum()) / 1e3
    total = ctx.op_table.device_time_us
    if len(hit) == 0 or total <= 0 or dev_us / total < MIN_MATMUL_DEVICE_SHARE:
        return None
    at_stake = SPEEDUP_SHARE * dev_us
    if share_of_wall(ctx, at_stake) < MIN_WALL_SHARE:
        return None
    major = _compute_major(ctx)
    if kind == "cuda" and major is not None and major < 8:
        fix = (
            "float32 matmuls on a GPU without TF32/bf16: run them in fp16 with "
            'torch.autocast("cuda", dtype=torch.float16) (and a GradScaler when training).'
        )
    else:
        fix = (
            "float32 matmuls without tensor cores. Allow TF32 with "
            'torch.set_float32_matmul_precision("high") (a one-line change, ~1e-3 relative '
            'precision), or run the model in bf16: torch.autocast("cuda", dtype=torch.bfloat16).'
        )
    names = sorted({v.name_of(int(o)) for o in unique_ints(v.op[hit]).tolist()})
    return make_finding(
        ctx.wall_us,
        title=(
            f"fp32 matmuls without tensor cores: {pct(dev_us / total)} of device time "
            f"({len(hit)} kernels of {', '.join(names[:3])})"
        ),
        time_at_stake_us=at_stake,
        evidence=[ids_evidence(v, hit[np.argsort(-v.exec_dur[hit])], note="fp32 matmul kernels")],
        recommendation=fix,
        confidence="medium",
        fix=Fix((FixPart(1.0 - SPEEDUP_SHARE, rows=hit),)),
        details={
            "format": "float32 matmul",
            "kernels": len(hit),
            "device_us": dev_us,
            "device_share": dev_us / total,
            "ops": names,
            "compute_capability_major": major,
            "assumed_speedup_share": SPEEDUP_SHARE,
        },
    )


def _compute_major(ctx: Context) -> int | None:
    for p in ctx.trace.meta.device_properties:
        if isinstance(p, dict) and isinstance(p.get("computeMajor"), int):
            return int(p["computeMajor"])
    return None


RULE = Rule(
    name="dtype",
    description="float64 work on a device; fp32 matmuls where TF32/bf16 tensor cores exist",
    find=run,
)
