"""``opscope.compare``: change one thing, measure again - the Python entry point.

A thin facade over :func:`opscope.bench.compare.run_comparison` (which returns data) that adds
printing and HTML through the renderers.  It sits beside the front-ends, above the core.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from opscope.bench.compare import ComparisonData, run_comparison


class Comparison:
    """The result of :func:`compare`: ``print()`` it, ``to_dict()`` it, ``to_html()`` it."""

    def __init__(self, data: ComparisonData) -> None:
        self.data = data

    def __getitem__(self, name: str) -> dict[str, Any]:
        v = self.data.variant(name)
        if v is None:
            raise KeyError(name)
        return v.to_dict()

    def to_dict(self) -> dict[str, Any]:
        return self.data.to_dict()

    def to_html(self) -> str:
        from opscope.render.compare import render_html

        return render_html(self.to_dict())

    def __str__(self) -> str:
        from opscope.render.compare import render_text

        return render_text(self.to_dict())

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{v.name}={v.verdict}" for v in self.data.variants)
        return f"<Comparison reference={self.data.reference} {verdicts}>"


def compare(
    variants: Mapping[str, Callable[..., Any]],
    inputs: tuple[Any, ...] | Callable[[], tuple[Any, ...]],
    *,
    reference: str | None = None,
    device: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    min_run_s: float = 0.3,
    profile: bool = True,
    out: str | os.PathLike[str] = "opscope-runs",
    label: str | None = None,
) -> Comparison:
    """Compare ``variants`` (name -> callable) on identical ``inputs`` (a tuple of arguments, or
    a callable producing it).  The reference is ``reference`` or the first variant.

    Example::

        cmp = opscope.compare(
            {"naive": f, "builtin": g, "compiled": torch.compile(f)}, (x, w)
        )
        print(cmp)                 # numerics, compile time, latency, speedup [95% CI], verdict
        cmp["compiled"]["verdict"]  # faster | slower | same | unstable | differs | error
    """
    return Comparison(
        run_comparison(
            variants,
            inputs,
            reference=reference,
            device=device,
            rtol=rtol,
            atol=atol,
            min_run_s=min_run_s,
            profile=profile,
            out=out,
            label=label,
        )
    )
