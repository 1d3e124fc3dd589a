"""Deprecated: the renderers are :mod:`opscope.render` (renamed so as not to read like
:mod:`opscope.analysis.report`, the Report).  ``opscope.report`` and its submodules
(``opscope.report.text`` ...) still import, as the same modules, for one release; importing it
warns.

``opscope.report.html.render`` (the HTML report) is now
:func:`opscope.explorer.static_html.render`; the alias still has it.
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

warnings.warn(
    "opscope.report is deprecated and will be removed; import opscope.render instead",
    DeprecationWarning,
    stacklevel=2,
)

# The renderers' modules, importable under the old name.
SUBMODULES = (
    "compare",
    "demo",
    "diff",
    "fmt",
    "html",
    "json_render",
    "markdown",
    "roofline",
    "text",
)


def __getattr__(name: str) -> ModuleType:
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
