"""Graph capture: the ops of the target as its source spelled them, each with its file, line
and function, and the shape and dtype it had on the example inputs.

First :func:`torch.fx.symbolic_trace` (stack traces recorded): one ``GraphModule`` that keeps
module calls and the program's own spelling.  Real model code often does not trace
symbolically - nanoGPT's ``self.bias[:, :, :T, :T]`` slices with a traced size, control flow
reads a tensor - so when it fails, the graph is taken from Dynamo instead (``torch.compile``
with a backend that only keeps what it is given, static shapes): sizes are constants there,
modules are inlined into their functional calls, a graph break gives several graphs; every
node still carries the user's stack trace.  Shapes, dtypes (and the values of boolean masks,
which the attention pattern reads) come from running each graph once on the inputs it was
given.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

FX = "torch.fx.symbolic_trace"
DYNAMO = "torch.compile graph (dynamo)"
_KEEP_VALUES = 1 << 22  # the most elements of a boolean mask kept for the matchers


@dataclass
class Capture:
    """The captured graphs (empty when capture failed, with ``error``)."""

    graphs: list[Any] = field(default_factory=list)
    error: str | None = None
    method: str = FX
    fx_error: str | None = None  # why symbolic tracing failed, when Dynamo's graph is used

    @property
    def gm(self) -> Any:
        """The first graph (the only one of a symbolic trace), or None."""
        return self.graphs[0] if self.graphs else None

    def nodes(self) -> list[Any]:
        return [n for g in self.graphs for n in g.graph.nodes]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "error": self.error}
        if self.fx_error:
            out["fx_error"] = self.fx_error
        if self.method == DYNAMO:
            out["graphs"] = len(self.graphs)
        return out


def capture(target: Any, example_inputs: Sequence[Any], *, fallback: bool = True) -> Capture:
    """Trace ``target`` (a function or an ``nn.Module``) and propagate shapes on the inputs;
    when symbolic tracing fails and ``fallback``, take Dynamo's graphs."""
    gm, err = _symbolic(target, example_inputs)
    if gm is not None:
        return Capture(graphs=[gm])
    if not fallback:
        return Capture(error=err)
    graphs, dyn_err = _dynamo(target, example_inputs)
    if graphs:
        return Capture(graphs=graphs, method=DYNAMO, fx_error=err)
    return Capture(error=f"{err}; the torch.compile graph failed too ({dyn_err})", fx_error=err)


def _symbolic(target: Any, example_inputs: Sequence[Any]) -> tuple[Any, str | None]:
    import torch
    import torch.fx

    class _Tracer(torch.fx.Tracer):
        # keep every frame: a function has no ``forward`` frame, which torch's filter wants
        def _filter_traceback_frames(self, summary: Any) -> Any:
            return summary

    tracer = _Tracer()
    tracer.record_stack_traces = True
    try:
        if isinstance(target, torch.nn.Module):
            graph = tracer.trace(target)
        else:
            concrete = _concrete_defaults(target, len(example_inputs))
            graph = tracer.trace(target, concrete_args=concrete or None)
        name = getattr(target, "__name__", None) or type(target).__name__
        gm = torch.fx.GraphModule(tracer.root, graph, name)
    except Exception as exc:
        return None, f"the target does not trace symbolically ({one_line(exc)})"
    try:
        propagate(gm, example_inputs)
    except Exception as exc:
        return None, f"the traced graph does not run on the inputs ({one_line(exc)})"
    return gm, None


def _dynamo(target: Any, example_inputs: Sequence[Any]) -> tuple[list[Any], str | None]:
    import torch

    kept: list[tuple[Any, list[Any]]] = []

    def keep(gm: Any, inputs: list[Any]) -> Callable[..., Any]:
        kept.append((gm, list(inputs)))
        return gm.forward  # type: ignore[no-any-return]

    torch._dynamo.reset()
    try:
        with torch.no_grad():
            compiled: Any = torch.compile(target, backend=keep, dynamic=False)
            compiled(*example_inputs)
    except Exception as exc:
        return [], one_line(exc)
    finally:
        torch._dynamo.reset()
    if not kept:
        return [], "no graph was captured"
    graphs = []
    for gm, inputs in kept:  # outside the backend: Dynamo's fake mode is no longer active
        try:
            propagate(gm, inputs)
        except Exception:  # fake inputs, or a graph that needs more than its inputs
            _meta_from_examples(gm)
        graphs.append(gm)
    return graphs, None


def propagate(gm: Any, inputs: Sequence[Any]) -> None:
    """Shapes and dtypes of every node (``tensor_meta``) from one run on ``inputs``; boolean
    tensors keep their value (``opscope_value``)."""
    import torch
    from torch.fx.passes.shape_prop import ShapeProp

    class _Prop(ShapeProp):
        def run_node(self, n: Any) -> Any:
            out = super().run_node(n)
            if (
                isinstance(out, torch.Tensor)
                and out.dtype == torch.bool
                and out.numel() <= _KEEP_VALUES
            ):
                n.meta["opscope_value"] = out.detach().clone()
            return out

    with torch.no_grad():
        _Prop(gm).propagate(*inputs)


def _meta_from_examples(gm: Any) -> None:
    """``tensor_meta`` from Dynamo's fake example values where the graph could not be run."""
    from types import SimpleNamespace

    for n in gm.graph.nodes:
        ev = n.meta.get("example_value")
        if hasattr(ev, "shape") and hasattr(ev, "dtype") and "tensor_meta" not in n.meta:
            n.meta["tensor_meta"] = SimpleNamespace(shape=tuple(ev.shape), dtype=ev.dtype)


def _concrete_defaults(fn: Callable[..., Any], n_given: int) -> dict[str, Any]:
    """Parameters past the given inputs that have defaults: traced as the constants they are
    (``eps=1e-6`` stays a number, so a norm's epsilon is a constant of the graph)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    out: dict[str, Any] = {}
    for p in params[n_given:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is not p.empty:
            out[p.name] = p.default
    return out


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


__all__ = ["DYNAMO", "FX", "Capture", "capture", "one_line", "propagate"]
