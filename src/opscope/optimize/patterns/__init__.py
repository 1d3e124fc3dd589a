"""The unfused patterns that a fused built-in computes in one call: one :class:`Pattern` per
name, in one registry (:data:`REGISTRY`).

A pattern is everything ``opscope optimize`` knows about one rewrite:

* ``match(node)`` - a :class:`~opscope.optimize.graph.Match` when ``node`` is where the pattern
  starts (its anchor op) and every step holds under the guards that make the built-in compute
  the same thing; a :class:`~opscope.optimize.graph.Miss` with the step that differed when the
  anchor is there but a step is not; None when the anchor is not;
* ``rewrite(graph, args)`` - the built-in's call inserted into an FX graph (``args``: the
  match's arguments, as nodes of that graph);
* ``spell(match, spelling)`` - the built-in's call as source text, from the source spelling of
  each argument (:mod:`opscope.optimize.spell`);
* ``written``, ``builtin``, ``guards`` - the row of the docs' table (docs/optimize.md);
* ``finding`` - which chains of the fusion finding (``opscope.analysis.findings.fusion``) are
  this pattern's, so a finding that gets no rewrite can say why (near-misses).

The class is :class:`.base.Pattern`; modules: :mod:`.norms` (``rms_norm``, ``layer_norm``),
:mod:`.attention` (``sdpa``), :mod:`.activations` (``gelu_tanh``, ``gelu_erf``, ``silu``),
:mod:`.linear` (``linear``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opscope.optimize.graph import Location, Match, Miss, location, locations, op_name
from opscope.optimize.patterns.activations import GELU_ERF, GELU_TANH, SILU
from opscope.optimize.patterns.attention import SDPA
from opscope.optimize.patterns.base import Pattern
from opscope.optimize.patterns.linear import LINEAR
from opscope.optimize.patterns.norms import LAYER_NORM, RMS_NORM

REGISTRY: dict[str, Pattern] = {
    p.name: p for p in (RMS_NORM, LAYER_NORM, SDPA, GELU_TANH, GELU_ERF, SILU, LINEAR)
}
PATTERNS = tuple(REGISTRY)
BUILTINS = {name: p.builtin for name, p in REGISTRY.items()}
# matched in this order: a layer norm is an RMS norm of the centred input, so it goes first
_ORDER = ("layer_norm", "rms_norm", "sdpa", "gelu_tanh", "gelu_erf", "silu", "linear")


def find_matches(gm: Any, patterns: Sequence[str] = PATTERNS) -> list[Match]:
    """Every non-overlapping occurrence of ``patterns`` in ``gm``'s graph, in graph order."""
    return scan(gm, patterns)[0]


def scan(gm: Any, patterns: Sequence[str] = PATTERNS) -> tuple[list[Match], list[Miss]]:
    """(matches, near-misses) of ``patterns`` in ``gm``'s graph.  A node claimed by a match
    is not matched again; a near-miss whose anchor a match claimed is dropped (the layer norm
    that is also an RMS norm's anchor)."""
    unknown = [p for p in patterns if p not in REGISTRY]
    if unknown:
        raise ValueError(f"unknown pattern(s) {', '.join(unknown)}; known: {', '.join(PATTERNS)}")
    claimed: set[Any] = set()
    found: list[Match] = []
    misses: list[Miss] = []
    for name in _ORDER:
        if name not in patterns:
            continue
        for node in list(gm.graph.nodes):
            if node in claimed:
                continue
            m = REGISTRY[name].match(node)
            if isinstance(m, Miss):
                misses.append(m)
                continue
            if m is None or any(n in claimed for n in m.nodes):
                continue
            claimed.update(m.nodes)
            m.locations = locations(m.nodes)
            m.builtin = REGISTRY[name].builtin
            found.append(m)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    found.sort(key=lambda m: order[m.output])
    misses = [m for m in misses if m.node not in claimed]
    misses.sort(key=lambda m: order[m.node])
    return found, misses


__all__ = [
    "BUILTINS",
    "PATTERNS",
    "REGISTRY",
    "Location",
    "Match",
    "Miss",
    "Pattern",
    "find_matches",
    "location",
    "op_name",
    "scan",
]
