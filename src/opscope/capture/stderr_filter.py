"""Keep the profiler's own chatter out of the user's terminal.

torch's CPU builds (2.13) print ``USDT:<time> <pid>:<tid> SyncActivityProfilerHandler.cpp:52]
profiler_start`` (and ``profiler_stop``) on the process's stderr each time a profiler starts or
stops - from C++, straight to file descriptor 2, where no Python setting reaches.  Where
opscope owns the process (``opscope profile``, ``demo``, ``optimize``),
:func:`quiet_profiler_lines` routes descriptor 2 through a pipe for the duration and forwards
every line but those: the program's own stderr (Python's and C's, its child processes')
arrives as before, in order, and nothing is held back once the block ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator

DROPPED = re.compile(rb"^USDT:[^\n]*\] ?profiler_(?:start|stop)\r?$")


def _forward(read_fd: int, out_fd: int, dropped: list[int]) -> None:
    pending = b""
    while True:
        try:
            chunk = os.read(read_fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        kept = []
        for line in lines:
            if DROPPED.match(line):
                dropped[0] += 1
            else:
                kept.append(line + b"\n")
        if kept:
            _write_all(out_fd, b"".join(kept))
    if pending and not DROPPED.match(pending):
        _write_all(out_fd, pending)
    os.close(read_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except OSError:
            return
        view = view[n:]


@contextlib.contextmanager
def quiet_profiler_lines(enabled: bool = True) -> Iterator[list[int]]:
    """Within the block, file descriptor 2 drops torch's ``USDT: ... profiler_start/stop``
    lines and forwards everything else; yields a one-item list counting the lines dropped.
    A no-op where descriptors cannot be redirected (no ``os.pipe``/``dup2``, or stderr is
    not a real descriptor) or when ``enabled`` is false."""
    dropped = [0]
    try:
        err_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        err_fd = -1
    if not enabled or err_fd != 2 or not hasattr(os, "pipe"):
        yield dropped
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    thread = threading.Thread(
        target=_forward, args=(read_fd, saved, dropped), name="opscope-stderr", daemon=True
    )
    thread.start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield dropped
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 2)  # from here on, writes go straight to the terminal again
        # the pipe ends when every writer is gone: this process's copy is closed by the dup2
        # above; a child process still running keeps it open, and its lines keep flowing
        # through the (daemon) thread to the saved descriptor, which stays open for it
        thread.join(timeout=5.0)
        if not thread.is_alive():
            os.close(saved)


__all__ = ["DROPPED", "quiet_profiler_lines"]
