"""Attention written out, and ``F.scaled_dot_product_attention``.

``softmax(q @ k^T * scale [mask], -1) [dropout] @ v`` where

* the scale is any spelling of a constant: ``* c``, ``/ c``, ``/ math.sqrt(k.size(-1))``,
  ``* (1.0 / math.sqrt(q.size(-1)))``, ``q.shape[-1] ** 0.5`` (the head dim's root is SDPA's
  default and is left out);
* the mask is ``masked_fill(m, float("-inf"))`` (SDPA's boolean ``attn_mask`` is its
  negation; when ``m`` is the upper triangle of a square score matrix, as nanoGPT's
  ``self.bias[:, :, :T, :T] == 0`` is, ``is_causal=True``) or an additive bias (``+ mask``,
  SDPA's float ``attn_mask``), of q's dtype (or bool), broadcasting to the scores without
  enlarging them;
* a dropout of the probabilities (``nn.Dropout`` or ``F.dropout``) is SDPA's ``dropout_p``,
  zero when not training;
* ``k^T`` is ``k.transpose(-2, -1)`` (either order, or the last two dims by number),
  ``k.mT``; q, k, v at least 3-D and of one dtype.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from opscope.optimize.graph import (
    Match,
    Miss,
    arg,
    closed,
    const,
    dims_last,
    dtype,
    is_node,
    only_user,
    op_name,
    ordered,
    shape,
    value,
)
from opscope.optimize.patterns.base import Pattern

_MATMUL = ("matmul", "bmm")


def _transposed_last(node: Any) -> Any:
    """``k`` when ``node`` is ``k.transpose(-2, -1)``, ``k.mT``, ``k.transpose(2, 3)`` of a
    4-D ``k``, ``k.permute`` swapping the last two."""
    if not is_node(node):
        return None
    name = op_name(node)
    k = node.args[0] if node.args else None
    s = shape(k) if is_node(k) else None
    if s is None or len(s) < 2:
        return None
    if name == "mT":
        return k
    if name == "transpose" and len(node.args) == 3:
        dims = {d % len(s) for d in node.args[1:] if isinstance(d, int)}
        if dims == {len(s) - 2, len(s) - 1}:
            return k
    if name == "permute":
        perm = node.args[1] if len(node.args) == 2 else node.args[1:]
        want = (*range(len(s) - 2), len(s) - 1, len(s) - 2)
        if isinstance(perm, (list, tuple)) and tuple(p % len(s) for p in perm) == want:
            return k
    return None


def _head_dim_root(node: Any, nodes: set[Any]) -> Any:
    """The tensor whose last dim's square root ``node`` is (``math.sqrt(q.shape[-1])``,
    ``k.size(-1) ** 0.5``, in a symbolic trace), its nodes joining ``nodes``; else None."""
    if not is_node(node) or len(node.users) != 1:
        return None
    name = op_name(node)
    if not (
        (name == "sqrt" and len(node.args) == 1)
        or (name == "pow" and const(arg(node, 1, "exponent")) == 0.5)
    ):
        return None
    dim = node.args[0]
    local = {node}
    if is_node(dim) and op_name(dim) == "getitem" and dim.args[1] == -1:
        sh = dim.args[0]
        if not (is_node(sh) and op_name(sh) == "shape" and len(sh.users) == 1):
            return None
        local |= {dim, sh}
        tensor = sh.args[0]
    elif is_node(dim) and op_name(dim) == "size" and arg(dim, 1, "dim") == -1:
        local.add(dim)
        tensor = dim.args[0]
    else:
        return None
    if len(dim.users) != 1:
        return None
    nodes |= local
    return tensor


def _scaled_scores(node: Any) -> tuple[Any, Any, Any, set[Any], Any] | str | None:
    """``(q, k, scale, nodes, scale_at)`` for ``q @ k^T`` times or over a scale; ``scale``
    is a number, or ``("head_dim", tensor)`` for the root of a tensor's last dim; a reason
    string when the scores are a matmul that does not fit; None when they are no matmul."""
    if not is_node(node):
        return None
    nodes: set[Any] = {node}
    mm = node
    name = op_name(node)
    scale: Any = 1.0
    scale_at: Any = None
    if name in ("mul", "div") and len(node.args) == 2:
        a, b = node.args
        if name == "mul" and not (is_node(a) and op_name(a) in _MATMUL):
            a, b = b, a
        pos = 1 if node.args[1] is b else 0
        c = const(b)
        if c is not None:
            if c == 0 or not is_node(a):
                return "the scores are scaled by zero"
            scale, scale_at = (c if name == "mul" else 1.0 / c), (node, pos)
        elif name == "div" and (t := _head_dim_root(b, nodes)) is not None:
            scale = ("head_dim", t)
        elif (
            name == "mul"
            and is_node(b)
            and op_name(b) == "div"
            and const(b.args[0]) == 1.0
            and len(b.users) == 1
            and (t := _head_dim_root(b.args[1], nodes)) is not None
        ):
            nodes.add(b)
            scale = ("head_dim", t)
        else:
            if is_node(a) and op_name(a) in _MATMUL:
                return "the scores are scaled by a tensor, not a constant"
            return None
        mm = a
        nodes.add(mm)
    if not is_node(mm) or op_name(mm) not in _MATMUL or len(mm.args) != 2:
        return None
    q, kt = mm.args
    k = _transposed_last(kt)
    if k is None or not is_node(q):
        return "the scores are not q @ k^T (k's last two dims are not swapped)"
    if len(kt.users) != 1 or len(mm.users) != 1:
        return "k^T or q @ k^T is also used outside the attention"
    nodes.add(kt)
    return q, k, scale, nodes, scale_at


def _op_after_scores(node: Any, depth: int = 4) -> str | None:
    """``node``'s op when a ``q @ k^T`` is below it, reached through its inputs within a few
    ops (``torch.where(causal, scores, min)``); else None."""
    cur = node
    for _ in range(depth):
        if not is_node(cur) or not cur.args:
            return None
        if op_name(cur) in _MATMUL and len(cur.args) == 2 and _transposed_last(cur.args[1]):
            return op_name(node) if cur is not node else None
        nxt = [a for a in cur.args if is_node(a) and a.op != "placeholder"]
        if not nxt:
            return None
        cur = nxt[0] if op_name(cur) != "where" or len(nxt) < 2 else nxt[1]
    return None


def _mask_ok(mask: Any, scores_shape: tuple[int, ...], q_dtype: Any) -> str | None:
    """None when SDPA takes the mask: q's dtype (or bool), broadcasting to the scores without
    growing them; else why not."""
    import torch

    ms = shape(mask)
    if ms is None:
        return "the mask has no known shape"
    if len(ms) > len(scores_shape):
        return "the mask has more dims than the scores"
    if dtype(mask) not in (q_dtype, torch.bool):
        return f"the mask's dtype {dtype(mask)} is neither bool nor the query's {q_dtype}"
    try:
        out = torch.broadcast_shapes(ms, scores_shape)  # type: ignore[no-untyped-call]
    except RuntimeError:
        return "the mask does not broadcast to the scores"
    if tuple(out) != tuple(scores_shape):
        return f"the mask {ms} makes the scores {tuple(out)} larger than {scores_shape}"
    return None


def _causal(mask: Any, scores_shape: tuple[int, ...]) -> bool:
    """Whether a boolean fill mask (True = masked) is the upper triangle of square scores."""
    import torch

    m = value(mask)
    L, S = scores_shape[-2:]
    if m is None or L != S or tuple(m.shape[-2:]) != (L, S):
        return False
    tri = torch.ones(L, S, dtype=torch.bool, device=m.device).triu(1)
    return bool(torch.equal(m.reshape(-1, L, S), tri.expand(m.numel() // (L * S), L, S)))


def match_sdpa(node: Any) -> Match | Miss | None:
    # anchor: softmax(scores, -1)
    if op_name(node) != "softmax" or not node.args or not is_node(node.args[0]):
        return None
    scores = node.args[0]
    inner: set[Any] = {node}
    mask = None
    kind = None
    cur = scores
    if op_name(cur) == "masked_fill" and len(cur.args) >= 2:
        fill = arg(cur, 2, "value")
        mask, kind = arg(cur, 1, "mask"), "fill"
        inner.add(cur)
        base = cur.args[0]
        if not (const(fill) is not None and math.isinf(fill) and fill < 0):
            if isinstance(_scaled_scores(base), tuple):
                return Miss("sdpa", node, f"the mask fills {fill!r}, not -inf")
            return None
        cur = base
    elif op_name(cur) == "add" and len(cur.args) == 2:
        a, b = cur.args
        if isinstance(_scaled_scores(a), tuple) and is_node(b):
            mask, cur = b, a
        elif isinstance(_scaled_scores(b), tuple) and is_node(a):
            mask, cur = a, b
        else:
            return None
        kind = "add"
        inner.add(scores)
    found = _scaled_scores(cur)
    if found is None:
        between = _op_after_scores(cur)
        if between is None:
            return None
        return Miss(
            "sdpa",
            node,
            f"{between} between q @ k^T and the softmax is neither a constant scale, an "
            "additive mask nor masked_fill(m, -inf)",
        )
    if isinstance(found, str):
        return Miss("sdpa", node, found)
    q, k, scale, nodes, scale_at = found
    inner |= nodes
    s = shape(cur)
    if s is None or len(s) < 3:
        return Miss("sdpa", node, "the scores have fewer than 3 dims (no batch)")
    if not dims_last(arg(node, 1, "dim"), len(s)):
        return Miss("sdpa", node, f"the softmax is over dim {arg(node, 1, 'dim')!r}, not the last")
    if arg(node, 2, "dtype") is not None:
        return Miss("sdpa", node, "the softmax casts to another dtype")
    out = only_user(node)
    drop = None
    if out is not None and op_name(out) == "dropout" and out.args and out.args[0] is node:
        drop, out = out, only_user(out)
        inner.add(drop)
    if out is None or op_name(out) not in _MATMUL or out.args[0] is not (drop or node):
        return Miss("sdpa", node, "the probabilities are not multiplied by v (p @ v)")
    inner.add(out)
    v = out.args[1]
    qs, ks, vs = shape(q), shape(k), shape(v)
    if qs is None or ks is None or vs is None or min(len(qs), len(ks), len(vs)) < 3:
        return Miss("sdpa", node, "q, k or v has fewer than 3 dims")
    if not (dtype(q) == dtype(k) == dtype(v)):
        return Miss("sdpa", node, "q, k and v are not of one dtype")
    if isinstance(scale, tuple):
        if scale[1] not in (q, k):
            return Miss("sdpa", node, "the scale is the root of another tensor's last dim")
        scale = None
    elif math.isclose(scale, 1.0 / math.sqrt(qs[-1]), rel_tol=1e-6):
        scale = None  # SDPA's default
    causal = False
    if mask is not None:
        why = _mask_ok(mask, s, dtype(q))
        if why:
            return Miss("sdpa", node, why)
        if kind == "fill" and dtype(mask) is not None and str(dtype(mask)) != "torch.bool":
            return Miss("sdpa", node, "masked_fill's mask is not bool")
        causal = kind == "fill" and _causal(mask, s)
    if not closed(inner, out):
        names = sorted(
            n.name for n in inner if n is not out and any(u not in inner for u in n.users)
        )
        return Miss("sdpa", node, f"an intermediate ({', '.join(names)}) is also used elsewhere")
    args = {
        "query": q,
        "key": k,
        "value": v,
        "attn_mask": None if causal else mask,
        "mask_kind": None if causal else kind,
        "is_causal": causal,
        "scale": scale,
        "dropout": drop,
    }
    at = {"scale": scale_at} if scale is not None and scale_at is not None else {}
    return Match("sdpa", ordered(inner), out, args, at=at)


# -- the source spelling and the FX rewrite -------------------------------------------------


def _negated(sp: Any) -> str | None:
    """The source of ``~mask`` for the fill mask (``a == 0`` becomes ``a != 0``)."""
    e = sp.expr_of("attn_mask")
    text = sp.text("attn_mask")
    if text is None:
        return None
    if isinstance(e, ast.Compare) and len(e.ops) == 1:
        flip = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}.get(type(e.ops[0]))
        if flip is not None:
            new = ast.Compare(left=e.left, ops=[flip()], comparators=e.comparators)
            return str(sp.unparse(new))
    return f"~{text}" if sp.is_simple(text) else f"~({text})"


def _dropout_text(m: Match, sp: Any) -> str | None:
    """``dropout_p=...``: the module's ``p`` when it trains, else 0."""
    drop = m.args["dropout"]
    e = sp.expr(drop)
    if not isinstance(e, ast.Call):
        return None
    if sp.is_module_call(e):
        callee = sp.unparse(e.func)
        return f"{callee}.p if {callee}.training else 0.0"
    given = {k.arg: k.value for k in e.keywords if k.arg}
    p = e.args[1] if len(e.args) > 1 else given.get("p")
    training = e.args[2] if len(e.args) > 2 else given.get("training")
    p_text = sp.unparse(p) if p is not None else "0.5"
    if training is None or (isinstance(training, ast.Constant) and training.value is True):
        return p_text
    return f"{p_text} if {sp.unparse(training)} else 0.0"


def spell_sdpa(m: Match, sp: Any) -> str | None:
    a = m.args
    parts = [sp.text("query"), sp.text("key"), sp.text("value")]
    if a["is_causal"]:
        parts.append("is_causal=True")
    elif a["attn_mask"] is not None:
        mask = _negated(sp) if a["mask_kind"] == "fill" else sp.text("attn_mask")
        parts.append(f"attn_mask={mask}" if mask else None)
    if a["dropout"] is not None:
        d = _dropout_text(m, sp)
        parts.append(f"dropout_p={d}" if d else None)
    if a["scale"] is not None:
        parts.append(f"scale={_scale_text(m, sp)}")
    if any(p is None for p in parts):
        return None
    return f"{sp.f}.scaled_dot_product_attention({', '.join(str(p) for p in parts)})"


def _scale_text(m: Match, sp: Any) -> str:
    at = m.at.get("scale")
    text = sp.text("scale")
    if at is None or text is None:
        return repr(m.args["scale"])
    if op_name(at[0]) == "div":
        return f"1 / {text}" if sp.is_simple(text) else f"1 / ({text})"
    return str(text)


def _dropout_p(drop: Any) -> float:
    if drop.op == "call_module":
        mod = drop.graph.owning_module.get_submodule(str(drop.target))
        return float(mod.p) if mod.training else 0.0
    p = arg(drop, 1, "p", 0.5)
    training = arg(drop, 2, "training", True)
    return float(p) if training else 0.0


def rewrite_sdpa(graph: Any, a: dict[str, Any]) -> Any:
    import torch
    import torch.nn.functional as F

    mask = a["attn_mask"]
    if mask is not None and a["mask_kind"] == "fill":
        mask = graph.call_function(torch.logical_not, (mask,))
    kwargs: dict[str, Any] = {"attn_mask": mask, "scale": a["scale"]}
    if a["is_causal"]:
        kwargs["is_causal"] = True
    if a["dropout"] is not None:
        kwargs["dropout_p"] = _dropout_p(a["dropout"])
    return graph.call_function(
        F.scaled_dot_product_attention, (a["query"], a["key"], a["value"]), kwargs
    )


SDPA = Pattern(
    name="sdpa",
    calls="scaled_dot_product_attention",
    builtin="torch.nn.functional.scaled_dot_product_attention",
    written="`softmax(q @ k^T * scale [+ bias] [masked_fill(m, -inf)], -1) [dropout] @ v`, the "
    "scale as `* c`, `/ math.sqrt(k.size(-1))`, `* (1.0 / math.sqrt(...))`",
    guards="softmax over the last dim; a constant scale; a mask of q's dtype (or bool) that "
    "broadcasts to the scores without enlarging them (`is_causal=True` for a triangular fill "
    "mask of square scores); q, k, v at least 3-D, one dtype",
    match=match_sdpa,
    rewrite=rewrite_sdpa,
    spell=spell_sdpa,
    finding=lambda d: d.get("pattern") == "attention",
)

__all__ = ["SDPA"]
