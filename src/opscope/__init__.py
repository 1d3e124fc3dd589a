"""opscope: where is the time actually going?

The public API is loaded lazily so that ``import opscope`` (and ``opscope --help``) stays fast
and does not import torch: reading and analysing traces needs no torch at all.

    with opscope.profile() as p:          # capture (needs torch)
        for _ in range(p.steps):
            model(x); p.step()
    trace = opscope.load(p.run_dir)       # trace engine
    print(trace.sql("SELECT name, sum(dur_ns) FROM events GROUP BY 1 ORDER BY 2 DESC"))
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from opscope._version import __version__

__all__ = [
    "__version__",
    "analyze",
    "compare",
    "load",
    "optimize",
    "profile",
    "step",
    "watch_compile",
]

if TYPE_CHECKING:
    from opscope.analysis.api import analyze
    from opscope.capture.active import step
    from opscope.capture.compile_metrics import watch_compile
    from opscope.capture.session import profile
    from opscope.experiment import compare, optimize
    from opscope.trace import load

_LAZY = {
    "profile": ("opscope.capture.session", "profile"),
    "load": ("opscope.trace", "load"),
    "analyze": ("opscope.analysis.api", "analyze"),
    "compare": ("opscope.experiment", "compare"),
    "optimize": ("opscope.experiment", "optimize"),
    "step": ("opscope.capture.active", "step"),
    "watch_compile": ("opscope.capture.compile_metrics", "watch_compile"),
}


def _analyze() -> Any:
    """``opscope.analyze``: :func:`opscope.analysis.api.analyze`, whose report prints as the
    registry's text report (``print(opscope.analyze(path))``).  The renderer is given here,
    at the call, by the package that sits above every layer: the analysis never imports a
    renderer, and importing one changes nothing of the analysis."""
    import functools

    from opscope.analysis import api

    @functools.wraps(api.analyze)
    def analyze(*args: Any, **kwargs: Any) -> Any:
        report = api.analyze(*args, **kwargs)
        report.text_renderer = _report_text
        return report

    return analyze


def _report_text(document: dict[str, Any]) -> str:
    """The report's text renderer, from the registry (imported when first printed)."""
    from opscope.render.registry import renderer

    text = renderer("report", "text").render(document)
    assert isinstance(text, str)
    return text


def __dir__() -> list[str]:
    """The public API (``dir(opscope)``), not the module's import machinery."""
    return sorted(__all__)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        if name == "analyze":
            return _analyze()
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'opscope' has no attribute {name!r}")


class _OptimizePackage(types.ModuleType):
    """The ``opscope.optimize`` package, callable as the API's ``opscope.optimize(target,
    example_inputs, device=None, ...)``: once any of its modules is imported, the package is
    what ``opscope.optimize`` names (the import system sets it), and it stays the function."""

    def __call__(
        self, target: Any, example_inputs: Any, device: str | None = None, **kw: Any
    ) -> Any:
        from opscope.experiment import optimize

        return optimize(target, example_inputs, device, **kw)


class _Package(types.ModuleType):
    """``opscope`` itself: the import system's ``setattr(opscope, "optimize", package)`` makes
    that package callable here, at the top, so the core package need not know the API that
    prints its results (``opscope.experiment``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "optimize" and type(value) is types.ModuleType:
            value.__class__ = _OptimizePackage
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
