"""Work whose passes release the GIL (Arrow's codecs and kernels, the C passes over text)
run side by side on threads, each item's result kept in the items' order."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")


def map_in_order(fn: Callable[[_T], _R], items: Sequence[_T], max_threads: int) -> list[_R]:
    """``[fn(x) for x in items]``, on up to ``max_threads`` threads (no more than the cores
    or the items; one: in this thread, no pool made)."""
    workers = min(len(items), os.cpu_count() or 1, max_threads)
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(fn, items))
    return [fn(x) for x in items]


__all__ = ["map_in_order"]
