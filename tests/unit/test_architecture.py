"""Layering: the core (capture, trace, analysis, bench, study) never imports the front-ends
(cli, report renderers, explorer, mcp); the trace engine and analysis never import torch at
module level (an analyst may read traces without torch)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "src" / "opscope"
CORE = ("capture", "trace", "analysis", "bench", "study")
FRONT_ENDS = (
    "opscope.cli",
    "opscope.render",
    "opscope.report",
    "opscope.explorer",
    "opscope.mcp",
)


def _imports(path: Path, top_level_only: bool = False) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("layer", CORE)
def test_core_does_not_import_front_ends(layer: str) -> None:
    files = sorted((PKG / layer).rglob("*.py"))
    assert files, f"no modules in {layer}"
    for f in files:
        for mod in _imports(f):
            assert not mod.startswith(FRONT_ENDS), f"{f.relative_to(PKG)} imports {mod}"


@pytest.mark.parametrize("layer", ("trace", "analysis", "render"))
def test_no_torch_at_module_level(layer: str) -> None:
    for f in sorted((PKG / layer).rglob("*.py")):
        for mod in _imports(f, top_level_only=True):
            assert mod.split(".")[0] != "torch", f"{f.relative_to(PKG)} imports torch at load"
