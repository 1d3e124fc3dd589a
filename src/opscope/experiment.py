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
        return _text("compare", "html", self.to_dict())

    def __str__(self) -> str:
        return _text("compare", "text", self.to_dict())

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
    profile: bool | None = None,
    out: str | os.PathLike[str] | None = None,
    label: str | None = None,
) -> Comparison:
    """Compare ``variants`` (name -> callable) on identical ``inputs`` (a tuple of arguments, or
    a callable producing it).  The reference is ``reference`` or the first variant.

    Each variant is also profiled into a run folder (device ops and time per call) only when
    asked: ``profile=True`` (folders under ``out``, default ``opscope-runs``) or an ``out``
    folder given; otherwise nothing is written.

    Example::

        cmp = opscope.compare(
            {"naive": f, "builtin": g, "compiled": torch.compile(f)}, (x, w)
        )
        print(cmp)                 # numerics, compile time, latency, speedup [95% CI], verdict
        cmp["compiled"]["verdict"]  # faster | slower | same | unstable | differs | error
    """
    _check_arguments(variants, inputs)
    if profile is None:
        profile = out is not None
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
            out=out if out is not None else "opscope-runs",
            label=label,
        )
    )


def _text(kind: str, fmt: str, document: dict[str, Any]) -> str:
    """``document`` in ``fmt``, by the renderer registry."""
    from opscope.render.registry import renderer

    out = renderer(kind, fmt).render(document)
    assert isinstance(out, str)
    return out


def _check_arguments(variants: Any, inputs: Any) -> None:
    """Clear errors for the mistakes a first call makes (a list or a bare tensor as inputs,
    a list of functions as variants)."""
    if not isinstance(variants, Mapping) or not variants:
        raise TypeError(
            "opscope.compare: variants must be a non-empty dict of name -> callable, e.g. "
            f'{{"naive": f, "compiled": torch.compile(f)}}; got {type(variants).__name__}'
        )
    bad = [str(k) for k, v in variants.items() if not callable(v)]
    if bad:
        raise TypeError(f"opscope.compare: variants {', '.join(bad)} are not callable")
    if not isinstance(inputs, tuple) and not callable(inputs):
        hint = " (one argument: wrap it as (x,))" if type(inputs).__name__ == "Tensor" else ""
        raise TypeError(
            "opscope.compare: inputs must be a tuple of arguments, e.g. (x, w), or a callable "
            f"returning one; got {type(inputs).__name__}{hint}"
        )


class Optimization:
    """The result of :func:`optimize`: ``print()`` it, ``to_dict()`` it (``opscope.optimize/1``),
    ``to_markdown()`` it; ``.data`` is the :class:`~opscope.optimize.result.OptimizeResult`."""

    def __init__(self, data: Any) -> None:
        self.data = data

    @property
    def best(self) -> str | None:
        return self.data.best  # type: ignore[no-any-return]

    def __getitem__(self, name: str) -> dict[str, Any]:
        c = self.data.candidate(name)
        if c is None:
            raise KeyError(name)
        return c.to_dict()  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        return self.data.to_dict()  # type: ignore[no-any-return]

    def to_markdown(self) -> str:
        return _text("optimize", "md", self.to_dict())

    def __str__(self) -> str:
        return _text("optimize", "text", self.to_dict())

    def __repr__(self) -> str:
        return repr(self.data)


def optimize(
    target: Any,
    example_inputs: Any,
    device: str | None = None,
    *,
    budget_s: float | None = None,
    patterns: Any = None,
    modes: Any = None,
    min_run_s: float = 0.2,
    profile: bool = True,
    threads: int | None = None,
    out: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Optimization:
    """Find the fix for ``target`` (a function or an ``nn.Module``) on ``example_inputs`` (a
    tuple, or a callable returning one), apply it and prove it: fused built-ins for the
    unfused patterns in its graph, ``torch.compile`` in its modes, each compared with the
    original (numerics, speedup with its 95 % interval, verdict, device ops per call).  Every
    printed patch is proven on its own patched source, with the parameters randomised.
    ``modes``: the compile modes to try (``()``: none); ``threads``: torch's threads while
    optimizing.

    Example::

        result = opscope.optimize(naive_rmsnorm, (x, w))
        print(result)          # each candidate, its verdict, the best, the patch
        result.to_dict()       # opscope.optimize/1
    """
    from opscope.optimize.loop import DEFAULT_BUDGET_S
    from opscope.optimize.loop import optimize as run
    from opscope.optimize.target import Target

    if not callable(target) and not isinstance(target, Target):
        raise TypeError(
            f"opscope.optimize: target must be a function or an nn.Module, got "
            f"{type(target).__name__}"
        )
    if not isinstance(example_inputs, tuple) and not callable(example_inputs):
        raise TypeError(
            "opscope.optimize: example_inputs must be a tuple of arguments, e.g. (x, w), or a "
            f"callable returning one; got {type(example_inputs).__name__}"
        )
    return Optimization(
        run(
            target,
            example_inputs,
            device,
            budget_s=DEFAULT_BUDGET_S if budget_s is None else budget_s,
            patterns=patterns,
            modes=modes,
            min_run_s=min_run_s,
            profile=profile,
            threads=threads,
            out=out,
            progress=progress or (lambda _m: None),
        )
    )
