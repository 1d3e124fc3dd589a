"""Deprecated: the renderers are :mod:`opscope.render` (renamed so as not to read like
:mod:`opscope.analysis.report`, the Report).  ``opscope.report`` and its submodules
(``opscope.report.text`` ...) still import, as the same modules, for one release; importing it
warns.

``opscope.report.html.render`` (the HTML report) is now
:func:`opscope.explorer.static_html.render`; the old name still has it.
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
    """Deprecated: :func:`opscope.explorer.static_html.render`."""
    from opscope.explorer.static_html import render

    return render(data, top, trace=trace)


# opscope.report.html: the HTML renderer's names, and render(), the HTML report that lived here.
html = ModuleType(f"{__name__}.html", _html.__doc__)
html.__dict__.update({k: v for k, v in vars(_html).items() if not k.startswith("__")})
html.render = _html_report  # type: ignore[attr-defined]

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
