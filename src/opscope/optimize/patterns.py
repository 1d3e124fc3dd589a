"""Graph capture and the unfused patterns that a fused built-in computes in one call.

Capture is :func:`torch.fx.symbolic_trace` with stack traces recorded: it keeps the ops as the
program spelled them (``x.pow(2)``, ``torch.rsqrt``, ``operator.mul``), each node's stack
trace names the user's file, line and function, and the graph is a ``GraphModule`` that can be
rewritten and called like the original.  Shapes and dtypes come from running the graph once on
the example inputs (``ShapeProp``).  A program that does not trace (data-dependent control
flow, a call symbolic tracing cannot follow) gets a :class:`Capture` with ``error`` set: no
rewrite is possible, compile candidates are still tried.

Matchers (one per pattern name, :data:`PATTERNS`), each with the guards under which the
built-in computes the same thing:

* ``rms_norm`` - ``x * rsqrt(mean(x^2, -1, keepdim) + eps) [* w]`` (``x*x``, ``x.pow(2)``,
  ``x**2``, ``torch.square``; ``/ sqrt(...)``; casts around it) -> ``torch.rms_norm``; the
  mean over the last dim only, ``eps`` a constant, ``w`` of shape ``(D,)``;
* ``layer_norm`` - ``(x - mean) / sqrt(var + eps) [* w] [+ b]`` with the biased variance
  (``((x-mean)^2).mean`` or ``var(unbiased=False)``) -> ``F.layer_norm``; last dim only;
* ``sdpa`` - ``softmax(q @ k^T * scale [+ mask], -1) @ v`` -> ``F.scaled_dot_product_attention``;
  the mask a tensor of q's dtype (or bool) that broadcasts to the scores without enlarging
  them, q/k/v at least 3-D;
* ``gelu_tanh`` - ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` -> ``F.gelu(x,
  approximate="tanh")``;
* ``silu`` - ``x * sigmoid(x)`` -> ``F.silu``;
* ``linear`` - ``x @ W [.T] + b`` with ``W`` 2-D and ``b`` of shape ``(out,)`` -> ``F.linear``.

Op names are the base names of :mod:`opscope.analysis.opsets` (the fusion finding's), so what
the finding reports and what is rewritten agree.  Every node a match replaces, but its output,
must be used only inside the match.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opscope.analysis.opsets import ELEMENTWISE, MATMULS, REDUCTIONS, SOFTMAX

PATTERNS = ("rms_norm", "layer_norm", "sdpa", "gelu_tanh", "silu", "linear")
BUILTINS = {
    "rms_norm": "torch.rms_norm",
    "layer_norm": "torch.nn.functional.layer_norm",
    "sdpa": "torch.nn.functional.scaled_dot_product_attention",
    "gelu_tanh": 'torch.nn.functional.gelu(approximate="tanh")',
    "silu": "torch.nn.functional.silu",
    "linear": "torch.nn.functional.linear",
}
_KNOWN = ELEMENTWISE | REDUCTIONS | MATMULS | SOFTMAX
_ALIASES = {
    "truediv": "div",
    "true_divide": "div",
    "divide": "div",
    "multiply": "mul",
    "subtract": "sub",
    "floordiv": "floordiv",
    "float": "to",
    "half": "to",
    "bfloat16": "to",
    "double": "to",
    "type": "to",
    "type_as": "to",
    "transpose": "transpose",
    "swapaxes": "transpose",
    "t": "t",
    "permute": "permute",
}
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
GELU_C = math.sqrt(2.0 / math.pi)


@dataclass(frozen=True)
class Location:
    """Where a node came from in the user's source: the innermost frame outside torch."""

    file: str
    line: int
    function: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function}


@dataclass
class Match:
    """One occurrence of a pattern: the nodes it replaces (``output`` last), the built-in's
    arguments (nodes or constants), and the source lines of its nodes."""

    pattern: str
    nodes: list[Any]
    output: Any
    args: dict[str, Any]
    locations: list[Location] = field(default_factory=list)

    @property
    def builtin(self) -> str:
        return BUILTINS[self.pattern]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "builtin": self.builtin,
            "nodes": [n.name for n in self.nodes],
            "locations": [loc.to_dict() for loc in self.locations],
        }


@dataclass
class Capture:
    """The traced graph (``gm``, None when tracing failed, with ``error``)."""

    gm: Any = None
    error: str | None = None
    method: str = "torch.fx.symbolic_trace"


# -- capture ------------------------------------------------------------------------------


def capture(target: Any, example_inputs: Sequence[Any]) -> Capture:
    """Trace ``target`` (a function or an ``nn.Module``) and propagate shapes on the inputs."""
    import torch
    import torch.fx
    from torch.fx.passes.shape_prop import ShapeProp

    class _Tracer(torch.fx.Tracer):
        # keep every frame: a function has no ``forward`` frame, which torch's filter wants
        def _filter_traceback_frames(self, summary: Any) -> Any:
            return summary

    tracer = _Tracer()
    tracer.record_stack_traces = True
    try:
        if isinstance(target, torch.nn.Module):
            graph = tracer.trace(target)
        else:
            concrete = _concrete_defaults(target, len(example_inputs))
            graph = tracer.trace(target, concrete_args=concrete or None)
        name = getattr(target, "__name__", None) or type(target).__name__
        gm = torch.fx.GraphModule(tracer.root, graph, name)
    except Exception as exc:
        return Capture(error=f"the target does not trace ({_one_line(exc)})")
    try:
        with torch.no_grad():
            ShapeProp(gm).propagate(*example_inputs)
    except Exception as exc:
        return Capture(error=f"the traced graph does not run on the inputs ({_one_line(exc)})")
    return Capture(gm=gm)


def _concrete_defaults(fn: Callable[..., Any], n_given: int) -> dict[str, Any]:
    """Parameters past the given inputs that have defaults: traced as the constants they are
    (``eps=1e-6`` stays a number, so a norm's epsilon is a constant of the graph)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for p in params[n_given:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is not p.empty:
            out[p.name] = p.default
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def location(node: Any) -> Location | None:
    """The innermost frame of ``node``'s stack trace that is not torch's own."""
    trace = getattr(node, "stack_trace", None) or node.meta.get("stack_trace")
    if not trace:
        return None
    best: Location | None = None
    for m in _FRAME.finditer(trace):
        f = m.group("file")
        if "/torch/" in f or "/site-packages/" in f or f.startswith("<"):
            continue
        best = Location(f, int(m.group("line")), m.group("func"))
    return best


# -- node helpers ---------------------------------------------------------------------------


def op_name(node: Any) -> str | None:
    """The base name of the op a node calls (``mul``, ``mean``, ``rsqrt``, ``matmul``), or None
    for placeholders, attributes and outputs."""
    if not hasattr(node, "op"):
        return None
    if node.op == "call_method":
        name = str(node.target)
    elif node.op == "call_function":
        t = node.target
        if t is getattr and len(node.args) > 1:
            attr = node.args[1]
            return {"mT": "mT", "T": "t", "shape": "shape"}.get(str(attr), "getattr")
        name = getattr(t, "__name__", str(t))
    else:
        return None
    name = name.strip("_") if name.startswith("__") else name
    name = _ALIASES.get(name, name)
    if name.endswith("_") and name[:-1] in _KNOWN:
        return None  # in place: not rewritten
    return name


def _arg(node: Any, i: int, key: str, default: Any = None) -> Any:
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(key, default)


def _is_node(x: Any) -> bool:
    return hasattr(x, "op") and hasattr(x, "users")


def shape(x: Any) -> tuple[int, ...] | None:
    tm = x.meta.get("tensor_meta") if _is_node(x) else None
    s = getattr(tm, "shape", None)
    return tuple(int(d) for d in s) if s is not None else None


def dtype(x: Any) -> Any:
    tm = x.meta.get("tensor_meta") if _is_node(x) else None
    return getattr(tm, "dtype", None)


def _const(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def _binary(node: Any, name: str) -> tuple[Any, Any] | None:
    if op_name(node) != name or len(node.args) < 2:
        return None
    return node.args[0], node.args[1]


def _mul_factors(node: Any, inner: set[Any]) -> list[Any]:
    """The factors of a product tree (``a * b * c`` in any grouping), descending only into
    ``mul`` nodes used once; those nodes are added to ``inner``."""
    out: list[Any] = []
    for a in node.args[:2]:
        if _is_node(a) and op_name(a) == "mul" and len(a.users) == 1 and len(a.args) == 2:
            inner.add(a)
            out += _mul_factors(a, inner)
        else:
            out.append(a)
    return out


def _dims_last(dim: Any, ndim: int) -> bool:
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and dim in (-1, ndim - 1)


def _square_of(node: Any) -> Any:
    """``x`` when ``node`` is ``x*x``, ``x**2``, ``x.pow(2)``, ``torch.square(x)``."""
    if not _is_node(node):
        return None
    name = op_name(node)
    if name == "mul" and len(node.args) == 2 and node.args[0] is node.args[1]:
        return node.args[0]
    if name == "pow" and _const(_arg(node, 1, "exponent")) == 2.0:
        return node.args[0]
    if name == "square":
        return node.args[0]
    return None


def _mean_last(node: Any) -> Any:
    """The input of ``mean(_, -1, keepdim=True)``."""
    if not _is_node(node) or op_name(node) != "mean":
        return None
    x = node.args[0]
    s = shape(x)
    if s is None or not _dims_last(_arg(node, 1, "dim"), len(s)):
        return None
    if not _arg(node, 2, "keepdim", False):
        return None
    return x


def _add_const(node: Any) -> tuple[Any, float] | None:
    """``(a, c)`` for ``a + c`` with ``c`` a number."""
    if not _is_node(node) or op_name(node) != "add" or len(node.args) != 2:
        return None
    a, b = node.args
    if _const(b) is not None and _is_node(a):
        return a, float(b)
    if _const(a) is not None and _is_node(b):
        return b, float(a)
    return None


def _strip_cast(x: Any, inner: set[Any]) -> Any:
    """Through a ``to``/``float`` cast used once (``inner`` collects it)."""
    while _is_node(x) and op_name(x) == "to" and len(x.users) == 1:
        inner.add(x)
        x = x.args[0]
    return x


def _vector_of(x: Any, d: int) -> bool:
    s = shape(x)
    return _is_node(x) and s is not None and s[-1:] == (d,) and math.prod(s) == d


def _same_function(a: Any, b: Any) -> bool:
    la, lb = location(a), location(b)
    if la is None or lb is None:
        return la is lb
    return (la.file, la.function) == (lb.file, lb.function)


def _absorb(top: Any, op: str, d: int, *, same_dtype: bool = False) -> tuple[Any, Any] | None:
    """``(vector, node)`` when ``top``'s only user is ``node = top <op> vector`` (either
    order) with a vector of shape (d,), in the same function (and of ``top``'s dtype with
    ``same_dtype``): a norm's weight or bias."""
    if len(top.users) != 1:
        return None
    (u,) = top.users
    if op_name(u) != op or len(u.args) != 2 or not _same_function(u, top):
        return None
    v = u.args[1] if u.args[0] is top else u.args[0]
    if not _vector_of(v, d) or (same_dtype and dtype(v) != dtype(top)):
        return None
    return v, u


def _closed(nodes: set[Any], output: Any) -> bool:
    """Every node but the output is used only inside the match."""
    return all(all(u in nodes for u in n.users) for n in nodes if n is not output)


# -- matchers -------------------------------------------------------------------------------


def _rms_norm(node: Any) -> Match | None:
    # anchor: rsqrt(ms + eps), or sqrt(ms + eps) under a division
    if op_name(node) not in ("rsqrt", "sqrt"):
        return None
    added = _add_const(node.args[0])
    if added is None:
        return None
    mean_node, eps = added
    sq = _mean_last(mean_node)
    x = _square_of(sq)
    if x is None:
        return None
    inner: set[Any] = {node, node.args[0], mean_node, sq}
    s = shape(x)
    if s is None:
        return None
    (scale_user,) = list(node.users) if len(node.users) == 1 else (None,)
    if scale_user is None:
        return None
    if op_name(node) == "rsqrt":
        if op_name(scale_user) != "mul" or len(scale_user.args) != 2:
            return None
        other = [a for a in scale_user.args if a is not node]
    else:
        if op_name(scale_user) != "div" or scale_user.args[1] is not node:
            return None
        other = [scale_user.args[0]]
    if len(other) != 1 or other[0] is not x:
        return None
    top = scale_user
    inner.add(top)
    weight = None
    # optionally times a weight of shape (D,), in the same function as the norm itself
    scaled = _absorb(top, "mul", s[-1], same_dtype=True)
    if scaled is not None:
        weight, top = scaled
        inner.add(top)
    if not _closed(inner, top):
        return None
    nodes = _ordered(inner)
    return Match(
        "rms_norm",
        nodes,
        top,
        {"input": x, "normalized_shape": (s[-1],), "weight": weight, "eps": eps},
    )


def _centred(node: Any) -> tuple[Any, Any] | None:
    """``(x, mean_node)`` for ``x - mean(x, -1, keepdim=True)``."""
    pair = _binary(node, "sub") if _is_node(node) else None
    if pair is None or not all(_is_node(p) for p in pair):
        return None
    x, mu = pair
    return (x, mu) if _mean_last(mu) is x else None


def _layer_norm(node: Any) -> Match | None:
    # anchor: (x - mean) / sqrt(var + eps), or (x - mean) * rsqrt(var + eps)
    name = op_name(node)
    if name not in ("div", "mul") or len(node.args) != 2:
        return None
    centred, denom = node.args
    if name == "mul" and _centred(centred) is None:
        centred, denom = denom, centred
    c = _centred(centred)
    if c is None or not _is_node(denom):
        return None
    x, mu = c
    s = shape(x)
    if s is None or op_name(denom) != ("sqrt" if name == "div" else "rsqrt"):
        return None
    added = _add_const(denom.args[0])
    if added is None:
        return None
    var_node, eps = added
    inner: set[Any] = {node, centred, mu, denom, denom.args[0], var_node}
    if op_name(var_node) == "var":
        if var_node.args[0] is not x or not _dims_last(_arg(var_node, 1, "dim"), len(s)):
            return None
        kw = var_node.kwargs
        biased = kw.get("unbiased") is False or kw.get("correction") == 0
        if not biased or not kw.get("keepdim"):
            return None
    else:
        sq = _mean_last(var_node)
        c2 = _square_of(sq)
        if c2 is None:
            return None
        inner.add(sq)
        if c2 is not centred:  # ``x - mean`` written twice
            cc = _centred(c2)
            if cc is None or cc[0] is not x:
                return None
            inner |= {c2, cc[1]}
    top = node
    weight = bias = None
    scaled = _absorb(top, "mul", s[-1])
    if scaled is not None:
        weight, top = scaled
        inner.add(top)
        shifted = _absorb(top, "add", s[-1])
        if shifted is not None:
            bias, top = shifted
            inner.add(top)
    if not _closed(inner, top):
        return None
    return Match(
        "layer_norm",
        _ordered(inner),
        top,
        {"input": x, "normalized_shape": (s[-1],), "weight": weight, "bias": bias, "eps": eps},
    )


def _transposed_last(node: Any) -> Any:
    """``k`` when ``node`` is ``k.transpose(-2, -1)``, ``k.mT``, ``k.transpose(-1, -2)``."""
    if not _is_node(node):
        return None
    name = op_name(node)
    k = node.args[0] if node.args else None
    s = shape(k) if _is_node(k) else None
    if s is None or len(s) < 2:
        return None
    if name == "mT":
        return k
    if name == "transpose" and len(node.args) == 3:
        dims = {d % len(s) for d in node.args[1:] if isinstance(d, int)}
        if dims == {len(s) - 2, len(s) - 1}:
            return k
    return None


def _sdpa(node: Any) -> Match | None:
    # anchor: softmax(scores, -1)
    if op_name(node) not in SOFTMAX or op_name(node) == "_softmax":
        return None
    scores = node.args[0]
    s = shape(scores)
    if s is None or len(s) < 3 or not _dims_last(_arg(node, 1, "dim"), len(s)):
        return None
    if _arg(node, 2, "dtype") is not None or len(node.users) != 1:
        return None
    (out,) = node.users
    if op_name(out) != "matmul" or out.args[0] is not node:
        return None
    v = out.args[1]
    inner: set[Any] = {node, out}
    mask = None
    cur = scores
    if op_name(cur) == "add" and len(cur.args) == 2:
        a, b = cur.args
        a_mm, b_mm = _scaled_scores(a), _scaled_scores(b)
        if a_mm is not None and _is_node(b):
            mask, cur = b, a
        elif b_mm is not None and _is_node(a):
            mask, cur = a, b
        else:
            return None
        inner.add(scores)
    found = _scaled_scores(cur)
    if found is None:
        return None
    q, k, scale, nodes = found
    inner |= nodes
    s = shape(cur) or s
    qs, ks, vs = shape(q), shape(k), shape(v)
    if qs is None or ks is None or vs is None or min(len(qs), len(ks), len(vs)) < 3:
        return None
    if dtype(q) != dtype(k) or dtype(k) != dtype(v):
        return None
    if mask is not None and not _mask_ok(mask, s, dtype(q)):
        return None
    if not _closed(inner, out):
        return None
    return Match(
        "sdpa",
        _ordered(inner),
        out,
        {"query": q, "key": k, "value": v, "attn_mask": mask, "scale": scale},
    )


def _mask_ok(mask: Any, scores_shape: tuple[int, ...], q_dtype: Any) -> bool:
    """A mask SDPA takes: q's dtype (or bool), broadcasting to the scores without growing them."""
    import torch

    ms = shape(mask)
    if ms is None or len(ms) > len(scores_shape):
        return False
    if dtype(mask) not in (q_dtype, torch.bool):
        return False
    try:
        out = torch.broadcast_shapes(ms, scores_shape)  # type: ignore[no-untyped-call]
        return tuple(out) == tuple(scores_shape)
    except RuntimeError:
        return False


def _is_sqrt_of_head_dim(node: Any, nodes: set[Any]) -> bool:
    """``math.sqrt(q.shape[-1])``, ``q.size(-1) ** 0.5``: the head dim's square root (the
    query is checked by the caller through the scores' shapes); its nodes join ``nodes``."""
    if not _is_node(node) or len(node.users) != 1:
        return False
    name = op_name(node)
    if (name == "sqrt" and len(node.args) == 1) or (
        name == "pow" and _const(_arg(node, 1, "exponent")) == 0.5
    ):
        dim = node.args[0]
    else:
        return False
    local = {node}
    if _is_node(dim) and op_name(dim) == "getitem" and dim.args[1] == -1:
        sh = dim.args[0]
        if not (_is_node(sh) and op_name(sh) == "shape" and len(sh.users) == 1):
            return False
        local |= {dim, sh}
    elif _is_node(dim) and op_name(dim) == "size" and _arg(dim, 1, "dim") == -1:
        local.add(dim)
    else:
        return False
    if len(dim.users) != 1:
        return False
    nodes |= local
    return True


def _scaled_scores(node: Any) -> tuple[Any, Any, float | None, set[Any]] | None:
    """``(q, k, scale, nodes)`` for ``q @ k^T``, ``(q @ k^T) * c``, ``(q @ k^T) / c``."""
    if not _is_node(node):
        return None
    nodes: set[Any] = {node}
    mm = node
    name = op_name(node)
    scale: float | None = 1.0
    if name in ("mul", "div") and len(node.args) == 2:
        a, b = node.args
        c = _const(b)
        if c is None and name == "mul":
            c, a = _const(a), b
        if name == "div" and c is None and _is_node(a) and _is_sqrt_of_head_dim(b, nodes):
            scale = None  # 1/sqrt(E): SDPA's default
        elif c is None or not _is_node(a) or c == 0:
            return None
        else:
            scale = c if name == "mul" else 1.0 / c
        mm = a
        nodes.add(mm)
    if op_name(mm) != "matmul" or len(mm.args) != 2:
        return None
    q, kt = mm.args
    k = _transposed_last(kt)
    if k is None or not _is_node(q) or len(kt.users) != 1:
        return None
    nodes.add(kt)
    return q, k, scale, nodes


def _gelu_tanh(node: Any) -> Match | None:
    # anchor: tanh(c * (x + 0.044715 * x^3))
    if op_name(node) != "tanh":
        return None
    inner: set[Any] = {node}
    arg = node.args[0]
    if op_name(arg) != "mul":
        return None
    inner.add(arg)
    fac = _mul_factors(arg, inner)
    consts = [c for c in map(_const, fac) if c is not None]
    rest = [f for f in fac if _const(f) is None]
    if len(rest) != 1 or not math.isclose(math.prod(consts or [1.0]), GELU_C, rel_tol=1e-4):
        return None
    inner_sum = rest[0]
    if op_name(inner_sum) != "add" or len(inner_sum.args) != 2:
        return None
    inner.add(inner_sum)
    a, b = inner_sum.args
    for x, cubic in ((a, b), (b, a)):
        if _is_node(x) and _is_node(cubic) and _cubic_term(cubic, x, inner):
            break
    else:
        return None
    # 0.5 * x * (1 + tanh(...))
    if len(node.users) != 1:
        return None
    (one_plus,) = node.users
    pair = _add_const(one_plus)
    if pair is None or pair[1] != 1.0:
        return None
    inner.add(one_plus)
    top = one_plus
    # climb the product tree above (1 + tanh)
    while len(top.users) == 1 and op_name(next(iter(top.users))) == "mul":
        top = next(iter(top.users))
        inner.add(top)
    if top is one_plus:
        return None
    fac_inner: set[Any] = set()
    fac = _mul_factors(top, fac_inner)
    consts = [c for c in map(_const, fac) if c is not None]
    rest = [f for f in fac if _const(f) is None]
    if sorted(id(r) for r in rest) != sorted((id(x), id(one_plus))):
        return None
    if not math.isclose(math.prod(consts or [1.0]), 0.5, rel_tol=1e-6):
        return None
    inner |= fac_inner
    if not _closed(inner, top):
        return None
    return Match("gelu_tanh", _ordered(inner), top, {"input": x})


def _cubic_term(node: Any, x: Any, inner: set[Any]) -> bool:
    """``0.044715 * x^3`` (``x**3``, ``pow(x, 3)``, ``x*x*x``)."""
    if op_name(node) != "mul":
        return False
    local: set[Any] = {node}
    fac = _mul_factors(node, local)
    consts = [c for c in map(_const, fac) if c is not None]
    rest = [f for f in fac if _const(f) is None]
    if not math.isclose(math.prod(consts or [1.0]), 0.044715, rel_tol=1e-4):
        return False
    cubes: list[Any] = []
    for r in rest:
        if op_name(r) == "pow" and r.args[0] is x and _const(_arg(r, 1, "exponent")) == 3.0:
            local.add(r)
            cubes.append(r)
        elif r is x:
            cubes.append(r)
        else:
            return False
    n_x = sum(3 if c is not x else 1 for c in cubes)
    if n_x != 3:
        return False
    inner |= local
    return True


def _silu(node: Any) -> Match | None:
    # anchor: x * sigmoid(x)
    if op_name(node) != "mul" or len(node.args) != 2:
        return None
    a, b = node.args
    for x, sig in ((a, b), (b, a)):
        if (
            _is_node(sig)
            and op_name(sig) == "sigmoid"
            and sig.args[0] is x
            and _is_node(x)
            and len(sig.users) == 1
        ):
            return Match("silu", [sig, node], node, {"input": x})
    return None


def _linear(node: Any) -> Match | None:
    # anchor: matmul(x, W) + b
    if op_name(node) != "add" or len(node.args) != 2:
        return None
    for mm, b in (node.args, node.args[::-1]):
        if not _is_node(mm) or op_name(mm) not in ("matmul", "mm") or len(mm.users) != 1:
            continue
        x, w = mm.args[:2]
        ws = shape(w)
        if ws is None or len(ws) != 2 or not _vector_of(b, ws[1]) or len(shape(b) or ()) != 1:
            continue
        if shape(x) is None or dtype(b) != dtype(mm):
            continue
        nodes = [mm, node]
        weight_t: Any = None
        if _is_node(w) and op_name(w) in ("t", "transpose") and len(w.users) == 1:
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


MATCHERS: dict[str, Callable[[Any], Match | None]] = {
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "sdpa": _sdpa,
    "gelu_tanh": _gelu_tanh,
    "silu": _silu,
    "linear": _linear,
}


def _ordered(nodes: set[Any]) -> list[Any]:
    if not nodes:
        return []
    graph = next(iter(nodes)).graph
    return [n for n in graph.nodes if n in nodes]


def find_matches(gm: Any, patterns: Sequence[str] = PATTERNS) -> list[Match]:
    """Every non-overlapping occurrence of ``patterns`` in ``gm``'s graph, in graph order (a
    node claimed by a match of an earlier pattern name is not matched again)."""
    unknown = [p for p in patterns if p not in MATCHERS]
    if unknown:
        raise ValueError(f"unknown pattern(s) {', '.join(unknown)}; known: {', '.join(PATTERNS)}")
    claimed: set[Any] = set()
    found: list[Match] = []
    for name in PATTERNS:
        if name not in patterns:
            continue
        for node in list(gm.graph.nodes):
            if node in claimed:
                continue
            m = MATCHERS[name](node)
            if m is None or any(n in claimed for n in m.nodes):
                continue
            claimed.update(m.nodes)
            m.locations = _locations(m.nodes)
            found.append(m)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    found.sort(key=lambda m: order[m.output])
    return found


def _locations(nodes: Sequence[Any]) -> list[Location]:
    seen: dict[Location, None] = {}
    for n in nodes:
        loc = location(n)
        if loc is not None:
            seen.setdefault(loc)
    return list(seen)


__all__ = [
    "BUILTINS",
    "PATTERNS",
    "Capture",
    "Location",
    "Match",
    "capture",
    "find_matches",
    "location",
    "op_name",
]
