"""FX rewrites: a new ``GraphModule`` in which each match's nodes are replaced by one call of
the fused built-in (each pattern's ``rewrite``, :mod:`.patterns`), for one pattern or all of
them together.

The original graph is never changed: each rewrite works on a deep copy, whose nodes are found
again by name.  What ``opscope optimize`` times and proves is the patched source
(:mod:`.verify`); these rewrites check a matcher's guards on the graph itself (:func:`check`:
the comparison's tolerance on the example inputs).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from opscope.optimize.graph import Match
from opscope.optimize.patterns import REGISTRY


def apply_rewrites(gm: Any, matches: Sequence[Match]) -> Any:
    """A copy of ``gm`` with every match in ``matches`` replaced by its built-in."""
    import torch
    import torch.fx

    # a new graph over the same module: attributes are shared, never copied (a constant the
    # trace captured may be a non-leaf tensor, which cannot be deep-copied)
    new = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph), type(gm).__name__)
    by_name = {n.name: n for n in new.graph.nodes}

    def mapped(x: Any) -> Any:
        return by_name[x.name] if hasattr(x, "name") and hasattr(x, "op") else x

    for m in matches:
        out = by_name[m.output.name]
        a = {
            k: [mapped(x) for x in v] if isinstance(v, list) else mapped(v)
            for k, v in m.args.items()
        }
        with new.graph.inserting_before(out):
            node = REGISTRY[m.pattern].rewrite(new.graph, a)
        node.meta.update({k: v for k, v in out.meta.items() if k in ("stack_trace",)})
        out.replace_all_uses_with(node)
        by_name[m.output.name] = node  # a later match that reads this output reads the call
    new.graph.eliminate_dead_code()
    new.graph.lint()
    new.recompile()
    return new


def check(original: Any, rewritten: Any, inputs: Sequence[Any]) -> dict[str, Any]:
    """Numerics of ``rewritten`` against ``original`` on ``inputs`` (the comparison's rule)."""
    import torch

    from opscope.bench.numerics import compare_outputs

    with torch.no_grad():
        ref = original(*inputs)
        out = rewritten(*inputs)
    return compare_outputs(out, ref).to_dict()


__all__ = ["apply_rewrites", "check"]
