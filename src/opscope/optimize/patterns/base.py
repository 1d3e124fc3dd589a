"""The one object a pattern is (see :mod:`opscope.optimize.patterns`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opscope.optimize.graph import Match, Miss


@dataclass(frozen=True)
class Pattern:
    name: str
    calls: str
    """The ``__name__`` of the function the patched source calls (``torch.rms_norm``:
    ``rms_norm``), counted to prove the patched lines ran."""
    builtin: str
    """The fused built-in, as the docs and the document name it."""
    written: str
    """The form written out (the docs' table)."""
    guards: str
    """When the built-in computes the same thing (the docs' table)."""
    match: Callable[[Any], Match | Miss | None]
    rewrite: Callable[[Any, dict[str, Any]], Any]
    spell: Callable[[Match, Any], str | None]
    finding: Callable[[dict[str, Any]], bool]
    """Whether a fusion finding's details (``pattern``, ``ops``, ``builtin``) name this
    pattern's chain."""

    def docs_row(self) -> str:
        return f"| `{self.name}` | {self.written} | `{self.builtin}` | {self.guards} |"


__all__ = ["Pattern"]
