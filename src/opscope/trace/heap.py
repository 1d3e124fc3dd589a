"""The C library's heap between the parts of an analysis (:func:`between_parts`).

A command that analyses a whole trace once (``opscope report``, ``opscope diff``) tells glibc
to keep the memory it frees for its next arrays (``cli.main.trace_reader_memory``): handing it
back and faulting fresh zeroed pages in again cost a third of a large report's time.  The
price is holes: at 10M events the parts' freed temporaries leave about 0.6-0.9 GB of free
heap between live arrays, resident, and the next part's temporaries fit them only in part, so
the process's peak RSS counted the holes on top of what was live.

:func:`between_parts` hands the free pages inside the heap back to the kernel
(``malloc_trim(0)``, which releases whole free pages anywhere in the heap, not only at its
top) at the few places where a large part has just let its arrays go and the next is about to
make its own: after the parse, before the compaction of the trace read, after the load,
before the graph's host chains and its cut at step bounds, before the path's section and its
pieces, and before each what-if the savings solve (each one's arrays land elsewhere in the
heap: at 10M events the holes of eight what-ifs were the report's highest point), and as the
rules end while the path may still be building beside them.  It does so only once a command
asked for it (:func:`trim_between_parts`); the library leaves the process's memory to its
caller.  Elsewhere (not glibc) it does nothing.

It hands pages back only when the heap holds at least :data:`MIN_FREE` bytes free
(``mallinfo2``): on a trace of 50-100k events the heap holds 12-32 MB free at these places,
and handing that back saved 1-3 MB of the report's peak RSS while faulting the pages in
again cost 17k page faults, about 3 % of its time (0.05 s of the kernel's); at 10M events
the holes are hundreds of MB.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from collections.abc import Callable

#: the free heap below which :func:`between_parts` hands nothing back (see the docstring)
MIN_FREE = 64 << 20


class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (malloc.h, glibc 2.33 on)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in [
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        ]
    ]


class _Trim:
    lock = threading.Lock()
    on = False
    libc: ctypes.CDLL | None = None
    free_bytes: Callable[[], int] | None = None
    min_free = MIN_FREE
    calls = 0


def trim_between_parts(on: bool = True) -> None:
    """Have :func:`between_parts` hand the heap's free pages back from now on (``on``), or
    not; for a process that analyses a trace once and wants its peak memory low."""
    with _Trim.lock:
        if on and _Trim.libc is None and sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                libc.malloc_trim  # noqa: B018 - glibc's, absent elsewhere
            except (OSError, AttributeError):
                return
            _Trim.libc = libc
            _Trim.free_bytes = _free_reader(libc)
        _Trim.on = on and _Trim.libc is not None


def mallinfo2(libc: ctypes.CDLL | None = None) -> Callable[[], MallInfo2] | None:
    """glibc's ``mallinfo2`` of ``libc`` (None: the C library this process uses), ready to
    call; None where there is none (not glibc, or glibc before 2.33)."""
    try:
        if libc is None:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        info = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    info.restype = MallInfo2
    info.argtypes = []
    read: Callable[[], MallInfo2] = info
    return read


def _free_reader(libc: ctypes.CDLL) -> Callable[[], int] | None:
    """A function of the bytes free in the heap (``mallinfo2``), or None (glibc before
    2.33: then every call hands pages back)."""
    info = mallinfo2(libc)
    if info is None:
        return None

    def free_bytes() -> int:
        return int(info().fordblks)

    return free_bytes


def between_parts() -> bool:
    """The heap's free pages handed back to the kernel, when asked for
    (:func:`trim_between_parts`) and the heap holds at least :data:`MIN_FREE` bytes free;
    whether that was done."""
    if not _Trim.on or _Trim.libc is None:
        return False
    free = _Trim.free_bytes
    if free is not None and free() < _Trim.min_free:
        return False
    _Trim.libc.malloc_trim(0)
    _Trim.calls += 1
    return True


def trims() -> int:
    """How many times :func:`between_parts` handed pages back (for tests)."""
    return _Trim.calls


__all__ = ["MallInfo2", "between_parts", "mallinfo2", "trim_between_parts", "trims"]
