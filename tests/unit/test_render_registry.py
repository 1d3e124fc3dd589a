"""The renderer registry: every format of every kind resolves to a function, ``-o FILE``
infers the format from its extension (a one-line usage error, exit 2, for one no format has
or a format the command cannot write), and nothing registers itself when imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opscope.errors import UsageError
from opscope.render import registry
from opscope.render.registry import RENDERERS, choose, format_of, formats, kinds, renderer

SPELLED = {"text": "text", "json": "json", "md": "markdown", "html": "html", "svg": "svg"}


@pytest.mark.parametrize("entry", RENDERERS, ids=lambda r: f"{r.kind}-{r.format}")
def test_every_renderer_resolves(entry: registry.Renderer) -> None:
    assert callable(registry._load(entry.target))
    name = entry.target.rsplit(":", 1)[1]
    assert name.startswith(f"render_{SPELLED[entry.format]}"), name  # one naming convention
    if entry.console is not None:
        assert callable(registry._load(entry.console))
        assert entry.console.endswith(":print_text")
    assert entry.extension == registry.EXTENSIONS[entry.format]
    assert renderer(entry.kind, entry.format) is entry


def test_kinds_and_their_formats() -> None:
    assert kinds() == ("report", "diff", "optimize", "compare", "demo", "roofline")
    assert formats("report") == ("text", "json", "md", "html")
    assert formats("diff") == ("text", "json", "md", "html")
    assert formats("optimize") == ("text", "json", "md")
    assert formats("demo") == ("text", "json")


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("r.md", "md"),
        ("r.MD", "md"),
        ("r.markdown", "md"),
        ("r.json", "json"),
        ("r.html", "html"),
        ("r.htm", "html"),
        ("r.txt", "text"),
        ("dir.v2/r", None),
        ("r", None),
    ],
)
def test_the_extension_names_the_format(name: str, fmt: str | None) -> None:
    assert format_of(name) == fmt


def test_choose_prefers_the_flag_then_the_extension_then_the_default() -> None:
    assert choose("report", None, None).format == "text"
    assert choose("report", None, "out.html").format == "html"
    assert choose("report", "json", "out.html").format == "json"  # the flag wins
    assert choose("report", None, "out").format == "text"
    with pytest.raises(UsageError, match=r"no format is written as \.xyz"):
        choose("report", None, "out.xyz")
    with pytest.raises(UsageError, match="optimize is written as text, json, md, not html"):
        choose("optimize", None, "out.html")


def test_render_passes_only_the_options_a_renderer_takes() -> None:
    doc = {"schema": "x", "a": [1, 2]}
    out = renderer("diff", "json").render(doc, top=3, width=80, brief=None)
    assert json.loads(out) == doc  # type: ignore[arg-type]


def test_importing_a_renderer_changes_nothing_of_the_analysis() -> None:
    """No import-time registration: importing the renderers (all of them) leaves every
    module of the analysis as it was, and the registry imports none of them itself."""
    code = """
import sys, importlib, opscope.analysis.report as r, opscope.analysis.api
import opscope.render.registry
assert not any(m.startswith("opscope.render.") and m != "opscope.render.registry"
               for m in sys.modules), sorted(m for m in sys.modules if "render" in m)
def state():
    return {name: {k: id(v) for k, v in vars(m).items()}
            for name, m in list(sys.modules.items())
            if name.startswith("opscope.analysis") and m is not None}
before = state()
for mod in ("text", "markdown", "json_render", "diff", "optimize", "compare", "demo",
            "roofline", "html"):
    importlib.import_module("opscope.render." + mod)
after = state()
assert {k: v for k, v in after.items() if k in before} == before
assert not hasattr(r, "text_renderer")
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def _trace(tmp_path: Path) -> Path:
    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 9}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [event]}))
    return path


def test_report_o_infers_the_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from opscope.cli.main import main

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    trace = _trace(tmp_path)
    for name, check in (
        ("r.json", lambda t: json.loads(t)["schema"].startswith("opscope.report")),
        ("r.md", lambda t: t.startswith("#")),
        ("r.html", lambda t: t.lstrip().lower().startswith("<!doctype html")),
        ("r.txt", lambda t: "aten::mm" in t and "events" in t),
    ):
        out = tmp_path / name
        assert main(["report", str(trace), "-o", str(out)]) == 0
        assert check(out.read_text()), name
    # the flag wins over the extension, as before
    assert main(["report", str(trace), "--format", "json", "-o", str(tmp_path / "x.txt")]) == 0
    json.loads((tmp_path / "x.txt").read_text())


def test_report_o_with_an_unknown_extension_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from opscope.cli.main import main

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    trace = _trace(tmp_path)
    assert main(["report", str(trace), "-o", str(tmp_path / "r.xyz")]) == 2
    err = capsys.readouterr().err
    assert "no format is written as .xyz" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.xyz").exists()


def test_format_choices_come_from_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    from opscope.cli.main import main

    for command, kind in (("report", "report"), ("diff", "diff"), ("demo", "demo")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert "{" + ",".join(formats(kind)) + "}" in out, command
