"""FX rewrites: a new ``GraphModule`` in which each match's nodes are replaced by one call of
the fused built-in (:mod:`.patterns`), for one pattern or all of them together.

The original graph is never changed: each rewrite works on a deep copy, whose nodes are found
again by name.  Numerics are checked by the comparison that times the rewrite
(:func:`opscope.bench.compare.run_comparison`); :func:`check` is the quick check of the same
tolerance on the example inputs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from opscope.optimize.patterns import Match


def _builtin(pattern: str) -> Any:
    import torch
    import torch.nn.functional as F

    return {
        "rms_norm": torch.rms_norm,
        "layer_norm": F.layer_norm,
        "sdpa": F.scaled_dot_product_attention,
        "gelu_tanh": F.gelu,
        "silu": F.silu,
        "linear": F.linear,
    }[pattern]


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
        a = {k: mapped(v) for k, v in m.args.items()}
        fn = _builtin(m.pattern)
        with new.graph.inserting_before(out):
            if m.pattern in ("rms_norm", "layer_norm"):
                extra = (a["weight"],) if m.pattern == "rms_norm" else (a["weight"], a["bias"])
                node = new.graph.call_function(
                    fn, (a["input"], tuple(a["normalized_shape"]), *extra, a["eps"])
                )
            elif m.pattern == "sdpa":
                node = new.graph.call_function(
                    fn,
                    (a["query"], a["key"], a["value"]),
                    {"attn_mask": a["attn_mask"], "scale": a["scale"]},
                )
            elif m.pattern == "gelu_tanh":
                node = new.graph.call_function(fn, (a["input"],), {"approximate": "tanh"})
            elif m.pattern == "silu":
                node = new.graph.call_function(fn, (a["input"],))
            elif m.pattern == "linear":
                weight = a["weight"]
                if weight is None:
                    weight = new.graph.call_function(torch.t, (a["weight_in_out"],))
                node = new.graph.call_function(fn, (a["input"], weight, a["bias"]))
            else:  # pragma: no cover - PATTERNS and this function agree
                raise ValueError(f"no rewrite for pattern {m.pattern!r}")
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
