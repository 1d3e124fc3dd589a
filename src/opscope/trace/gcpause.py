"""The cyclic garbage collector paused while acyclic data is built (:func:`collector_paused`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic collector off inside the block, restored after it (nested blocks and
    a collector the caller had already turned off are left as they were).

    Decoding events, building op rows, report dicts and instance dicts make hundreds of
    thousands of containers that hold no cycle; each allocation threshold crossed meanwhile
    sets the collector scanning every container alive (the trace's too): 10-15 % of an
    analysis, 30 % of building the path's segment dicts.  Reference counting still frees
    everything that is dropped; a cycle made inside waits for the next collection after.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
