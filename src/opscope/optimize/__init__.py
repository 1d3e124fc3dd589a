"""``opscope optimize``: find the fused built-in or compile mode that makes a block faster,
apply it, and prove it (numerics and speed, through the variant comparison).

:mod:`.capture` takes the graph (symbolic tracing, else Dynamo's), :mod:`.patterns` holds the
patterns (one object each: matcher, FX rewrite, source spelling, docs row; :mod:`.graph` their
vocabulary), :mod:`.spell` maps a match back to the source expression and its arguments,
:mod:`.patch` makes the unified diffs, :mod:`.verify` proves each patch on its patched
source, :mod:`.target` loads and builds targets, :mod:`.measure` times every candidate in one
interleaved run, :mod:`.nearmiss` says why a chain got no rewrite, :mod:`.loop` runs it all and
returns :class:`~opscope.optimize.result.OptimizeResult` (data; the renderers print it);
:mod:`.rewrite` makes the FX rewrites that check a matcher on its own graph.
"""

from __future__ import annotations
