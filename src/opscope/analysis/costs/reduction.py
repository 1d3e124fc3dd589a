"""Reductions: ``sum``, ``mean``, ``amax``/``amin``, ``max``/``min`` (over dims), ``argmax``,
``prod``, ``norm``, ``var``/``std``, ``logsumexp``, ``all``/``any``.

FLOPs: ``k`` per input element - 1 for a sum, mean, extremum or logical reduction, 2 for a
vector norm (square and add), 3 for variance/standard deviation (subtract, square, add), 4 for
``logsumexp`` (max, subtract, exp, add).  Bytes: the input read once, the result written once.
"""

from __future__ import annotations

import math
import re

from opscope.analysis.costs._common import Call, Cost, CostError, dtype_class

_FLOPS = {
    "norm": 2,
    "linalg_vector_norm": 2,
    "var": 3,
    "std": 3,
    "var_mean": 3,
    "std_mean": 3,
    "logsumexp": 4,
}
_DIM_ARG = {"norm": 2, "linalg_vector_norm": 2}


def reduction(op: str, call: Call) -> Cost:
    x = call.tensor(0)
    if op in ("max", "min") and call.is_tensor(1):
        raise CostError("binary max/min is elementwise")
    dims_text = call.raw(_DIM_ARG.get(op, 1)).strip()
    rank = len(x.shape)
    dims = (
        [int(d) for d in re.findall(r"-?\d+", dims_text)] if dims_text not in ("", "None") else []
    )
    if op in ("max", "min", "argmax", "argmin") and len(call) == 1:
        dims = []
    if dims and rank:
        kept = {d % rank for d in dims}
        out_numel = math.prod(s for i, s in enumerate(x.shape) if i not in kept)
    else:
        out_numel = 1
    out_size = {"argmax": 8, "argmin": 8, "all": 1, "any": 1, "count_nonzero": 8}.get(op)
    nbytes = x.nbytes + out_numel * (out_size or x.itemsize)
    if op in ("max", "min") and dims:
        nbytes += out_numel * 8  # the indices
    if op in ("var_mean", "std_mean"):
        nbytes += out_numel * x.itemsize
    k = _FLOPS.get(op, 1)
    return Cost(k * x.numel, nbytes, f"reduction {k}/elem", dtype_class(x.dtype))
