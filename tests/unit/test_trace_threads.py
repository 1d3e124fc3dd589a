"""map_in_order: every item's result, in the items' order, on threads or in this one."""

from __future__ import annotations

import threading
import time

from opscope.trace.threads import map_in_order


def test_results_keep_the_items_order_whatever_finishes_first() -> None:
    def slow_first(x: int) -> tuple[int, str]:
        time.sleep(0.02 * (5 - x))  # the first items finish last
        return x * x, threading.current_thread().name

    got = map_in_order(slow_first, list(range(5)), 4)
    assert [v for v, _ in got] == [0, 1, 4, 9, 16]


def test_one_thread_or_one_item_runs_here() -> None:
    here = threading.current_thread().name
    assert map_in_order(lambda _x: threading.current_thread().name, [1, 2, 3], 1) == [here] * 3
    assert map_in_order(lambda _x: threading.current_thread().name, [1], 8) == [here]
    assert map_in_order(lambda x: x, [], 8) == []
