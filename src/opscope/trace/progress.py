"""Where a long piece of work has got to, told to whoever asked (a front-end's progress bar).

The core never draws anything: it calls :func:`tell` with a stage, how much is done and the
total (0: not known), and the caller that opened :func:`reporting` decides what to show.
Stages told: ``read`` (bytes of the trace file read, of its size on disk: compressed bytes
for a gzip file), ``link`` (the file read, its events being built and linked), ``analyse``
(0 of the trace's events: the analysis has begun), ``rank`` (ranks of a job analysed in one
process, of its ranks).  Without a listener a call costs a global read.  The listener may be
called from the reading threads; it must be quick and thread-safe."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

Listener = Callable[[str, int, int], None]

_listener: list[Listener | None] = [None]  # the one listener now (a cell, set in place)
_lock = threading.Lock()


@contextlib.contextmanager
def reporting(listener: Listener | None) -> Iterator[None]:
    """``listener(stage, done, total)`` told of the work done inside the block (the one before
    it again after; None: nobody)."""
    with _lock:
        before, _listener[0] = _listener[0], listener
    try:
        yield
    finally:
        with _lock:
            _listener[0] = before


def tell(stage: str, done: int, total: int) -> None:
    """Tell the listener, if any, that ``done`` of ``total`` of ``stage`` is done."""
    listener = _listener[0]
    if listener is not None:
        listener(stage, done, total)


__all__ = ["Listener", "reporting", "tell"]
