"""Data movement without arithmetic: embedding lookups and their backward, ``index_select``,
``gather``.  Bytes: the indices read, the gathered rows read and written once."""

from __future__ import annotations

import math

from opscope.analysis.costs._common import Call, Cost, CostError, dtype_class


def embedding(call: Call) -> Cost:
    """``embedding(weight, indices, ...)``: one row of ``weight`` per index, copied out."""
    w, idx = call.tensor(0), call.tensor(1)
    if len(w.shape) != 2:
        raise CostError("embedding weight must be 2-D")
    rows = idx.numel * w.shape[1]
    return Cost(0, idx.nbytes + 2 * rows * w.itemsize, "embedding gather", dtype_class(w.dtype))


def embedding_backward(call: Call) -> Cost:
    """``embedding_dense_backward(grad_output, indices, num_weights, padding_idx, ...)``:
    one add per gradient element into a zeroed ``num_weights × D`` table."""
    g, idx = call.tensor(0), call.tensor(1)
    num_weights = call.int_(2)
    dim = g.shape[-1] if g.shape else 1
    nbytes = g.nbytes + idx.nbytes + num_weights * dim * g.itemsize
    return Cost(g.numel, nbytes, "embedding_backward scatter-add", dtype_class(g.dtype))


def index_select(call: Call) -> Cost:
    """``index_select(self, dim, index)``."""
    x, idx = call.tensor(0), call.tensor(2)
    dim = call.int_(1) % max(len(x.shape), 1)
    out_numel = math.prod(idx.numel if i == dim else s for i, s in enumerate(x.shape))
    return Cost(0, idx.nbytes + 2 * out_numel * x.itemsize, "gather", dtype_class(x.dtype))


def gather(call: Call) -> Cost:
    """``gather(self, dim, index)``: the result has the index's shape."""
    x, idx = call.tensor(0), call.tensor(2)
    return Cost(0, idx.nbytes + 2 * idx.numel * x.itemsize, "gather", dtype_class(x.dtype))
