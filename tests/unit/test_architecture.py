"""Layering: each package imports only the layers below it (LAYERS, the table of
docs/architecture.md): the core (capture, trace, analysis, bench, study, optimize, service) never
imports a front-end (cli, renderers, explorer, mcp, experiment); the renderers never import a
front-end; no module imports itself back through others (the import graph has no cycle); the trace
engine, analysis and renderers never import torch at module level (an analyst may read traces
without torch); no module registers anything or writes settings as a side effect of being
imported, and nothing but the process's entry point writes ``os.environ``."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
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
    "opscope.experiment",  # the Python API that prints compare's and optimize's results
)
# Modules allowed one import across the table, each for a reason docs/architecture.md gives: the
# Neuron conversion step (capture) writes its tables where the trace reader looks for them.
EXCEPTIONS: dict[str, tuple[str, ...]] = {
    "opscope.capture.neuron_explorer": ("opscope.trace.neuron.capture",),
}
# Each package and what of opscope it may import besides itself and the leaves (LEAVES_MAY_IMPORT),
# lowest layer first: the table of docs/architecture.md.
LAYERS: dict[str, tuple[str, ...]] = {
    "opscope.trace": (),
    "opscope.capture": (),
    "opscope.analysis": ("opscope.trace",),
    "opscope.bench": ("opscope.capture", "opscope.analysis"),
    "opscope.study": ("opscope.bench", "opscope.capture", "opscope.analysis"),
    "opscope.optimize": ("opscope.bench", "opscope.capture", "opscope.analysis", "opscope.study"),
    "opscope.service": ("opscope.analysis", "opscope.trace"),
    "opscope.render": ("opscope.analysis",),
    "opscope.explorer": ("opscope.service", "opscope.render", "opscope.analysis", "opscope.trace"),
    "opscope.mcp": ("opscope.service", "opscope.render", "opscope.analysis"),
    "opscope.experiment": ("opscope.optimize", "opscope.bench", "opscope.render"),
}

# What the renderers may import from opscope: themselves, analysis data, the errors.
RENDERERS_MAY_IMPORT = ("opscope.render", "opscope.analysis", "opscope.errors")
# Leaves: packages of constants, exceptions and types, importing nothing else of opscope
# (the documents' types are imported by every layer, the MCP server's tool schemas too).
LEAVES_MAY_IMPORT = {
    "opscope.documents": ("opscope.documents", "opscope.errors"),
    "opscope.errors": (),
    "opscope.markers": (),
    "opscope._version": (),
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


def _layer_of(module: str) -> str | None:
    return next((layer for layer in LAYERS if _within(module, (layer,))), None)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_layer_imports_only_the_layers_below(layer: str) -> None:
    allowed = (layer, *LAYERS[layer], *LEAVES_MAY_IMPORT)
    files = {n: p for n, p in MODULES.items() if _within(n, (layer,)) and p.suffix == ".py"}
    assert files, f"no modules in {layer}"
    for name, f in files.items():
        for mod in _imports(f):  # top level and inside functions
            if _within(mod, ("opscope",)) and mod not in EXCEPTIONS.get(name, ()):
                assert _within(mod, allowed), f"{f.relative_to(PKG)} imports {mod}"


def test_layer_table_is_the_package() -> None:
    """Every package of opscope is in the table (or a leaf, a front-end or the top)."""
    tops = {".".join(n.split(".")[:2]) for n in MODULES if n.count(".") >= 1}
    known = {*LAYERS, *LEAVES_MAY_IMPORT, *FRONT_ENDS, "opscope.__main__"}
    assert tops <= known, sorted(tops - known)
    # the table points down only: no layer may import one that may import it back
    for layer, below in LAYERS.items():
        for other in below:
            assert layer not in LAYERS.get(other, ()), (layer, other)


def _imported_names(tree: ast.Module) -> set[str]:
    """Names bound at the top level by ``import`` / ``from ... import`` (modules, mostly)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def _is_environ(node: ast.expr) -> bool:
    """``os.environ`` (or a bare ``environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id == "environ"


def _environ_writes(tree: ast.AST) -> list[int]:
    """Lines that write ``os.environ``: item assignment or deletion, ``update``/``setdefault``/
    ``pop``/``clear``/``popitem``, ``os.putenv``/``os.unsetenv``."""
    lines: list[int] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and _is_environ(t.value):
                lines.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            writes = ("update", "setdefault", "pop", "clear", "popitem", "__setitem__")
            if f.attr in writes and _is_environ(f.value):
                lines.append(node.lineno)
            if f.attr in ("putenv", "unsetenv"):
                lines.append(node.lineno)
    return sorted(lines)


def _top_level(tree: ast.Module) -> ast.Module:
    """The module's statements that run at import: function and class bodies left out
    (a class body runs too, but its assignments are its own)."""
    keep: list[ast.stmt] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            keep.append(node)
    return ast.Module(body=keep, type_ignores=[])


# The process's entry point sets the allocator's variables before pyarrow loads (they are read
# by the libraries at load, not by opscope): the one place that writes the environment.
ENV_WRITERS_ALLOWED = {"opscope.cli.main"}


def _offending_lines(check: Callable[[ast.Module], list[int]], allowed: set[str]) -> list[str]:
    """``path:line`` of every line ``check`` finds in the package's modules, but ``allowed``."""
    bad: list[str] = []
    for name, path in MODULES.items():
        if path.suffix == ".py" and name not in allowed:
            bad += [f"{path.relative_to(PKG)}:{n}" for n in check(ast.parse(path.read_text()))]
    return bad


def test_no_settings_through_the_environment() -> None:
    """Settings travel as arguments or settings objects: no module writes ``os.environ`` inside
    the process (a subprocess's own ``env=`` mapping is not the process's)."""
    bad = _offending_lines(_environ_writes, ENV_WRITERS_ALLOWED)
    assert not bad, "writes os.environ: " + ", ".join(bad)


def test_environ_check_sees_writes() -> None:
    tree = ast.parse(
        "import os\nos.environ['A'] = '1'\nos.environ.update(B='2')\ndel os.environ['A']\n"
        "env = {**os.environ, 'C': '3'}\nos.environ.get('D')\n"
    )
    assert _environ_writes(tree) == [2, 3, 4]


def _registrations(tree: ast.Module) -> list[int]:
    """Top-level statements that change another module's state when this one is imported: an
    assignment to an attribute of an imported name (``report.text_renderer = render``), a
    ``register...(...)`` call, or a write to ``os.environ``."""
    imported = _imported_names(tree)
    lines: list[int] = []
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                root = t
                while isinstance(root, ast.Attribute | ast.Subscript):
                    root = root.value
                if t is not root and isinstance(root, ast.Name) and root.id in imported:
                    lines.append(node.lineno)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            f = node.value.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if called.startswith(("register", "_register")):
                lines.append(node.lineno)
    return sorted(lines + _environ_writes(_top_level(tree)))


# Modules whose top-level assignment to an imported name is the import system's own business:
# the package that makes ``opscope.optimize`` callable swaps its own module's class.
REGISTRATION_ALLOWED = {"opscope"}


def test_no_import_time_registration() -> None:
    """Importing a module changes no other module's state: registries are declared tables,
    renderers and hooks are looked up when they are used."""
    bad = _offending_lines(_registrations, REGISTRATION_ALLOWED | ENV_WRITERS_ALLOWED)
    assert not bad, "registers at import: " + ", ".join(bad)


def test_registration_check_sees_side_effects() -> None:
    tree = ast.parse(
        "from opscope.analysis import report\nimport json\nreport.text_renderer = print\n"
        "register_format('x')\nx = 1\nLOCAL = {}\nLOCAL['a'] = 1\njson.decoder.x = 2\n"
        "def f():\n    import os\n    os.environ['A'] = '1'\n"
    )
    assert _registrations(tree) == [3, 4, 8]
