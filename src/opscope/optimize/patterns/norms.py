"""RMSNorm and LayerNorm written out, and the fused norms that compute them.

* ``rms_norm`` - ``x * rsqrt(mean(x^2, -1, keepdim) + eps) [* w]`` (``x*x``, ``x.pow(2)``,
  ``x**2``, ``torch.square``; ``x / sqrt(...)``; the input cast to float32 and the result
  cast back, as Hugging Face's ``LlamaRMSNorm`` does) -> ``torch.rms_norm``;
* ``layer_norm`` - ``(x - mean) / sqrt(var + eps) [* w] [+ b]`` with the biased variance
  (``((x - mean)^2).mean``, ``var(unbiased=False)``, ``var(correction=0)``), the input
  reassigned or not -> ``F.layer_norm``.

Near-misses say which step differed: a mean over another dim, an unbiased variance, the
epsilon outside the square root, a weight of another dtype, an intermediate used elsewhere.
"""

from __future__ import annotations

from typing import Any

from opscope.optimize.graph import (
    Match,
    Miss,
    absorb,
    add_const,
    arg,
    closed,
    dims_last,
    dtype,
    is_cast,
    is_node,
    mean_last,
    only_user,
    op_name,
    ordered,
    same_function,
    shape,
    square_of,
)
from opscope.optimize.patterns.base import Pattern

_EPS_OUTSIDE = "the epsilon is added outside the square root ({}): the built-in computes {}"


def _centred(node: Any) -> tuple[Any, Any] | None:
    """``(x, mean_node)`` for ``x - mean(x, -1, keepdim=True)``."""
    if not is_node(node) or op_name(node) != "sub" or len(node.args) != 2:
        return None
    x, mu = node.args
    if not (is_node(x) and is_node(mu)):
        return None
    return (x, mu) if mean_last(mu)[0] is x else None


def _cast_in_out(x: Any, top: Any, inner: set[Any], uses: set[Any]) -> tuple[Any, Any]:
    """Through a cast of the input (``x.float()``, ``x.to(torch.float32)``) whose result
    is cast back to the input's dtype: ``(input, top)`` with both casts in the match; else
    the cast stays outside and ``x`` is the input."""
    if not is_cast(x) or not is_node(x.args[0]) or not same_function(x, top):
        return x, top
    back = only_user(top)
    if back is None or not is_cast(back) or dtype(back) != dtype(x.args[0]):
        return x, top
    if not same_function(back, top):
        return x, top
    if not set(x.users) <= uses:
        return x, top
    inner |= {x, back}
    return x.args[0], back


# -- rms_norm --------------------------------------------------------------------------------


def match_rms_norm(node: Any) -> Match | Miss | None:
    # anchor: rsqrt(ms + eps), or sqrt(ms + eps) under a division
    name = op_name(node)
    if name not in ("rsqrt", "sqrt") or not node.args:
        return None
    under = node.args[0]
    added = add_const(under)
    mean_node = added[0] if added else under
    sq, why = mean_last(mean_node)
    x = square_of(sq)
    if x is None:
        return None if why is None else Miss("rms_norm", node, why)
    if _centred(x) is not None:
        return None  # a layer norm's variance: the layer norm's matcher explains it
    if added is None:
        user = only_user(node)
        if user is not None and add_const(user) is not None:
            return Miss(
                "rms_norm",
                node,
                _EPS_OUTSIDE.format("sqrt(mean(x²)) + eps", "x / sqrt(mean(x²) + eps)"),
            )
        return Miss("rms_norm", node, "no epsilon is added under the square root")
    eps = added[1]
    inner: set[Any] = {node, under, mean_node, sq}
    s = shape(x)
    if s is None:
        return None
    scale_user = only_user(node)
    if scale_user is None:
        return Miss("rms_norm", node, f"the {name} is used more than once")
    if name == "rsqrt":
        ok = op_name(scale_user) == "mul" and len(scale_user.args) == 2 and x in scale_user.args
    else:
        ok = op_name(scale_user) == "div" and scale_user.args[:2] == (x, node)
    if not ok:
        return Miss(
            "rms_norm",
            node,
            f"the {name} does not scale the same x whose square was averaged "
            f"({op_name(scale_user)} of other values)",
        )
    top = scale_user
    inner.add(top)
    x_in, top = _cast_in_out(x, top, inner, {sq, scale_user})
    weight = None
    scaled = absorb(top, "mul", s[-1], same_dtype=True)
    if scaled is not None:
        weight, top = scaled
        inner.add(top)
    if not closed(inner, top):
        return Miss("rms_norm", node, _used_outside(inner, top))
    return Match(
        "rms_norm",
        ordered(inner),
        top,
        {"input": x_in, "normalized_shape": (s[-1],), "weight": weight, "eps": eps},
        at={"eps": (under, 1 if under.args[0] is mean_node else 0)},
    )


def _used_outside(inner: set[Any], top: Any) -> str:
    names = sorted(n.name for n in inner if n is not top and any(u not in inner for u in n.users))
    return f"an intermediate ({', '.join(names)}) is also used outside the pattern"


def _shape_text(m: Match, sp: Any, key: str = "input") -> str:
    x = sp.text(key)
    w = sp.text("weight") if m.args.get("weight") is not None else None
    if sp.is_simple(x):
        return f"({x}.shape[-1],)"
    if w is not None and sp.is_simple(w):
        return f"{w}.shape"
    return f"({m.args['normalized_shape'][0]},)"


def _eps_text(m: Match, sp: Any) -> str:
    return str(sp.text("eps") or repr(m.args["eps"]))


def spell_rms_norm(m: Match, sp: Any) -> str | None:
    w = sp.text("weight") if m.args["weight"] is not None else "None"
    x = sp.text("input")
    if x is None or w is None:
        return None
    return f"torch.rms_norm({x}, {_shape_text(m, sp)}, {w}, {_eps_text(m, sp)})"


def rewrite_rms_norm(graph: Any, a: dict[str, Any]) -> Any:
    import torch

    return graph.call_function(
        torch.rms_norm, (a["input"], tuple(a["normalized_shape"]), a["weight"], a["eps"])
    )


RMS_NORM = Pattern(
    name="rms_norm",
    calls="rms_norm",
    builtin="torch.rms_norm",
    written="`x * rsqrt(mean(x^2, -1, keepdim) + eps) [* w]` (`x*x`, `pow(2)`, `**2`, `/ sqrt`, "
    "the input cast to float32 and back)",
    guards="the mean over the last dim only; `eps` a constant, under the root; `w` of shape "
    "`(D,)` and `x`'s dtype, in the same function",
    match=match_rms_norm,
    rewrite=rewrite_rms_norm,
    spell=spell_rms_norm,
    finding=lambda d: "rms_norm" in str(d.get("builtin") or ""),
)


# -- layer_norm ------------------------------------------------------------------------------


def _variance(var_node: Any, x: Any, centred: Any, inner: set[Any]) -> str | None:
    """None when ``var_node`` is the biased variance of ``x`` over the last dim (its nodes
    join ``inner``); else why not."""
    s = shape(x) or ()
    name = op_name(var_node)
    if name == "var":
        if var_node.args[0] is not x:
            return "the variance is not of the normalised input"
        if not dims_last(arg(var_node, 1, "dim"), len(s)):
            return f"the variance is over dim {arg(var_node, 1, 'dim')!r}, not the last dim only"
        kw = var_node.kwargs
        unbiased = arg(var_node, 2, "unbiased", None)
        biased = unbiased is False or kw.get("correction") in (0, 0.0)
        if not biased:
            return (
                "the variance is unbiased (torch.var divides by D - 1 unless unbiased=False or "
                "correction=0); the built-in divides by D"
            )
        if not kw.get("keepdim"):
            return "the variance does not keep its dim (keepdim=False)"
        return None
    if name == "std":
        return "the denominator is the standard deviation, not sqrt(var + eps)"
    sq, why = mean_last(var_node)
    if why:
        return why
    c2 = square_of(sq)
    if c2 is None:
        return "the variance is not the mean of (x - mean)²"
    inner.add(sq)
    if c2 is not centred:  # ``x - mean`` written twice
        cc = _centred(c2)
        if cc is None or cc[0] is not x:
            return "the variance is not of the same x - mean"
        inner |= {c2, cc[1]}
    return None


def match_layer_norm(node: Any) -> Match | Miss | None:
    # anchor: (x - mean) / sqrt(var + eps), or (x - mean) * rsqrt(var + eps)
    name = op_name(node)
    if name not in ("div", "mul") or len(node.args) != 2:
        return None
    centred, denom = node.args
    if name == "mul" and _centred(centred) is None:
        centred, denom = denom, centred
    c = _centred(centred)
    if c is None or not is_node(denom):
        return None
    x, mu = c
    s = shape(x)
    if s is None:
        return None
    want = "sqrt" if name == "div" else "rsqrt"
    if op_name(denom) == "add" and add_const(denom) is not None:
        root = add_const(denom)[0]  # type: ignore[index]
        if op_name(root) in ("sqrt", "std"):
            return Miss(
                "layer_norm",
                node,
                _EPS_OUTSIDE.format(
                    "sqrt(var) + eps" if op_name(root) == "sqrt" else "std + eps",
                    "(x - mean) / sqrt(var + eps)",
                ),
            )
    if op_name(denom) == "std":
        return Miss("layer_norm", node, "the denominator is the standard deviation, no epsilon")
    if op_name(denom) != want:
        return None
    added = add_const(denom.args[0])
    if added is None:
        return Miss("layer_norm", node, f"no epsilon is added under the {want}")
    var_node, eps = added
    inner: set[Any] = {node, centred, mu, denom, denom.args[0], var_node}
    why = _variance(var_node, x, centred, inner)
    if why:
        return Miss("layer_norm", node, why)
    top = node
    x_in, top = _cast_in_out(x, top, inner, {n for n in inner if is_node(n)})
    weight = bias = None
    scaled = absorb(top, "mul", s[-1])
    if scaled is not None:
        weight, top = scaled
        inner.add(top)
        shifted = absorb(top, "add", s[-1])
        if shifted is not None:
            bias, top = shifted
            inner.add(top)
    if not closed(inner, top):
        return Miss("layer_norm", node, _used_outside(inner, top))
    under = denom.args[0]
    return Match(
        "layer_norm",
        ordered(inner),
        top,
        {
            "input": x_in,
            "normalized_shape": (s[-1],),
            "weight": weight,
            "bias": bias,
            "eps": eps,
        },
        at={"eps": (under, 1 if under.args[0] is var_node else 0)},
    )


def spell_layer_norm(m: Match, sp: Any) -> str | None:
    x = sp.text("input")
    w = sp.text("weight") if m.args["weight"] is not None else "None"
    b = sp.text("bias") if m.args["bias"] is not None else "None"
    if x is None or w is None or b is None:
        return None
    return f"{sp.f}.layer_norm({x}, {_shape_text(m, sp)}, {w}, {b}, {_eps_text(m, sp)})"


def rewrite_layer_norm(graph: Any, a: dict[str, Any]) -> Any:
    import torch.nn.functional as F

    return graph.call_function(
        F.layer_norm,
        (a["input"], tuple(a["normalized_shape"]), a["weight"], a["bias"], a["eps"]),
    )


LAYER_NORM = Pattern(
    name="layer_norm",
    calls="layer_norm",
    builtin="torch.nn.functional.layer_norm",
    written="`(x - mean) / sqrt(var + eps) [* w] [+ b]`, biased variance (`((x-mean)^2).mean`, "
    "`var(unbiased=False)`), the input reassigned or not",
    guards="the last dim only; `eps` under the root; `w`, `b` of shape `(D,)`",
    match=match_layer_norm,
    rewrite=rewrite_layer_norm,
    spell=spell_layer_norm,
    finding=lambda d: "layer_norm" in str(d.get("builtin") or ""),
)

__all__ = ["LAYER_NORM", "RMS_NORM"]
