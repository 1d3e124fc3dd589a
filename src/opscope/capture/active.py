"""``opscope.step()``: a program marks its own steps for ``opscope profile``.

Contract: :func:`step` ends one step of the program that ``opscope profile`` is running: the
profiler advances exactly as if ``p.step()`` of an ``opscope.profile`` session were called.
Outside ``opscope profile`` it does nothing and costs a global lookup, so a program can keep
the call in its loop for good.

``opscope profile`` registers its step handler with :func:`set_handler` before the program
starts and removes it afterwards; this module holds only that one reference and imports
nothing heavy (no torch), so ``import opscope; opscope.step()`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable

#: What marked a step: the program's ``opscope.step()`` call.
API_SOURCE = "api"

# one slot, not a module global rebound with `global`: step() reads it without a lock
_slot: list[Callable[[str], None] | None] = [None]


def step() -> None:
    """Mark the end of one step (one training or inference iteration) for ``opscope profile``.

    Call it once per iteration, after the iteration's work.  A no-op when the program is not
    running under ``opscope profile``.
    """
    handler = _slot[0]
    if handler is not None:
        handler(API_SOURCE)


def set_handler(handler: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Install ``handler`` (called with the marking source, ``"api"``) and return the previous
    one; ``None`` removes it."""
    previous = _slot[0]
    _slot[0] = handler
    return previous


def is_active() -> bool:
    """Whether a step handler is installed (the program runs under ``opscope profile``)."""
    return _slot[0] is not None


__all__ = ["API_SOURCE", "is_active", "set_handler", "step"]
