"""The op families, named once.

The fusion finding, the dtype finding and the cost model (and the rewrites ``opscope
optimize`` will make) agree on which ops are matrix multiplies, reductions and elementwise
work.  Names are *base* names: no ``aten::`` namespace, no ``.overload`` suffix, no trailing
``_`` of an in-place variant (``aten::add_.Tensor`` is ``add``; ``findings.fusion.base_name``).
The critical path, the idle-gap finding and the job's straggler notes agree on which host
ops load data (:func:`is_data_loading`, over full names).
"""

from __future__ import annotations

# Matrix multiplies: their cost model is a GEMM, their dtype decides the tensor-core path.
MATMULS = frozenset(
    ("mm", "addmm", "_addmm_activation", "bmm", "baddbmm", "addbmm", "matmul", "linear", "mv")
)

# Reductions over dims.
REDUCTIONS = frozenset(
    (
        *("sum", "mean", "nansum", "nanmean", "amax", "amin", "max", "min", "argmax", "argmin"),
        *("prod", "norm", "linalg_vector_norm", "var", "std", "var_mean", "std_mean"),
        *("logsumexp", "all", "any", "count_nonzero"),
    )
)

# Elementwise work (and the casts and copies that ride along in an unfused chain).
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

SOFTMAX = frozenset(("softmax", "_softmax"))

# Data-loading host ops: names holding one of these in any case (lower-cased substrings;
# ``DataLoader``, a ``DataLoaderIter``, ``record_function("dataloader")``, a
# ``.../dataloader.py(...)`` frame, an iterator's ``_next_data``).  Full op names, not base
# names.
DATA_LOADING = ("dataloader", "data_loader", "_next_data")


def is_data_loading(name: str) -> bool:
    """Whether a host op's name marks data loading (:data:`DATA_LOADING`, in any case)."""
    low = name.lower()
    return any(w in low for w in DATA_LOADING)


__all__ = ["DATA_LOADING", "ELEMENTWISE", "MATMULS", "REDUCTIONS", "SOFTMAX", "is_data_loading"]
