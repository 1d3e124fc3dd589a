"""``opscope.report``, the renderers' former name, stays importable for one release: the same
modules under the old names, a DeprecationWarning on import, the HTML report where it was."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest
from test_explorer_api import gpu_doc  # same folder (rootdir on sys.path)

import opscope.render
from opscope.analysis.pipeline import analyze
from opscope.explorer import static_html
from opscope.trace import load_document


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget any earlier import of the old name (restored after the test)."""
    for name in list(sys.modules):
        if name == "opscope.report" or name.startswith("opscope.report."):
            monkeypatch.delitem(sys.modules, name)


def _old() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module("opscope.report")


@pytest.mark.usefixtures("fresh")
def test_importing_the_old_name_warns() -> None:
    with pytest.warns(DeprecationWarning, match=r"opscope\.render"):
        importlib.import_module("opscope.report")


@pytest.mark.usefixtures("fresh")
def test_submodule_import_warns() -> None:
    with pytest.warns(DeprecationWarning, match=r"opscope\.render"):
        importlib.import_module("opscope.report.text")


@pytest.mark.usefixtures("fresh")
@pytest.mark.parametrize("name", ["compare", "demo", "diff", "fmt", "roofline"])
def test_old_submodules_are_the_renderers(name: str) -> None:
    old = _old()
    new = importlib.import_module(f"opscope.render.{name}")
    assert importlib.import_module(f"opscope.report.{name}") is new
    assert getattr(old, name) is new
    assert name in old.SUBMODULES  # type: ignore[attr-defined]


@pytest.mark.usefixtures("fresh")
def test_from_imports_keep_working() -> None:
    _old()
    from opscope.report.demo import _common_parent
    from opscope.report.fmt import us

    from opscope.report import text

    assert text.render is opscope.render.text.render_text
    assert text.render_to is opscope.render.text.print_text
    assert _common_parent(["/a/b/x", "/a/b/y"]) == "/a/b"
    assert us(1500.0) == "1.50 ms"


@pytest.mark.usefixtures("fresh")
def test_old_html_module_keeps_the_html_report() -> None:
    _old()
    from opscope.render import html as new
    from opscope.report import html as old

    assert old.plain_tables is new.plain_tables
    assert old.study_section is new.study_section
    data = analyze(load_document(gpu_doc(), "t.json")).to_dict()
    assert old.render(data, 5) == static_html.render_html(data, 5)


@pytest.mark.usefixtures("fresh")
@pytest.mark.parametrize(
    ("name", "old_names"),
    [
        ("text", {"render": "render_text", "render_to": "print_text"}),
        ("markdown", {"render": "render_markdown"}),
        (
            "json_render",
            {
                "render": "render_json",
                "render_bytes": "render_json_bytes",
                "render_chunks": "render_json_chunks",
            },
        ),
    ],
)
def test_renamed_functions_keep_their_old_names(name: str, old_names: dict[str, str]) -> None:
    old = importlib.import_module(f"opscope.report.{name}") if _old() else None
    new = importlib.import_module(f"opscope.render.{name}")
    for was, now in old_names.items():
        assert getattr(old, was) is getattr(new, now)
        assert not hasattr(new, was)  # the renderers themselves have one name each
    assert all(getattr(old, k) is v for k, v in vars(new).items() if not k.startswith("__"))
