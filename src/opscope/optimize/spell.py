"""From a match in the graph to an edit of the source: which expression computes the match,
how each of the built-in's arguments is spelled there, which statements the edit removes.

The match's output node came from a statement (its stack trace's line); the expression in
that statement that computes it is found by *unifying* the graph with the source: an op node
against an expression that calls the same op (``a * b``, ``torch.rsqrt(a)``, ``a.pow(2)``,
``F.softmax(a, dim=-1)``, ``self.attn_dropout(a)`` for an inlined ``nn.Dropout``), operand by
operand; a name the statement reads goes on through the assignment that bound it, when that
assignment is one of the statements before it in the same block.  Where the graph reaches
an argument of the match (a node outside it, or a constant: ``eps``), the source expression
at that place *is* the argument's spelling - the call's own arguments, so a helper
``norm(self, x, weight)`` spells the weight ``weight``, whichever attribute each call passed.

The edit replaces just that expression with the built-in's call, and removes the statements
whose values only fed it (their comments are kept).  An argument is spelled only if every
name in it means at the edited expression what it meant where the pattern read it (``x`` in
``x = (x - u) / torch.sqrt(s + eps)`` is read before it is reassigned, and the statement that
reassigns it is removed).  What cannot be spelled so gets no edit, with the reason; the
printed patch is then proven by running it (:mod:`.verify`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.optimize.graph import ALIASES, Match, is_node, location, op_name

_BINOPS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.Pow: "pow",
    ast.MatMult: "matmul",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
}
_UNARY = {ast.USub: "neg", ast.Invert: "invert", ast.UAdd: "pos"}
_COMPARE = {
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
}
_ATTRS = {"T": "t", "mT": "mT", "shape": "shape"}
_COMMUTATIVE = ("add", "mul")
_SIMPLE = re.compile(r"[A-Za-z_][A-Za-z_0-9]*(\.[A-Za-z_][A-Za-z_0-9]*)*")
_NAMESPACES = frozenset(("torch", "math", "F", "nn", "functional"))
_COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


@dataclass
class Edit:
    """Lines ``first..last`` (1-based, inclusive) of a file become ``lines``."""

    first: int
    last: int
    lines: list[str]


@dataclass
class Hunk:
    """The edits of one rewrite in one file (``first``/``last``: the lines they span)."""

    file: str
    pattern: str
    edits: list[Edit] = field(default_factory=list)
    call: str = ""
    matches: int = 1  # the matches this edit rewrites (a helper called twice: 2)

    @property
    def first(self) -> int:
        return min(e.first for e in self.edits)

    @property
    def last(self) -> int:
        return max(e.last for e in self.edits)


class Source:
    """A file's text, syntax tree and imports."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.text = Path(file).read_text(encoding="utf-8")
        self.lines = self.text.splitlines()
        self.tree = ast.parse(self.text)
        self.imported: set[str] = set()  # names bound by an import
        self.aliases: dict[str, str] = {}  # from x import y as z: z -> y
        functional = False
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.imported.add((a.asname or a.name).split(".")[0])
                    if a.name == "torch.nn.functional" and a.asname == "F":
                        functional = True
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    self.imported.add(a.asname or a.name)
                    self.aliases[a.asname or a.name] = a.name
                    if (node.module, a.name, a.asname) in (
                        ("torch.nn", "functional", "F"),
                        ("torch.nn", "functional", None),
                    ):
                        functional = functional or a.asname == "F"
        self.f = "F" if functional else "torch.nn.functional"

    def function(self, line: int, name: str) -> ast.AST | None:
        """The innermost function called ``name`` spanning ``line``."""
        best = None
        for node in ast.walk(self.tree):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name == name
                and node.lineno <= line <= (node.end_lineno or node.lineno)
            ):
                best = node
        return best

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ast.unparse(node)

    def is_namespace(self, e: ast.expr) -> bool:
        """Whether ``e`` names a module (``torch``, ``F``, ``torch.nn.functional``)."""
        while isinstance(e, ast.Attribute):
            e = e.value
        return isinstance(e, ast.Name) and (e.id in self.imported or e.id in _NAMESPACES)


def _blocks(fn: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list (body, orelse, handlers' bodies) inside ``fn``."""
    out: list[list[ast.stmt]] = []
    for node in ast.walk(fn):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                out.append(body)
    return out


def _in_block(fn: ast.AST, line: int) -> tuple[list[ast.stmt], int] | None:
    """(the innermost block holding a simple statement that spans ``line``, its index)."""
    best: tuple[list[ast.stmt], int] | None = None
    for block in _blocks(fn):
        for i, s in enumerate(block):
            if isinstance(s, _COMPOUND):
                continue
            if s.lineno <= line <= (s.end_lineno or s.lineno) and (
                best is None or s.lineno >= best[0][best[1]].lineno
            ):
                best = (block, i)
    return best


@dataclass
class _Op:
    name: str
    operands: list[ast.expr]
    keywords: dict[str, ast.expr]
    module_call: list[ast.expr] | None = None  # the arguments, when a module may be called


def _norm(name: str) -> str:
    name = name.strip("_") if name.startswith("__") else name
    return ALIASES.get(name, name)


class Unifier:
    """One match against the statements of its block; see the module docstring."""

    def __init__(self, src: Source, match: Match, all_nodes: list[Any]) -> None:
        self.src = src
        self.m = match
        self.inside = set(match.nodes)
        self.all_nodes = all_nodes
        self.exprs: dict[Any, tuple[ast.expr, int]] = {}
        self.leaves: dict[tuple[Any, Any], tuple[ast.expr, int]] = {}
        self.leaf_of: dict[Any, tuple[ast.expr, int]] = {}
        self.inlined: set[int] = set()  # statements whose value was followed
        self.consumed: set[int] = set()  # id() of the ast.Name loads followed
        self.spelled: list[tuple[ast.expr, int]] = []
        self.block: list[ast.stmt] = []
        self.first = 0
        self.out_idx = 0
        self.fn: ast.AST | None = None

    # -- locating -------------------------------------------------------------------------

    def locate(self) -> str | None:
        """The block and statements of the match, or why there are none."""
        locs = self.m.locations
        if not locs:
            return "no source location recorded"
        if len({(loc.file, loc.function) for loc in locs}) != 1:
            return "the pattern spans several functions: rewrite it by hand"
        out_loc = location(self.m.output) or locs[-1]
        if out_loc.function == "<lambda>":
            return (
                f"written in a lambda ({Path(out_loc.file).name}:{out_loc.line}): rewrite by hand"
            )
        fn = self.src.function(out_loc.line, out_loc.function)
        if fn is None:
            return f"function {out_loc.function} not found in {Path(out_loc.file).name}"
        self.fn = fn
        found = _in_block(fn, out_loc.line)
        if found is None:
            return f"line {out_loc.line} is not a simple statement"
        self.block, self.out_idx = found
        idx = []
        for loc in locs:
            here = _in_block(fn, loc.line)
            if here is None or here[0] is not self.block:
                return "the pattern's lines are in different blocks (a loop or a branch between)"
            idx.append(here[1])
        self.first = min(idx)
        if max(idx) > self.out_idx:
            return "the pattern's result is computed before its last line"
        return None

    # -- names ----------------------------------------------------------------------------

    def _assignment(self, name: str, before: int) -> tuple[int, ast.expr | None] | None:
        """The last statement of the span before ``before`` that binds ``name``: (index, its
        value when a plain ``name = value``); None when bound before the span."""
        for i in range(before - 1, self.first - 1, -1):
            s = self.block[i]
            bound = _bound(s)
            if name in bound:
                if isinstance(s, (ast.Assign, ast.AnnAssign)) and bound == {name}:
                    targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                    if len(targets) == 1 and isinstance(targets[0], ast.Name):
                        return i, s.value
                return i, None
        return None

    def _version(self, name: str, before: int, kept_only: bool, removed: set[int]) -> int:
        for i in range(before - 1, self.first - 1, -1):
            if kept_only and i in removed:
                continue
            if name in _bound(self.block[i]):
                return i
        return -1

    # -- unification ----------------------------------------------------------------------

    def _op(self, e: ast.expr) -> _Op | None:
        if isinstance(e, ast.BinOp) and type(e.op) in _BINOPS:
            return _Op(_BINOPS[type(e.op)], [e.left, e.right], {})
        if isinstance(e, ast.UnaryOp) and type(e.op) in _UNARY:
            return _Op(_UNARY[type(e.op)], [e.operand], {})
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _COMPARE:
            return _Op(_COMPARE[type(e.ops[0])], [e.left, e.comparators[0]], {})
        if isinstance(e, ast.Subscript):
            return _Op("getitem", [e.value, e.slice], {})
        if isinstance(e, ast.Attribute) and e.attr in _ATTRS:
            return _Op(_ATTRS[e.attr], [e.value], {})
        if isinstance(e, ast.Call) and not any(isinstance(a, ast.Starred) for a in e.args):
            kw = {k.arg: k.value for k in e.keywords if k.arg}
            f = e.func
            if isinstance(f, ast.Attribute):
                if self.src.is_namespace(f.value):
                    return _Op(_norm(f.attr), list(e.args), kw)
                return _Op(_norm(f.attr), [f.value, *e.args], kw, module_call=list(e.args))
            if isinstance(f, ast.Name):
                return _Op(_norm(self.src.aliases.get(f.id, f.id)), list(e.args), kw)
        return None

    def unify(self, g: Any, e: ast.expr, at: int) -> bool:
        """Whether match node ``g`` is what ``e`` (in statement ``at``) computes."""
        if isinstance(e, ast.Name):
            a = self._assignment(e.id, at)
            if a is None or a[1] is None:
                return False
            if not self.unify(g, a[1], a[0]):
                return False
            self.inlined.add(a[0])
            self.consumed.add(id(e))
            return True
        op = self._op(e)
        if op is None:
            return False
        gname = op_name(g)
        operands = op.operands
        if gname != op.name:
            if gname == "dropout" and op.module_call is not None:
                operands = op.module_call  # an nn.Dropout, called
            else:
                return False
        saved = self._save()
        if self._args(g, operands, op.keywords, at):
            self.exprs[g] = (e, at)
            return True
        self._restore(saved)
        if gname in _COMMUTATIVE and len(operands) == 2:
            if self._args(g, operands[::-1], op.keywords, at):
                self.exprs[g] = (e, at)
                return True
            self._restore(saved)
        return False

    def _args(self, g: Any, operands: list[ast.expr], kw: dict[str, ast.expr], at: int) -> bool:
        for i, ga in enumerate(g.args):
            ea = operands[i] if i < len(operands) else None
            if ea is None:
                if is_node(ga):
                    return False
                continue
            if not self._arg(g, i, ga, ea, at):
                return False
        for k, ga in g.kwargs.items():
            ea = kw.get(k)
            if ea is None:
                if is_node(ga):
                    return False
                continue
            if not self._arg(g, k, ga, ea, at):
                return False
        return True

    def _arg(self, parent: Any, pos: Any, ga: Any, ea: ast.expr, at: int) -> bool:
        if is_node(ga) and ga in self.inside:
            return self.unify(ga, ea, at)
        self.leaves[(parent, pos)] = (ea, at)
        if is_node(ga):
            self.leaf_of.setdefault(ga, (ea, at))
        return True

    def _save(self) -> tuple[Any, ...]:
        return (
            dict(self.exprs),
            dict(self.leaves),
            dict(self.leaf_of),
            set(self.inlined),
            set(self.consumed),
        )

    def _restore(self, saved: tuple[Any, ...]) -> None:
        self.exprs, self.leaves, self.leaf_of, self.inlined, self.consumed = (
            dict(saved[0]),
            dict(saved[1]),
            dict(saved[2]),
            set(saved[3]),
            set(saved[4]),
        )

    def output_expr(self) -> ast.expr | None:
        """The expression of the last statement that computes the match's output."""
        stmt = self.block[self.out_idx]
        for e in ast.walk(stmt):
            if isinstance(e, ast.expr) and not isinstance(e, ast.Name):
                saved = self._save()
                if self.unify(self.m.output, e, self.out_idx):
                    missing = [n for n in self.m.nodes if n not in self.exprs]
                    if not missing:
                        return e
                self._restore(saved)
        return None

    # -- spelling (the interface a pattern's ``spell`` sees) ------------------------------

    @property
    def f(self) -> str:
        return self.src.f

    def _leaf(self, key: str) -> tuple[ast.expr, int] | None:
        pos = self.m.at.get(key)
        if pos is not None and (pos[0], pos[1]) in self.leaves:
            return self.leaves[(pos[0], pos[1])]
        v = self.m.args.get(key)
        if is_node(v):
            return self.leaf_of.get(v)
        return None

    def text(self, key: str) -> str | None:
        got = self._leaf(key)
        if got is None:
            return None
        self.spelled.append(got)
        return self.src.segment(got[0])

    def node_text(self, node: Any) -> str | None:
        got = self.leaf_of.get(node)
        if got is None:
            return None
        self.spelled.append(got)
        return self.src.segment(got[0])

    def expr_of(self, key: str) -> ast.expr | None:
        got = self._leaf(key)
        return None if got is None else got[0]

    def expr(self, node: Any) -> ast.expr | None:
        got = self.exprs.get(node)
        return None if got is None else got[0]

    def unparse(self, e: ast.AST) -> str:
        return self.src.segment(e) if hasattr(e, "lineno") else ast.unparse(e)

    def is_module_call(self, call: ast.Call) -> bool:
        return isinstance(call.func, (ast.Attribute, ast.Name)) and not self.src.is_namespace(
            call.func.value if isinstance(call.func, ast.Attribute) else call.func
        )

    @staticmethod
    def is_simple(text: str | None) -> bool:
        return bool(text) and _SIMPLE.fullmatch(str(text)) is not None

    # -- the edit -------------------------------------------------------------------------

    def removable(self) -> set[int]:
        """The statements before the last whose values only fed the match."""
        out: set[int] = set()
        for i in sorted(self.inlined):
            if i == self.out_idx:
                continue
            s = self.block[i]
            (name,) = _bound(s)
            if self._loads_after(i, name) <= self.consumed and _alone_on_lines(self.block, i):
                out.add(i)
        return out

    def _loads_after(self, i: int, name: str) -> set[int]:
        """id() of every load of ``name`` that may read what statement ``i`` bound."""
        loads: set[int] = set()
        for s in self.block[i + 1 :]:
            if isinstance(s, (ast.Assign, ast.AnnAssign)) and name in _bound(s):
                value = s.value
                if value is not None:
                    loads |= _loads(value, name)
                if not isinstance(s, _COMPOUND) and _bound(s) == {name}:
                    return loads
                continue
            loads |= _loads(s, name)
        assert self.fn is not None
        end = self.block[-1].end_lineno or self.block[-1].lineno
        for n in ast.walk(self.fn):
            if (
                isinstance(n, ast.Name)
                and n.id == name
                and isinstance(n.ctx, ast.Load)
                and n.lineno > end
            ):
                loads.add(id(n))
        return loads

    def check_spelled(self, removed: set[int]) -> str | None:
        """None when every spelled argument means at the edit what it meant where it was read."""
        for e, at in self.spelled:
            for n in ast.walk(e):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    before = self._version(n.id, at, False, removed)
                    now = self._version(n.id, self.out_idx, True, removed)
                    if before != now:
                        return f"{n.id} is bound again between where it is read and the edit"
        return None

    def edit(self, e_out: ast.expr, call: str, removed: set[int]) -> list[Edit]:
        edits: list[Edit] = []
        for i in sorted(removed):
            s = self.block[i]
            first, last = s.lineno, s.end_lineno or s.lineno
            indent = self.src.lines[first - 1][: s.col_offset] if s.col_offset else ""
            kept = [f"{indent}{c}" for c in _comments(self.src.lines[first - 1 : last])]
            edits.append(Edit(first, last, kept))
        first, last = e_out.lineno, e_out.end_lineno or e_out.lineno
        head = self.src.lines[first - 1].encode()[: e_out.col_offset].decode()
        tail = self.src.lines[last - 1].encode()[e_out.end_col_offset or 0 :].decode()
        stmt = self.block[self.out_idx]
        indent = self.src.lines[stmt.lineno - 1][: stmt.col_offset]
        edits.append(Edit(first, last, wrapped(head, call, tail, indent)))
        return edits


def wrapped(head: str, call: str, tail: str, indent: str, width: int = 99) -> list[str]:
    """``head + call + tail`` as one line, or with the call's arguments one per line when
    that is longer than ``width`` (a trailing comment stays after the closing parenthesis)."""
    line = head + call + tail
    code_tail = tail.split("#", 1)[0]
    if len(head + call + code_tail.rstrip()) <= width:
        return [line]
    try:
        node = ast.parse(call, mode="eval").body
    except SyntaxError:
        return [line]
    if not isinstance(node, ast.Call):
        return [line]
    parts = [ast.get_source_segment(call, a) or ast.unparse(a) for a in node.args]
    parts += [f"{k.arg}={ast.get_source_segment(call, k.value)}" for k in node.keywords]
    name = ast.get_source_segment(call, node.func) or ast.unparse(node.func)
    inner = indent + "    "
    return [f"{head}{name}(", *[f"{inner}{p}," for p in parts], f"{indent}){tail}"]


def _bound(s: ast.stmt) -> set[str]:
    """Names a statement binds."""
    out: set[str] = set()
    for n in ast.walk(s):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
    return out


def _loads(node: ast.AST, name: str) -> set[int]:
    return {
        id(n)
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    }


def _alone_on_lines(block: list[ast.stmt], i: int) -> bool:
    s = block[i]
    lines = set(range(s.lineno, (s.end_lineno or s.lineno) + 1))
    return not any(
        j != i and ({o.lineno, o.end_lineno or o.lineno} & lines) for j, o in enumerate(block)
    )


def _comments(lines: list[str]) -> list[str]:
    """The comments on ``lines`` (whole-line and trailing), as ``# ...``."""
    import io
    import tokenize

    out: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            if tok.type == tokenize.COMMENT:
                out.append(tok.string)
    except (tokenize.TokenError, SyntaxError):
        return []
    return out


def spell(src: Source, match: Match, all_nodes: list[Any]) -> tuple[Hunk | None, str]:
    """The edit that rewrites ``match`` in ``src``, or (None, why not)."""
    from opscope.optimize.patterns import REGISTRY

    u = Unifier(src, match, all_nodes)
    why = u.locate()
    if why:
        return None, why
    e_out = u.output_expr()
    if e_out is None:
        out_loc = location(match.output)
        line = out_loc.line if out_loc else "?"
        return None, f"no expression on line {line} computes the pattern as the graph does"
    removed = u.removable()
    call = REGISTRY[match.pattern].spell(match, u)
    if call is None:
        return None, "an argument of the built-in has no spelling in the source"
    why = u.check_spelled(removed)
    if why:
        return None, why
    return Hunk(src.file, match.pattern, u.edit(e_out, call, removed), call=call), ""


__all__ = ["Edit", "Hunk", "Source", "Unifier", "spell"]
