"""Activations written out: GELU (tanh and erf forms) and SiLU (alone or as SwiGLU's gate).

* ``gelu_tanh`` - ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` (GPT-2's
  ``new_gelu``; ``x**3``, ``torch.pow(x, 3.0)``, ``x*x*x``; the factors in any order) ->
  ``F.gelu(x, approximate="tanh")``;
* ``gelu_erf`` - ``0.5 * x * (1 + erf(x / sqrt(2)))`` -> ``F.gelu(x)``;
* ``silu`` - ``x * sigmoid(x)`` in any product (``a * sigmoid(a) * b``, SwiGLU's gate) ->
  ``F.silu(x)`` times the other factors.
"""

from __future__ import annotations

import math
from typing import Any

from opscope.optimize.graph import (
    Match,
    Miss,
    add_const,
    arg,
    closed,
    const,
    is_node,
    mul_factors,
    only_user,
    op_name,
    ordered,
    product_split,
)
from opscope.optimize.patterns.base import Pattern

GELU_C = math.sqrt(2.0 / math.pi)


def _cubic_term(node: Any, x: Any, inner: set[Any]) -> str | None:
    """None when ``node`` is ``0.044715 * x^3`` (its nodes join ``inner``), else why not."""
    if op_name(node) != "mul":
        return "the inner sum is not x + c * x^3"
    local: set[Any] = {node}
    c, rest = product_split(mul_factors(node, local))
    if not math.isclose(c, 0.044715, rel_tol=1e-4):
        return f"the cubic coefficient is {c:.6g}, not 0.044715"
    n_x = 0
    for r in rest:
        if op_name(r) == "pow" and r.args[0] is x and const(arg(r, 1, "exponent")) is not None:
            local.add(r)
            n_x += int(const(arg(r, 1, "exponent")) or 0)
        elif r is x:
            n_x += 1
        else:
            return "the cubic term is not of the same x"
    if n_x != 3:
        return f"the term is x^{n_x}, not x^3"
    inner |= local
    return None


def _half_x_times(one_plus: Any, x: Any, inner: set[Any]) -> tuple[Any, str | None]:
    """``(top, None)`` when ``one_plus`` is multiplied by ``0.5 * x`` in a product tree whose
    top is ``top`` (its nodes join ``inner``); ``(None, why)`` else."""
    top = one_plus
    while (u := only_user(top)) is not None and op_name(u) == "mul":
        top = u
        inner.add(top)
    if top is one_plus:
        return None, "(1 + ...) is not multiplied by 0.5 * x"
    fac_inner: set[Any] = set()
    c, rest = product_split(mul_factors(top, fac_inner))
    if sorted(id(r) for r in rest) != sorted((id(x), id(one_plus))):
        return None, "(1 + ...) is multiplied by something other than 0.5 * x"
    if not math.isclose(c, 0.5, rel_tol=1e-6):
        return None, f"the outer factor is {c:.6g}, not 0.5"
    inner |= fac_inner
    return top, None


def match_gelu_tanh(node: Any) -> Match | Miss | None:
    # anchor: tanh(c * (x + 0.044715 * x^3))
    if op_name(node) != "tanh" or not node.args:
        return None
    inner: set[Any] = {node}
    inside = node.args[0]
    if op_name(inside) != "mul":
        return None
    inner.add(inside)
    c, rest = product_split(mul_factors(inside, inner))
    if len(rest) != 1 or op_name(rest[0]) != "add" or len(rest[0].args) != 2:
        return None
    if not math.isclose(c, GELU_C, rel_tol=1e-4):
        return Miss("gelu_tanh", node, f"the tanh's factor is {c:.6g}, not sqrt(2/pi)")
    inner_sum = rest[0]
    inner.add(inner_sum)
    a, b = inner_sum.args
    why = "the inner sum is not x + 0.044715 * x^3"
    for x, cubic in ((a, b), (b, a)):
        if is_node(x) and is_node(cubic):
            why_here = _cubic_term(cubic, x, inner)
            if why_here is None:
                break
            why = why_here
    else:
        return Miss("gelu_tanh", node, why)
    return _gelu_outside("gelu_tanh", node, x, inner)


def _gelu_outside(pattern: str, node: Any, x: Any, inner: set[Any]) -> Match | Miss:
    """The rest of a GELU around its ``tanh``/``erf`` ``node``: ``0.5 * x * (1 + node)``."""
    one_plus = only_user(node)
    pair = add_const(one_plus) if one_plus is not None else None
    if pair is None or pair[1] != 1.0:
        return Miss(pattern, node, f"the {op_name(node)} is not inside (1 + {op_name(node)}(...))")
    inner.add(one_plus)
    top, why = _half_x_times(one_plus, x, inner)
    if top is None:
        return Miss(pattern, node, str(why))
    if not closed(inner, top):
        return Miss(pattern, node, "an intermediate is also used outside the GELU")
    return Match(pattern, ordered(inner), top, {"input": x})


def match_gelu_erf(node: Any) -> Match | Miss | None:
    # anchor: erf(x / sqrt(2)) or erf(x * (1 / sqrt(2)))
    if op_name(node) != "erf" or not node.args or not is_node(node.args[0]):
        return None
    inside = node.args[0]
    name = op_name(inside)
    if name not in ("mul", "div") or len(inside.args) != 2:
        return None
    a, b = inside.args
    if name == "mul" and const(a) is not None:
        a, b = b, a
    c = const(b)
    if c is None or not is_node(a) or c == 0:
        return None
    factor = c if name == "mul" else 1.0 / c
    if not math.isclose(factor, 1.0 / math.sqrt(2.0), rel_tol=1e-4):
        return Miss("gelu_erf", node, f"the erf's argument is x * {factor:.6g}, not x / sqrt(2)")
    return _gelu_outside("gelu_erf", node, a, {node, inside})


def match_silu(node: Any) -> Match | Miss | None:
    # anchor: sigmoid(x), used once, in a product that also has x as a factor
    if op_name(node) != "sigmoid" or not node.args or not is_node(node.args[0]):
        return None
    x = node.args[0]
    top = only_user(node)
    while top is not None and op_name(top) == "mul" and len(top.args) == 2:
        inner: set[Any] = {top}
        fac = mul_factors(top, inner)
        if node in fac and x in fac:
            break
        top = only_user(top)
    else:
        return None
    others = list(fac)
    others.remove(node)
    others.remove(x)
    inner.add(node)
    if not closed(inner, top):
        return Miss("silu", node, "a partial product is also used outside the SiLU")
    return Match("silu", ordered(inner), top, {"input": x, "factors": others})


def spell_gelu(approximate: bool) -> Any:
    def spell(m: Match, sp: Any) -> str | None:
        x = sp.text("input")
        if x is None:
            return None
        return f'{sp.f}.gelu({x}, approximate="tanh")' if approximate else f"{sp.f}.gelu({x})"

    return spell


def spell_silu(m: Match, sp: Any) -> str | None:
    x = sp.text("input")
    others = [sp.node_text(f) if is_node(f) else repr(f) for f in m.args["factors"]]
    if x is None or any(o is None for o in others):
        return None
    text = f"{sp.f}.silu({x})"
    for o in others:
        text += f" * {o}" if sp.is_simple(str(o)) else f" * ({o})"
    return text


def rewrite_gelu(approximate: bool) -> Any:
    def rewrite(graph: Any, a: dict[str, Any]) -> Any:
        import torch.nn.functional as F

        kw = {"approximate": "tanh"} if approximate else {}
        return graph.call_function(F.gelu, (a["input"],), kw)

    return rewrite


def rewrite_silu(graph: Any, a: dict[str, Any]) -> Any:
    import operator

    import torch.nn.functional as F

    out = graph.call_function(F.silu, (a["input"],))
    for f in a["factors"]:
        out = graph.call_function(operator.mul, (out, f))
    return out


def _gelu_finding(tanh: bool) -> Any:
    def named(d: dict[str, Any]) -> bool:
        b = str(d.get("builtin") or "")
        return "gelu" in b and (("tanh" in b) == tanh)

    return named


GELU_TANH = Pattern(
    name="gelu_tanh",
    calls="gelu",
    builtin='torch.nn.functional.gelu(approximate="tanh")',
    written="`0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` (`x**3`, `torch.pow(x, "
    "3.0)`, `x*x*x`)",
    guards="the constants to 1e-4",
    match=match_gelu_tanh,
    rewrite=rewrite_gelu(True),
    spell=spell_gelu(True),
    finding=_gelu_finding(True),
)
GELU_ERF = Pattern(
    name="gelu_erf",
    calls="gelu",
    builtin="torch.nn.functional.gelu",
    written="`0.5 * x * (1 + erf(x / sqrt(2)))`",
    guards="the constants to 1e-4",
    match=match_gelu_erf,
    rewrite=rewrite_gelu(False),
    spell=spell_gelu(False),
    finding=_gelu_finding(False),
)
SILU = Pattern(
    name="silu",
    calls="silu",
    builtin="torch.nn.functional.silu",
    written="`x * sigmoid(x)`, also inside a product (`a * sigmoid(a) * b`, SwiGLU)",
    guards="the same `x`; the sigmoid used once",
    match=match_silu,
    rewrite=rewrite_silu,
    spell=spell_silu,
    finding=lambda d: "silu" in str(d.get("builtin") or ""),
)

__all__ = ["GELU_ERF", "GELU_TANH", "SILU"]
