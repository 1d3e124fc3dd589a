"""``opscope optimize``: find the fused built-in or compile mode that makes a block faster,
apply it, and prove it (numerics and speed, through the variant comparison).

:mod:`.patterns` captures the graph and matches the unfused patterns, :mod:`.rewrite` makes
the rewritten graphs, :mod:`.patch` the source diffs, :mod:`.loop` runs the candidates and
returns :class:`~opscope.optimize.result.OptimizeResult` (data; the renderers print it).
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    """``opscope.optimize(target, example_inputs, device=None, ...)`` works whether
    ``opscope.optimize`` is reached as this package (once any of its modules was imported) or
    through ``opscope``'s lazy attributes."""

    def __call__(
        self, target: Any, example_inputs: Any, device: str | None = None, **kw: Any
    ) -> Any:
        from opscope.experiment import optimize

        return optimize(target, example_inputs, device, **kw)


sys.modules[__name__].__class__ = _CallableModule
