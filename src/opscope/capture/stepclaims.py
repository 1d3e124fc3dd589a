"""Which marker's steps count: the first kind of step marker that marks a step claims the run
(``optimizer.step()`` of one optimizer, a ``--step-fn`` call, ``opscope.step()``); the marks of
the other kinds, and of a second optimizer, are ignored and counted.  An optimizer that was
garbage-collected hands its claim to the next optimizer that steps."""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Any


class StepClaims:
    """The claim on a run's steps: :attr:`source` (the marker kind that claimed them, None
    before the first mark) and :attr:`ignored` (ignored marks by kind)."""

    def __init__(self) -> None:
        self.source: str | None = None
        self._owner: Any = None  # weakref to the optimizer that claimed the steps
        self.ignored: Counter[str] = Counter()

    def claim(self, source: str, owner: object) -> bool:
        """Whether a mark of kind ``source`` by ``owner`` (an optimizer, or None) counts."""
        if self.source is None or (self.source == source and self._owner_gone()):
            self.source = source
            self._owner = _weak(owner)
            return True
        if source != self.source:
            self.ignored[source] += 1
            return False
        if self._owner is not None and owner is not None and self._owner() is not owner:
            self.ignored[f"{source} (another optimizer)"] += 1
            return False
        return True

    def _owner_gone(self) -> bool:
        return self._owner is not None and self._owner() is None


def _weak(owner: object) -> Any:
    if owner is None:
        return None
    try:
        return weakref.ref(owner)
    except TypeError:  # not weakly referenceable: keep it (it lives as long as the run anyway)
        return lambda: owner


__all__ = ["StepClaims"]
