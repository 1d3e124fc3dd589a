"""An MCP client session run in a thread of its own (a browser test's session-wide Playwright
keeps an event loop running on the main thread, where ``anyio.run`` would refuse to start)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import anyio


def run_apart(main: Callable[[], Awaitable[None]], timeout_s: float = 600.0) -> None:
    """``anyio.run(main)`` in a thread of its own; its error raised here."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=target)
    t.start()
    t.join(timeout=timeout_s)
    assert not t.is_alive(), f"the MCP session did not finish in {timeout_s:.0f} s"
    if errors:
        raise errors[0]
