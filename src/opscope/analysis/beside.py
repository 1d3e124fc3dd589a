"""One part of a rank's analysis run beside the rest, on a second thread (:func:`beside`).

The critical path (its graph and section) needs only the event index and the rank's
collective records, and nothing else of the report needs it until the findings' savings.
Its work is NumPy over arrays the length of the trace, which releases the GIL, so on a
machine with two cores it runs while the op tables, roofline and rules are built.  Measured
on 2 cores (the median of fresh loads, the analysis and its lazy report dict, against
``OPSCOPE_ANALYSIS_THREADS=1``): 0.64 of the one-thread time at 1M events, 0.79 at 3M (where
the path is the longer of the two parts), 0.84-0.92 at 45k-103k events; at 14k and 27k
events, 1.00-1.01: the parts are short and mostly Python, which holds the GIL, so traces
under :data:`MIN_EVENTS` stay on one thread.

From :data:`TABLES_FIRST_EVENTS` on, the op tables are made before the thread starts, and the
path runs beside the rules only: at 10M events the derived op tables and the graph's
temporaries, together, were the analysis's highest point (5.2-5.6 GB against 3.8 GB apart);
the whole report's time moved within the machine's noise (80-89 s against 80 s; docs/
scale.md, "Where the memory goes").

The results are the same either way: the side part reads the index (whose shared arrays are
built once, :meth:`opscope.trace.index.EventIndex.memo`) and writes nothing the other reads.
``OPSCOPE_ANALYSIS_THREADS=1`` keeps the whole analysis on the calling thread.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

MIN_EVENTS = 40_000  # below this, a second thread measured no faster (see the docstring)
#: from this many events on, the tables are made before the path's thread starts, which then
#: runs beside the rules only: the derived op tables (about 100 bytes an event) and the
#: graph's temporaries no longer meet, the analysis's highest point at 10M events (docs/
#: scale.md, "Where the memory goes"); below it the time the overlap saves is worth more
TABLES_FIRST_EVENTS = 500_000
ENV = "OPSCOPE_ANALYSIS_THREADS"


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def threads_allowed() -> bool:
    """Whether a side thread may run: two CPUs or more, and not turned off by ``ENV``."""
    value = os.environ.get(ENV, "").strip()
    if value:
        try:
            if int(value) <= 1:
                return False
        except ValueError:
            pass  # an unreadable setting is the default
    return _cpus() >= 2


@contextmanager
def beside(fn: Callable[[], T], n_events: int) -> Iterator[Callable[[], T]]:
    """``fn`` started on a second thread for a trace of ``n_events`` events (see the
    module docstring for when); the block gets the function that returns its result (and
    raises what ``fn`` raised).  Otherwise the block gets ``fn`` itself, which then runs
    where it is called, as if no thread were there.  Leaving the block waits for the thread.
    """
    if n_events < MIN_EVENTS or not threads_allowed():
        yield fn
        return
    with ThreadPoolExecutor(1, thread_name_prefix="opscope-analysis") as pool:
        # the caller's context goes with it (a cluster task's scoped settings)
        future = pool.submit(contextvars.copy_context().run, fn)
        yield future.result
