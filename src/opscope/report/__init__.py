"""Deprecated: the renderers are :mod:`opscope.render` (renamed so as not to read like
:mod:`opscope.analysis.report`, the Report).  ``opscope.report`` and its submodules
(``opscope.report.text`` ...) still import, as the same modules, for one release; importing it
warns.

``opscope.report.html.render`` (the HTML report) is now
:func:`opscope.explorer.static_html.render_html`; the old name still has it.  The renderers'
functions are named ``render_<format>`` now (:mod:`opscope.render.registry`); the old
modules keep their former names too (``opscope.report.text.render``, ``render_to``,
``opscope.report.markdown.render``, ``opscope.report.json_render.render``...).
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType
from typing import Any

from opscope.render import compare, demo, diff, fmt, json_render, markdown, roofline, text
from opscope.render import html as _html

warnings.warn(
    "opscope.report is deprecated and will be removed; import opscope.render instead",
    DeprecationWarning,
    stacklevel=2,
)


def _html_report(data: dict[str, Any], top: int = 50, *, trace: Any = None) -> str:
    """Deprecated: :func:`opscope.explorer.static_html.render_html`."""
    from opscope.explorer.static_html import render_html

    return render_html(data, top, trace=trace)


def _copy(module: ModuleType, **old: Any) -> ModuleType:
    """``module``'s names under the old module's name, and the ``old`` names it had."""
    name = module.__name__.rsplit(".", 1)[-1]
    copy = ModuleType(f"{__name__}.{name}", module.__doc__)
    copy.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    copy.__dict__.update(old)
    return copy


# opscope.report.html: the HTML renderer's names, and render(), the HTML report that lived here.
html = _copy(_html, render=_html_report)
text = _copy(text, render=text.render_text, render_to=text.print_text)
markdown = _copy(markdown, render=markdown.render_markdown)
json_render = _copy(
    json_render,
    render=json_render.render_json,
    render_bytes=json_render.render_json_bytes,
    render_chunks=json_render.render_json_chunks,
)

# The renderers' modules under their old names (no files here: the modules are opscope.render's).
SUBMODULES = {
    "compare": compare,
    "demo": demo,
    "diff": diff,
    "fmt": fmt,
    "html": html,
    "json_render": json_render,
    "markdown": markdown,
    "roofline": roofline,
    "text": text,
}
for _name, _module in SUBMODULES.items():
    sys.modules[f"{__name__}.{_name}"] = _module
