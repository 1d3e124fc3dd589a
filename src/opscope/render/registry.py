"""The renderer registry: for each kind of document (a report, a diff, an optimize result...),
the formats it can be written in, each a :class:`Renderer`.

The entries are declared in one table (:data:`RENDERERS`), not registered by the renderers'
modules when they are imported: a renderer is named by ``"module:function"`` and that module
is imported only when the renderer is used, so looking one up imports nothing else.  Every
command picks its renderer here (``--format`` choices, ``-o FILE`` inferring the format from
the file's extension), and so do the Python objects that print themselves
(``print(opscope.analyze(path))``, ``print(opscope.compare(...))``).

One convention: a renderer's function is ``render_<format>(document, **options) -> str |
bytes | Iterator[bytes]`` (bytes when :attr:`Renderer.binary`, pieces of UTF-8 when the
document is large), taking by keyword the options it understands (``top``, ``width``,
``brief``, ``trace``...); :meth:`Renderer.render` passes it only those.  A text renderer
that can also print straight to a terminal (colours, its width) names that function too,
``print_<format>(console, document, **options)``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from opscope.errors import UsageError

#: What a renderer returns: text, UTF-8 bytes, or such bytes in pieces.
Output = str | bytes | Iterator[bytes]


@dataclass(frozen=True)
class Renderer:
    """One format of one kind of document."""

    kind: str  # the document: report, diff, optimize, compare, demo, roofline
    format: str  # the name --format takes: text, json, md, html, svg
    target: str  # "module:function" that renders it (imported when used)
    extension: str  # the file extension -o infers it from (".md")
    description: str  # one line, for --help
    binary: bool = False  # returns bytes (or bytes in pieces), not str
    console: str | None = None  # "module:function" printing it to a rich Console

    def render(self, document: Any, **options: Any) -> Output:
        """``document`` in this format; ``options`` the function does not take are left out."""
        fn = _load(self.target)
        out: Output = fn(document, **_taken(fn, options))
        return out

    def print_to(self, console: Any, document: Any, **options: Any) -> None:
        """Print ``document`` to a rich ``console`` (a terminal: its colours and width), for a
        renderer that has a console function (:attr:`console`)."""
        if self.console is None:
            raise ValueError(f"the {self.kind} renderer {self.format} prints to no console")
        fn = _load(self.console)
        fn(console, document, **_taken(fn, options))


def _entry(
    kind: str,
    fmt: str,
    target: str,
    description: str,
    *,
    binary: bool = False,
    console: str | None = None,
) -> Renderer:
    return Renderer(kind, fmt, target, EXTENSIONS[fmt], description, binary, console)


#: The file extension of each format (-o FILE.EXT infers the format), and the others a file
#: of that format may have.
EXTENSIONS = {"text": ".txt", "json": ".json", "md": ".md", "html": ".html", "svg": ".svg"}
OTHER_EXTENSIONS = {".text": "text", ".markdown": "md", ".htm": "html"}

_TEXT = "opscope.render.text"
_JSON = "opscope.render.json_render:render_json"
_JSON_CHUNKS = "opscope.render.json_render:render_json_chunks"

#: Every renderer, by kind of document; each kind's first format is its default.
RENDERERS: tuple[Renderer, ...] = (
    _entry(
        "report",
        "text",
        f"{_TEXT}:render_text",
        "tables, critical path and findings for a terminal",
        console=f"{_TEXT}:print_text",
    ),
    _entry("report", "json", _JSON_CHUNKS, "the report document (opscope.report/1)", binary=True),
    _entry("report", "md", "opscope.render.markdown:render_markdown", "Markdown tables"),
    _entry(
        "report",
        "html",
        "opscope.explorer.static_html:render_html",
        "the explorer's UI in one self-contained file",
    ),
    _entry("diff", "text", "opscope.render.diff:render_text", "deltas for a terminal"),
    _entry("diff", "json", _JSON, "the diff document (opscope.diff/1)"),
    _entry("diff", "md", "opscope.render.diff:render_markdown", "a Markdown table of deltas"),
    _entry("diff", "html", "opscope.render.diff:render_html", "an HTML table of deltas"),
    _entry("optimize", "text", "opscope.render.optimize:render_text", "candidates and patches"),
    _entry("optimize", "json", _JSON, "the optimize document (opscope.optimize/1)"),
    _entry("optimize", "md", "opscope.render.optimize:render_markdown", "Markdown and diffs"),
    _entry("compare", "text", "opscope.render.compare:render_text", "the variants' table"),
    _entry("compare", "json", _JSON, "the comparison document (opscope.compare/1)"),
    _entry("compare", "html", "opscope.render.compare:render_html", "a table and latency bars"),
    _entry(
        "demo",
        "text",
        "opscope.render.demo:render_text",
        "the study's tables for a terminal",
        console="opscope.render.demo:print_text",
    ),
    _entry("demo", "json", _JSON, "the study document (opscope.demo/1)"),
    _entry("roofline", "text", "opscope.render.roofline:render_text", "the roofline table"),
    _entry("roofline", "json", _JSON, "the roofline section"),
    _entry("roofline", "svg", "opscope.render.roofline:render_svg", "the roofline chart"),
)


def kinds() -> tuple[str, ...]:
    """The kinds of document, in the table's order."""
    return tuple(dict.fromkeys(r.kind for r in RENDERERS))


def formats(kind: str) -> tuple[str, ...]:
    """The formats ``kind`` can be written in (``--format`` choices), the default first."""
    found = tuple(r.format for r in RENDERERS if r.kind == kind)
    if not found:
        raise KeyError(f"no renderers for {kind!r} (kinds: {', '.join(kinds())})")
    return found


def renderer(kind: str, fmt: str) -> Renderer:
    """The renderer of ``kind`` in ``fmt``; a :class:`~opscope.errors.UsageError` naming the
    formats there are when ``kind`` cannot be written in ``fmt``."""
    for r in RENDERERS:
        if r.kind == kind and r.format == fmt:
            return r
    raise UsageError(f"{kind} is written as {', '.join(formats(kind))}, not {fmt}")


def format_of(path: str | Path) -> str | None:
    """The format a file's extension names (``out.md`` -> ``md``), None for a name with no
    extension; a :class:`~opscope.errors.UsageError` for an extension no format has."""
    suffix = Path(path).suffix.lower()
    if not suffix:
        return None
    for fmt, ext in EXTENSIONS.items():
        if suffix == ext:
            return fmt
    if suffix in OTHER_EXTENSIONS:
        return OTHER_EXTENSIONS[suffix]
    known = ", ".join(EXTENSIONS.values())
    raise UsageError(f"-o {path}: no format is written as {suffix} ({known}); give --format")


def choose(kind: str, fmt: str | None, output: str | None) -> Renderer:
    """The renderer a command uses: ``--format`` when given, else the one ``-o FILE``'s
    extension names, else the kind's default.  A format the command cannot write, or an
    extension no format has, is a one-line :class:`~opscope.errors.UsageError`."""
    if fmt is None and output:
        inferred = format_of(output)
        if inferred is not None and inferred not in formats(kind):
            raise UsageError(
                f"-o {output}: {kind} is written as {', '.join(formats(kind))}, not {inferred}; "
                "give --format"
            )
        fmt = inferred
    return renderer(kind, fmt or formats(kind)[0])


def format_help(kind: str) -> str:
    """``--format``'s help: each format with its description, and the inference from -o."""
    each = "; ".join(f"{r.format}: {r.description}" for r in RENDERERS if r.kind == kind)
    return f"output format ({each}; default: {formats(kind)[0]}, or -o FILE's extension)"


@cache
def _load(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


def _taken(fn: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    """The ``options`` ``fn`` takes by keyword."""
    params = _keywords(fn)
    if params is None:
        return options
    return {k: v for k, v in options.items() if k in params}


@cache
def _keywords(fn: Callable[..., Any]) -> frozenset[str] | None:
    """The names ``fn`` takes by keyword (after its positional document), None: any."""
    sig = inspect.signature(fn)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return frozenset(
        name
        for name, p in sig.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )
