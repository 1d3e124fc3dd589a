"""The calls a tool's text suggests (``ops(by_shapes=true, offset=20)``), parsed back into a
tool name and JSON arguments, so that a test can make each one."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _close(text: str, start: int) -> int:
    """The index of the ``)`` that closes the call whose arguments start at ``start``
    (brackets and JSON strings skipped), or -1."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            m = _STRING.match(text, i)
            if m is None:
                return -1
            i = m.end()
            continue
        if c in "[{(":
            depth += 1
        elif c in "]})":
            if depth == 0:
                return i if c == ")" else -1
            depth -= 1
        i += 1
    return -1


def _split(args: str) -> list[str]:
    """``a=1, b=[1, 2], c="x, y"`` at its top-level commas."""
    parts, depth, cur, i = [], 0, "", 0
    while i < len(args):
        c = args[i]
        if c == '"':
            m = _STRING.match(args, i)
            assert m is not None, args
            cur += m.group(0)
            i = m.end()
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def hints(text: str, tools: Iterable[str]) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every ``tool(...)`` in ``text`` for a tool of ``tools``, outside quoted trace data:
    ``(tool, the call as written, its arguments)``, the arguments None when they do not parse
    as ``name=JSON`` pairs."""
    text = re.sub(r"```trace-data\n.*?\n```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    names = sorted(set(tools), key=len, reverse=True)
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")\(")
    out: list[tuple[str, str, dict[str, Any] | None]] = []
    for m in pattern.finditer(text):
        end = _close(text, m.end())
        written = text[m.start() : end + 1] if end >= 0 else text[m.start() : m.start() + 80]
        if end < 0:
            out.append((m.group(1), written, None))
            continue
        args: dict[str, Any] | None = {}
        for part in _split(text[m.end() : end]):
            key, eq, value = part.partition("=")
            if not eq or not re.fullmatch(r"[a-z_][a-z0-9_]*", key):
                args = None
                break
            try:
                assert args is not None
                args[key] = json.loads(value)
            except ValueError:
                args = None
                break
        out.append((m.group(1), written, args))
    return out
