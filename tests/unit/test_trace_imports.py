"""The trace package's imports point one way: no module of ``opscope.trace`` imports, directly
or through others, a module that imports it back, and none imports the top package ``opscope``.

Every import counts, at module level, inside functions and under ``TYPE_CHECKING`` alike.
``from P import N`` is an import of the module ``P.N`` when that is a module, else of ``P``.
Importing ``a.b.c`` also runs the packages ``a`` and ``a.b``; those implicit imports are not
counted (a package's ``__init__`` importing its own modules is not a cycle).  A compiled module
(``_scan``, known by its ``.pyi`` stub) imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "opscope.trace"


def _modules() -> dict[str, Path]:
    """Module name -> its source (a ``.pyi`` stub for a compiled module)."""
    root = SRC / Path(*PACKAGE.split("."))
    out: dict[str, Path] = {}
    for f in sorted([*root.rglob("*.pyi"), *root.rglob("*.py")]):  # .py after its stub
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules ``name`` (at ``path``) imports."""
    if path.suffix == ".pyi":
        return set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return out


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {
        name: {m for m in _imported(name, path, known) if m in known and m != name}
        for name, path in known.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_trace_modules() -> None:
    graph = _graph()
    assert graph["opscope.trace.native"] == {"opscope.trace._scan", "opscope.trace._args"}
    assert "opscope.trace.ingest" in graph and "opscope.trace.formats" in graph
    assert "opscope.trace.formats.kineto" in graph["opscope.trace.formats"]
    assert "opscope.trace.kineto.file" in graph["opscope.trace.formats.kineto"]


def test_no_import_cycle_inside_the_trace_package() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_trace_module_imports_the_top_package() -> None:
    known = _modules()
    for name, path in known.items():
        assert "opscope" not in _imported(name, path, known), f"{name} imports opscope"
