"""The user's own patterns of communication kernels (an in-house library's; ``--comm-kernels``
on the command line, :func:`add_comm_kernels` in Python, ``$OPSCOPE_COMM_KERNELS``), tried
before :mod:`opscope.trace.commnames`' table: settings of the process, or of one context (a
cluster's task), never written to the environment."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

#: The environment variable of the user's own patterns (one regular expression per line).
USER_ENV = "OPSCOPE_COMM_KERNELS"


_SCOPED_USER: ContextVar[str | None] = ContextVar("opscope_comm_kernels", default=None)


@contextmanager
def comm_kernels_scope(text: str | None) -> Iterator[None]:
    """While open, in this context only (a cluster task's), the user's patterns are ``text``
    (one per line; None: as they would be)."""
    token = _SCOPED_USER.set(text)
    try:
        yield
    finally:
        _SCOPED_USER.reset(token)


@dataclass
class _ProcessPatterns:
    """The patterns :func:`add_comm_kernels` added in this process (one per line), beside
    ``$OPSCOPE_COMM_KERNELS``: a setting of the process, never written to its environment."""

    text: str = ""


_PROCESS = _ProcessPatterns()


def user_patterns() -> str:
    """The user's patterns in force: :func:`comm_kernels_scope`'s, else ``$OPSCOPE_COMM_KERNELS``
    (:data:`USER_ENV`) with those :func:`add_comm_kernels` added; "" when none."""
    scoped = _SCOPED_USER.get()
    if scoped is not None:
        return scoped.strip()
    env = os.environ.get(USER_ENV, "").strip()
    return "\n".join(r for r in (env, _PROCESS.text) if r).strip()


@contextmanager
def process_comm_kernels(*regexes: str) -> Iterator[None]:
    """While open, in every thread of this process (the CLI's ``--comm-kernels`` for one
    command), ``regexes`` count as communication too; nothing of them outlives the block.
    Raises ValueError for a pattern that is not a regular expression."""
    old = _PROCESS.text
    add_comm_kernels(*regexes)
    try:
        yield
    finally:
        _PROCESS.text = old


def check_pattern(regex: str) -> str | None:
    """Why ``regex`` cannot be a pattern of communication kernels, or None."""
    if not regex.strip():
        return "an empty pattern"
    try:
        re.compile(regex)
    except re.error as exc:
        return f"{regex!r} is not a regular expression ({exc})"
    return None


def add_comm_kernels(*regexes: str) -> None:
    """Count device kernels whose name matches any of ``regexes`` as communication, from the
    next trace read on (an in-house library's kernels; ``--comm-kernels`` on the command
    line).  Raises ValueError for a pattern that is not a regular expression."""
    for regex in regexes:
        why = check_pattern(regex)
        if why is not None:
            raise ValueError(why)
    known = [r for r in _PROCESS.text.splitlines() if r.strip()]
    _PROCESS.text = "\n".join(dict.fromkeys([*known, *regexes]))
