"""Layering: the core (capture, trace, analysis, bench, study, optimize) never imports the
front-ends (cli, renderers, explorer, mcp); the renderers never import a front-end; no module
imports itself back through others (the import graph has no cycle); the trace engine, analysis and
renderers never import torch at module level (an analyst may read traces without torch)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "src" / "opscope"
CORE = ("capture", "trace", "analysis", "bench", "study", "optimize", "service")
FRONT_ENDS = (
    "opscope.cli",
    "opscope.render",
    "opscope.report",  # the renderers' former name, a deprecated alias
    "opscope.explorer",
    "opscope.mcp",
)
# What the renderers may import from opscope: themselves, analysis data, the errors.
RENDERERS_MAY_IMPORT = ("opscope.render", "opscope.analysis", "opscope.errors")
# Leaves: packages of constants, exceptions and types, importing nothing else of opscope
# (the documents' types are imported by every layer, the MCP server's tool schemas too).
LEAVES_MAY_IMPORT = {
    "opscope.documents": ("opscope.documents", "opscope.errors"),
    "opscope.errors": (),
    "opscope.markers": (),
}


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# Every opscope module, by name (.pyi: the compiled scanner, whose source is C).
MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py*")) if p.suffix in (".py", ".pyi")}


def _imported(path: Path, top_level_only: bool = False) -> Iterator[tuple[str, list[str]]]:
    """(module, names) for each import in ``path``: relative imports resolved; names are those
    of ``from module import names`` (empty for ``import module``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    here = _module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield module, [a.name for a in node.names]


def _imports(path: Path, top_level_only: bool = False) -> list[str]:
    """The modules ``path`` imports, ``from pkg import sub`` counted as ``pkg.sub``."""
    out: list[str] = []
    for module, names in _imported(path, top_level_only):
        subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES]
        out += subs or [module]
    return out


def _graph() -> dict[str, set[str]]:
    """Module -> the opscope modules it imports, top level or inside functions."""
    return {
        name: {m for m in _imports(path) if m in MODULES and m != name}
        for name, path in MODULES.items()
        if path.suffix == ".py"
    }


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


@pytest.mark.parametrize("layer", CORE)
def test_core_does_not_import_front_ends(layer: str) -> None:
    files = sorted((PKG / layer).rglob("*.py"))
    assert files, f"no modules in {layer}"
    for f in files:
        for mod in _imports(f):
            assert not _within(mod, FRONT_ENDS), f"{f.relative_to(PKG)} imports {mod}"


def test_renderers_do_not_import_front_ends() -> None:
    files = sorted((PKG / "render").rglob("*.py"))
    assert files
    for f in files:
        for mod in _imports(f):
            if _within(mod, ("opscope",)):
                assert _within(mod, RENDERERS_MAY_IMPORT), f"{f.relative_to(PKG)} imports {mod}"


@pytest.mark.parametrize("leaf", sorted(LEAVES_MAY_IMPORT))
def test_leaves_import_nothing_else_of_opscope(leaf: str) -> None:
    files = [p for name, p in MODULES.items() if _within(name, (leaf,)) and p.suffix == ".py"]
    assert files, f"no modules in {leaf}"
    for f in files:
        for mod in _imports(f):  # top level and inside functions
            if _within(mod, ("opscope",)):
                assert _within(mod, LEAVES_MAY_IMPORT[leaf]), f"{f.relative_to(PKG)} imports {mod}"


def test_leaf_check_sees_the_documents_modules() -> None:
    documents = {n for n in MODULES if _within(n, ("opscope.documents",))}
    assert {"opscope.documents", "opscope.documents.report", "opscope.documents.schema"} <= (
        documents
    )
    assert "opscope.errors" in _imports(MODULES["opscope.documents.schema"])


def test_no_import_cycles() -> None:
    cycle = _find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_graph_sees_function_level_relative_and_submodule_imports() -> None:
    graph = _graph()
    assert "opscope.trace.device" in graph["opscope.trace.model"]  # inside a method
    assert "opscope.trace._scan" in graph["opscope.trace.native"]  # from pkg import submodule
    assert "opscope.render.registry" in graph["opscope.cli.report_cmd"]  # inside run()
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize("layer", ("trace", "analysis", "render"))
def test_no_torch_at_module_level(layer: str) -> None:
    for f in sorted((PKG / layer).rglob("*.py")):
        for mod in _imports(f, top_level_only=True):
            assert mod.split(".")[0] != "torch", f"{f.relative_to(PKG)} imports torch at load"
