"""A matmul then a bias add, and ``F.linear`` (the GEMM adds the bias in its epilogue).

``x @ W.t() + b`` -> ``F.linear(x, W, b)``; ``x @ W + b`` -> ``F.linear(x, W.t(), b)``; ``W``
2-D, ``b`` of shape ``(out,)`` and the product's dtype.
"""

from __future__ import annotations

from typing import Any

from opscope.optimize.graph import Match, Miss, dtype, is_node, op_name, shape, vector_of
from opscope.optimize.patterns.base import Pattern


def match_linear(node: Any) -> Match | Miss | None:
    # anchor: matmul(x, W) + b
    if op_name(node) != "add" or len(node.args) != 2:
        return None
    for mm, b in (node.args, node.args[::-1]):
        if not is_node(mm) or op_name(mm) not in ("matmul", "mm") or len(mm.users) != 1:
            continue
        x, w = mm.args[:2]
        ws = shape(w)
        if ws is None or len(ws) != 2 or not vector_of(b, ws[1]) or len(shape(b) or ()) != 1:
            continue
        if shape(x) is None or dtype(b) != dtype(mm):
            continue
        nodes = [mm, node]
        weight_t: Any = None
        if is_node(w) and op_name(w) in ("t", "transpose") and len(w.users) == 1:
            ts = shape(w.args[0])
            if ts is not None and len(ts) == 2 and (op_name(w) == "t" or len(w.args) == 3):
                weight_t = w.args[0]
                nodes = [w, mm, node]
        return Match(
            "linear",
            nodes,
            node,
            {"input": x, "weight": weight_t, "weight_in_out": None if weight_t else w, "bias": b},
        )
    return None


def spell_linear(m: Match, sp: Any) -> str | None:
    x, b = sp.text("input"), sp.text("bias")
    if m.args["weight"] is not None:
        w = sp.text("weight")
    else:
        wt = sp.text("weight_in_out")
        w = None if wt is None else (f"{wt}.t()" if sp.is_simple(wt) else f"({wt}).t()")
    if x is None or w is None or b is None:
        return None
    return f"{sp.f}.linear({x}, {w}, {b})"


def rewrite_linear(graph: Any, a: dict[str, Any]) -> Any:
    import torch
    import torch.nn.functional as F

    weight = a["weight"]
    if weight is None:
        weight = graph.call_function(torch.t, (a["weight_in_out"],))
    return graph.call_function(F.linear, (a["input"], weight, a["bias"]))


LINEAR = Pattern(
    name="linear",
    calls="linear",
    builtin="torch.nn.functional.linear",
    written="`x @ W[.T] + b`",
    guards="`W` 2-D, `b` of shape `(out,)`",
    match=match_linear,
    rewrite=rewrite_linear,
    spell=spell_linear,
    finding=lambda d: d.get("pattern") == "bias",
)

__all__ = ["LINEAR"]
