"""The graph vocabulary the pattern matchers share: what a node computes (its op's base name,
shape, dtype, source location) and the small structural helpers (a product's factors, a mean
over the last dim, a weight absorbed after a norm).

Nodes come from ``torch.fx`` symbolic tracing or from a Dynamo graph (:mod:`.capture`); both
record the ops as the program spelled them (``operator.mul``, ``x.pow``, ``torch.rsqrt``,
``F.softmax``), with the user's stack trace, and :func:`op_name` folds their spellings onto the
base names of :mod:`opscope.analysis.opsets`.  A match (:class:`Match`) is what a pattern
replaces; a near-miss (:class:`Miss`) is where a pattern's first op was found but a later step
differed, with the step that did.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opscope.analysis.opsets import ELEMENTWISE, MATMULS, REDUCTIONS, SOFTMAX

_KNOWN = ELEMENTWISE | REDUCTIONS | MATMULS | SOFTMAX
ALIASES = {
    "truediv": "div",
    "true_divide": "div",
    "divide": "div",
    "multiply": "mul",
    "subtract": "sub",
    "float": "to",
    "half": "to",
    "bfloat16": "to",
    "double": "to",
    "type": "to",
    "type_as": "to",
    "swapaxes": "transpose",
    "swapdims": "transpose",
    "inv": "invert",
    "bitwise_not": "invert",
    "logical_not": "invert",
    "negative": "neg",
}
# the class of a module called as a leaf of an FX trace -> the op it computes
MODULE_OPS = {"Dropout": "dropout", "Softmax": "softmax", "GELU": "gelu", "SiLU": "silu"}
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')


@dataclass(frozen=True)
class Location:
    """Where a node came from in the user's source: the innermost frame outside torch."""

    file: str
    line: int
    function: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function}

    def where(self) -> str:
        from pathlib import Path

        return f"{Path(self.file).name}:{self.line} ({self.function})"


@dataclass
class Match:
    """One occurrence of a pattern: the nodes it replaces (``output`` last), the built-in's
    arguments (nodes or constants), and the source lines of its nodes."""

    pattern: str
    nodes: list[Any]
    output: Any
    args: dict[str, Any]
    locations: list[Location] = field(default_factory=list)
    at: dict[str, tuple[Any, int | str]] = field(default_factory=dict)
    """Where a constant argument is read in the graph: ``(node, position)`` (an index of its
    arguments or a keyword), so its source spelling can be found (``self.eps``)."""
    builtin: str = ""  # the pattern's built-in (set by the scan)

    def where(self) -> str:
        loc = location(self.output) or (self.locations[0] if self.locations else None)
        return loc.where() if loc else "?"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "builtin": self.builtin,
            "nodes": [n.name for n in self.nodes],
            "locations": [loc.to_dict() for loc in self.locations],
        }


@dataclass
class Miss:
    """A pattern's first op was found at ``node`` but a later step differed (``reason``)."""

    pattern: str
    node: Any
    reason: str

    def where(self) -> str:
        loc = location(self.node)
        return loc.where() if loc else self.node.name


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


def op_name(node: Any) -> str | None:
    """The base name of the op a node calls (``mul``, ``mean``, ``rsqrt``, ``matmul``), or None
    for placeholders, attributes, outputs and modules that are not one op."""
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
    elif node.op == "call_module":
        root = getattr(node.graph, "owning_module", None)
        try:
            mod = root.get_submodule(str(node.target)) if root is not None else None
        except AttributeError:
            mod = None
        return MODULE_OPS.get(type(mod).__name__) if mod is not None else None
    else:
        return None
    name = name.strip("_") if name.startswith("__") else name
    name = ALIASES.get(name, name)
    if name.endswith("_") and name[:-1] in _KNOWN:
        return None  # in place: not rewritten
    return name


def arg(node: Any, i: int, key: str, default: Any = None) -> Any:
    """Positional argument ``i`` of a call node, or its keyword ``key``."""
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(key, default)


def is_node(x: Any) -> bool:
    return hasattr(x, "op") and hasattr(x, "users")


def shape(x: Any) -> tuple[int, ...] | None:
    tm = x.meta.get("tensor_meta") if is_node(x) else None
    s = getattr(tm, "shape", None)
    try:
        return tuple(int(d) for d in s) if s is not None else None
    except TypeError:  # a symbolic size
        return None


def dtype(x: Any) -> Any:
    tm = x.meta.get("tensor_meta") if is_node(x) else None
    return getattr(tm, "dtype", None)


def value(x: Any) -> Any:
    """The tensor a node held on the example inputs, where capture kept it (bool masks)."""
    return x.meta.get("opscope_value") if is_node(x) else None


def const(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


def users(node: Any) -> list[Any]:
    return list(node.users)


def only_user(node: Any) -> Any:
    us = list(node.users)
    return us[0] if len(us) == 1 else None


def mul_factors(node: Any, inner: set[Any]) -> list[Any]:
    """The factors of a product tree (``a * b * c`` in any grouping), descending only into
    ``mul`` nodes used once; those nodes are added to ``inner``."""
    out: list[Any] = []
    for a in node.args[:2]:
        if is_node(a) and op_name(a) == "mul" and len(a.users) == 1 and len(a.args) == 2:
            inner.add(a)
            out += mul_factors(a, inner)
        else:
            out.append(a)
    return out


def product_split(fac: Sequence[Any]) -> tuple[float, list[Any]]:
    """(the product of the constant factors, the other factors)."""
    consts = [c for c in map(const, fac) if c is not None]
    return math.prod(consts or [1.0]), [f for f in fac if const(f) is None]


def dims_last(dim: Any, ndim: int) -> bool:
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and dim in (-1, ndim - 1)


def square_of(node: Any) -> Any:
    """``x`` when ``node`` is ``x*x``, ``x**2``, ``x.pow(2)``, ``torch.square(x)``."""
    if not is_node(node):
        return None
    name = op_name(node)
    if name == "mul" and len(node.args) == 2 and node.args[0] is node.args[1]:
        return node.args[0]
    if name == "pow" and const(arg(node, 1, "exponent")) == 2.0:
        return node.args[0]
    if name == "square":
        return node.args[0]
    return None


def mean_last(node: Any) -> tuple[Any, str | None]:
    """``(x, None)`` for ``mean(x, -1, keepdim=True)``; ``(None, why)`` for another mean;
    ``(None, None)`` when ``node`` is no mean."""
    if not is_node(node) or op_name(node) != "mean":
        return None, None
    x = node.args[0]
    s = shape(x)
    if s is None:
        return None, "the mean's input has no known shape"
    if not dims_last(arg(node, 1, "dim"), len(s)):
        return None, f"the mean is over dim {arg(node, 1, 'dim')!r}, not the last dim only"
    if not arg(node, 2, "keepdim", False):
        return None, "the mean does not keep its dim (keepdim=False)"
    return x, None


def add_const(node: Any) -> tuple[Any, float] | None:
    """``(a, c)`` for ``a + c`` with ``c`` a number."""
    if not is_node(node) or op_name(node) != "add" or len(node.args) != 2:
        return None
    a, b = node.args
    if const(b) is not None and is_node(a):
        return a, float(b)
    if const(a) is not None and is_node(b):
        return b, float(a)
    return None


def is_cast(node: Any) -> bool:
    """A dtype cast (``.to(dtype)``, ``.float()``, ``.type_as(y)``), not a device move."""
    if not is_node(node) or op_name(node) != "to":
        return False
    return all(not isinstance(a, str) for a in (*node.args[1:], *node.kwargs.values()))


def vector_of(x: Any, d: int) -> bool:
    s = shape(x)
    return is_node(x) and s is not None and s[-1:] == (d,) and math.prod(s) == d


def same_function(a: Any, b: Any) -> bool:
    la, lb = location(a), location(b)
    if la is None or lb is None:
        return la is lb
    return (la.file, la.function) == (lb.file, lb.function)


def absorb(top: Any, op: str, d: int, *, same_dtype: bool = False) -> tuple[Any, Any] | None:
    """``(vector, node)`` when ``top``'s only user is ``node = top <op> vector`` (either
    order) with a vector of shape (d,), in the same function (and of ``top``'s dtype with
    ``same_dtype``): a norm's weight or bias."""
    u = only_user(top)
    if u is None or op_name(u) != op or len(u.args) != 2 or not same_function(u, top):
        return None
    v = u.args[1] if u.args[0] is top else u.args[0]
    if not vector_of(v, d) or (same_dtype and dtype(v) != dtype(top)):
        return None
    return v, u


def closed(nodes: set[Any], output: Any) -> bool:
    """Every node but the output is used only inside the match."""
    return all(all(u in nodes for u in n.users) for n in nodes if n is not output)


def ordered(nodes: set[Any]) -> list[Any]:
    if not nodes:
        return []
    graph = next(iter(nodes)).graph
    return [n for n in graph.nodes if n in nodes]


def locations(nodes: Sequence[Any]) -> list[Location]:
    seen: dict[Location, None] = {}
    for n in nodes:
        loc = location(n)
        if loc is not None:
            seen.setdefault(loc)
    return list(seen)


__all__ = [
    "ALIASES",
    "Location",
    "Match",
    "Miss",
    "absorb",
    "add_const",
    "arg",
    "closed",
    "const",
    "dims_last",
    "dtype",
    "is_cast",
    "is_node",
    "location",
    "locations",
    "mean_last",
    "mul_factors",
    "op_name",
    "ordered",
    "product_split",
    "shape",
    "square_of",
    "value",
    "vector_of",
]
