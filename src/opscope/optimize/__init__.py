"""``opscope optimize``: find the fused built-in or compile mode that makes a block faster,
apply it, and prove it (numerics and speed, through the variant comparison).

:mod:`.patterns` captures the graph and matches the unfused patterns, :mod:`.rewrite` makes
the rewritten graphs, :mod:`.patch` the source diffs, :mod:`.loop` runs the candidates and
returns :class:`~opscope.optimize.result.OptimizeResult` (data; the renderers print it).
"""
