"""Patches of the user's source: a unified diff that makes a rewrite in the file it came from.

From a match's nodes (their source locations, :func:`opscope.optimize.patterns.location`) to
the statements they came from (:mod:`ast`): the statements are replaced by one that calls the
fused built-in, at the first statement's indentation, assigning or returning what the last one
did.  The built-in's arguments are spelled as the source spells them: the function's
parameters, ``self.<attribute>`` for the module's parameters, the variables that earlier
statements assigned; the epsilon as written (``self.eps``, ``1e-5``), else its value.

A match whose statements also compute something else, span two functions, or whose inputs
cannot be spelled gets no hunk but a reason (and the call to write by hand).  A helper method
called several times is one hunk.  The file itself is only changed by :func:`write_patched`,
which keeps a ``.orig`` backup.
"""

from __future__ import annotations

import ast
import difflib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.optimize.patterns import Match, location

_MODULE_NAMES = frozenset(("torch", "F", "math", "nn", "self", "functional"))


@dataclass
class Hunk:
    """One replacement: lines ``first..last`` (1-based, inclusive) of ``file`` become
    ``text``."""

    file: str
    first: int
    last: int
    text: str
    pattern: str


@dataclass
class PatchSet:
    hunks: list[Hunk] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # matches that got no hunk, and why

    def diff(self, patterns: Sequence[str] | None = None) -> str | None:
        """The unified diff of the hunks of ``patterns`` (all when None), or None."""
        chosen = [h for h in self.hunks if patterns is None or h.pattern in patterns]
        if not chosen:
            return None
        out: list[str] = []
        for file in dict.fromkeys(h.file for h in chosen):
            old = Path(file).read_text(encoding="utf-8")
            new = apply_hunks(old, [h for h in chosen if h.file == file])
            shown = _shown(file)
            out += difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"a/{shown}" if not shown.startswith("/") else shown,
                tofile=f"b/{shown}" if not shown.startswith("/") else shown,
            )
        return "".join(out) or None


def _shown(file: str) -> str:
    """The file relative to the working directory when under it, else as it is."""
    try:
        return str(Path(file).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return file


def apply_hunks(text: str, hunks: Sequence[Hunk]) -> str:
    """``text`` with the hunks applied (bottom up, so line numbers hold; overlapping hunks
    after the first are skipped)."""
    lines = text.splitlines(keepends=True)
    taken: list[tuple[int, int]] = []
    for h in sorted(hunks, key=lambda h: h.first, reverse=True):
        if any(not (h.last < a or h.first > b) for a, b in taken):
            continue
        taken.append((h.first, h.last))
        lines[h.first - 1 : h.last] = [h.text + "\n"]
    return "".join(lines)


def write_patched(file: str | Path, hunks: Sequence[Hunk]) -> Path:
    """Apply ``hunks`` to ``file`` in place, after copying it to ``file.orig``; the backup's
    path."""
    path = Path(file)
    backup = path.with_name(path.name + ".orig")
    shutil.copy2(path, backup)
    path.write_text(apply_hunks(path.read_text(encoding="utf-8"), hunks), encoding="utf-8")
    return backup


def compile_line(target_name: str, is_module_class: bool, mode: str | None = None) -> str:
    """The one line that compiles the target (where it is built or defined)."""
    extra = f', mode="{mode}"' if mode and mode != "default" else ""
    if mode == "neuron":
        extra = ', backend="neuron"'
    if is_module_class:
        return f"model = torch.compile({target_name}(){extra})"
    return f"{target_name} = torch.compile({target_name}{extra})"


# -- from matches to hunks ----------------------------------------------------------------


class _Source:
    def __init__(self, file: str) -> None:
        self.file = file
        self.text = Path(file).read_text(encoding="utf-8")
        self.tree = ast.parse(self.text)
        self.functional = "F" if "import torch.nn.functional as F" in self.text else None

    def function(self, line: int, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        best = None
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                if node.lineno <= line <= (node.end_lineno or node.lineno):
                    best = node
            elif (
                isinstance(node, ast.Lambda)
                and name == "<lambda>"
                and node.lineno <= line <= (node.end_lineno or node.lineno)
            ):
                return None  # a lambda: no statements to replace
        return best

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""


def _statement(fn: ast.AST, line: int) -> ast.stmt | None:
    """The innermost simple statement of ``fn`` that spans ``line``."""
    best: ast.stmt | None = None
    for node in ast.walk(fn):
        compound = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.With)
        if (
            isinstance(node, ast.stmt)
            and not isinstance(node, compound)
            and node.lineno <= line <= (node.end_lineno or node.lineno)
            and (best is None or node.lineno >= best.lineno)
        ):
            best = node
    return best


def make_patches(matches: Sequence[Match], all_nodes: Sequence[Any]) -> PatchSet:
    """Hunks for ``matches`` (``all_nodes``: every node of the graph, to check that the
    replaced statements compute nothing else)."""
    result = PatchSet()
    groups: dict[tuple[str, int, int], list[Match]] = {}
    sources: dict[str, _Source] = {}
    for m in matches:
        key, why = _span(m, sources)
        if key is None:
            result.problems.append(f"{m.pattern}: {why}")
            continue
        groups.setdefault(key, []).append(m)
    for (file, first, last), ms in groups.items():
        src = sources[file]
        hunk, why = _hunk(src, file=file, first=first, last=last, ms=ms, all_nodes=all_nodes)
        if hunk is None:
            result.problems.append(f"{ms[0].pattern} at {Path(file).name}:{first}: {why}")
        else:
            result.hunks.append(hunk)
    return result


def _span(m: Match, sources: dict[str, _Source]) -> tuple[tuple[str, int, int] | None, str]:
    locs = m.locations
    if not locs:
        return None, "no source location recorded"
    if len({(loc.file, loc.function) for loc in locs}) != 1:
        return None, "the pattern spans several functions: rewrite it by hand"
    file, fname = locs[0].file, locs[0].function
    if fname == "<lambda>":
        return None, f"written in a lambda ({Path(file).name}:{locs[0].line}): rewrite by hand"
    try:
        src = sources.get(file) or _Source(file)
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        return None, f"cannot read {file}: {exc}"
    sources[file] = src
    fn = src.function(locs[0].line, fname)
    if fn is None:
        return None, f"function {fname} not found in {file}"
    stmts = [_statement(fn, loc.line) for loc in locs]
    if any(s is None for s in stmts):
        return None, "a line of the pattern is not a simple statement"
    first = min(s.lineno for s in stmts if s is not None)
    last = max((s.end_lineno or s.lineno) for s in stmts if s is not None)
    return (file, first, last), ""


def _hunk(
    src: _Source, *, file: str, first: int, last: int, ms: list[Match], all_nodes: Sequence[Any]
) -> tuple[Hunk | None, str]:
    m = ms[0]
    fname = m.locations[0].function
    fn = src.function(first, fname)
    assert fn is not None
    stmts = [
        s
        for s in fn.body
        if isinstance(s, ast.stmt) and s.lineno >= first and (s.end_lineno or s.lineno) <= last
    ]
    if not stmts or stmts[0].lineno != first or (stmts[-1].end_lineno or 0) != last:
        return None, "the pattern's lines are not whole statements of one block"
    # nothing else is computed on these lines
    ours = {n for mm in ms for n in mm.nodes}
    for n in all_nodes:
        loc = location(n)
        if (
            loc is not None
            and loc.file == file
            and loc.function == fname
            and first <= loc.line <= last
            and n not in ours
            and n.op in ("call_function", "call_method", "call_module")
        ):
            return None, f"line {loc.line} also computes {n.name}: rewrite it by hand"
    assigned: set[str] = set()
    for s in stmts[:-1]:
        if not (isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets)):
            return None, "an intermediate statement is not a plain assignment"
        assigned |= {t.id for t in s.targets if isinstance(t, ast.Name)}
    after = [s for s in fn.body if s.lineno > last]
    used_after = {n.id for s in after for n in ast.walk(s) if isinstance(n, ast.Name)}
    if assigned & used_after:
        return None, f"{', '.join(sorted(assigned & used_after))} is used after the pattern"
    free = {
        n.id
        for s in stmts
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    } - assigned
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    call, why = _call_text(src, m, fn=fn, stmts=stmts, free=free, params=params, assigned=assigned)
    if call is None:
        return None, why
    tail = stmts[-1]
    indent = src.text.splitlines()[first - 1][: stmts[0].col_offset]
    if isinstance(tail, ast.Return):
        line = f"{indent}return {call}"
    elif isinstance(tail, ast.Assign):
        targets = " = ".join(src.segment(t) for t in tail.targets)
        line = f"{indent}{targets} = {call}"
    else:
        return None, "the pattern's last statement neither assigns nor returns"
    return Hunk(file, first, last, line, m.pattern), ""


def _call_text(
    src: _Source,
    m: Match,
    *,
    fn: ast.AST,
    stmts: list[ast.stmt],
    free: set[str],
    params: set[str],
    assigned: set[str],
) -> tuple[str | None, str]:
    names: dict[str, str] = {}
    left = sorted(free - _MODULE_NAMES)
    unresolved: list[str] = []
    for key, value in m.args.items():
        if not (hasattr(value, "op") and hasattr(value, "users")):
            continue
        text = _spell(value, src, fn=fn, first=stmts[0].lineno, free=free, params=params)
        if text is None:
            unresolved.append(key)
        else:
            names[key] = text
    rest = [n for n in left if n not in names.values()]
    if len(unresolved) == 1 and len(rest) == 1:
        names[unresolved[0]] = rest[0]
    elif unresolved:
        return None, f"cannot spell {', '.join(unresolved)} in the source"
    f = src.functional or "torch.nn.functional"
    a = m.args

    def shape_text(key: str) -> str:
        x = names[key]
        return (
            f"({x}.shape[-1],)"
            if x.replace(".", "").replace("_", "").isalnum()
            else (f"({a['normalized_shape'][0]},)")
        )

    if m.pattern == "rms_norm":
        eps = _eps_text(src, stmts, assigned, a["eps"])
        w = names.get("weight", "None")
        return f"torch.rms_norm({names['input']}, {shape_text('input')}, {w}, {eps})", ""
    if m.pattern == "layer_norm":
        eps = _eps_text(src, stmts, assigned, a["eps"])
        w, b = names.get("weight", "None"), names.get("bias", "None")
        return f"{f}.layer_norm({names['input']}, {shape_text('input')}, {w}, {b}, {eps})", ""
    if m.pattern == "sdpa":
        extra = ""
        if a["attn_mask"] is not None:
            extra += f", attn_mask={names['attn_mask']}"
        if a["scale"] is not None:
            extra += f", scale={a['scale']!r}"
        q, k, v = names["query"], names["key"], names["value"]
        return f"{f}.scaled_dot_product_attention({q}, {k}, {v}{extra})", ""
    if m.pattern == "gelu_tanh":
        return f'{f}.gelu({names["input"]}, approximate="tanh")', ""
    if m.pattern == "silu":
        return f"{f}.silu({names['input']})", ""
    if m.pattern == "linear":
        w = names["weight"] if "weight" in names else f"{names['weight_in_out']}.t()"
        return f"{f}.linear({names['input']}, {w}, {names['bias']})", ""
    return None, f"no source form for {m.pattern}"


def _spell(
    node: Any, src: _Source, *, fn: ast.AST, first: int, free: set[str], params: set[str]
) -> str | None:
    if node.op == "get_attr":
        return f"self.{node.target}" if "self" in params else None
    if node.op == "placeholder":
        return str(node.target) if str(node.target) in free else None
    loc = location(node)
    if loc is None or loc.file != src.file or loc.line >= first:
        return None
    stmt = _statement(fn, loc.line)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        t = stmt.targets[0]
        if isinstance(t, ast.Name) and t.id in free:
            return t.id
    return None


def _eps_text(src: _Source, stmts: list[ast.stmt], assigned: set[str], value: float) -> str:
    """The epsilon as written: the side of an addition under a ``sqrt``/``rsqrt`` that is a
    constant, an attribute or a name from outside; else its value."""
    for s in stmts:
        for call in ast.walk(s):
            if not (isinstance(call, ast.Call) and call.args):
                continue
            func = call.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            node = call.args[0]
            if fname not in ("sqrt", "rsqrt") or not (
                isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
            ):
                continue
            sides = []
            for side in (node.left, node.right):
                if isinstance(side, (ast.Constant, ast.Attribute)) or (
                    isinstance(side, ast.Name) and side.id not in assigned
                ):
                    sides.append(side)
            if len(sides) == 1:
                text = src.segment(sides[0])
                if isinstance(sides[0], ast.Constant):
                    try:
                        if float(ast.literal_eval(text)) != value:
                            continue
                    except (ValueError, TypeError, SyntaxError):
                        continue
                return text
    return repr(value)


__all__ = [
    "Hunk",
    "PatchSet",
    "apply_hunks",
    "compile_line",
    "make_patches",
    "write_patched",
]
