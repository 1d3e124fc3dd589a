"""Number formatting shared by the renderers."""

from __future__ import annotations

import re
from typing import Any


def us(value: float | None) -> str:
    """Microseconds as a short human string: 12.3 µs, 4.56 ms, 1.23 s."""
    if value is None:
        return "—"
    v = float(value)
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} s"
    if abs(v) >= 1e3:
        return f"{v / 1e3:.2f} ms"
    if abs(v) >= 100:
        return f"{v:.0f} µs"
    if abs(v) >= 10:
        return f"{v:.1f} µs"
    return f"{v:.2f} µs"


def num(value: float | None, digits: int = 3) -> str:
    """A figure for reading, to ``digits`` significant digits (62.4, 0.167, 1.31e+12); JSON
    keeps the exact value."""
    if value is None:
        return "—"
    v = float(value)
    if v.is_integer() and abs(v) < 10**digits:
        return str(int(v))
    return f"{v:.{digits}g}"


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def shorten_kernel(name: str, width: int) -> str:
    """A kernel name in at most ``width`` characters, keeping what tells kernels apart: without
    a leading ``void`` and the parameter list, then the head and the distinguishing tail (tile
    sizes, template arguments) around an ellipsis.  JSON and Markdown keep the full name."""
    if len(name) <= width:
        return name
    n = name[5:] if name.startswith("void ") else name
    if n.endswith(")"):
        depth = 0
        for i in range(len(n) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(n[i], 0)
            if depth == 0:
                if i > 0:
                    n = n[:i]
                break
    if len(n) <= width:
        return n
    keep = max(2, width - 1)
    head = keep // 2
    return n[:head] + "…" + n[len(n) - (keep - head) :]


# the space between a number and its unit (12.3 µs, 45 %, 1.2 GB/s): never a line break
_UNIT_SPACE = re.compile(r"(?<=\d) (?=(?:[µmn]?s|%|[KMGT]i?B(?:/s)?|[KMGTP]?FLOP/s|[x×])(?!\w))")


def line_spans(plain: str, width: int) -> list[tuple[int, int]]:
    """Where to cut ``plain`` into lines of at most ``width`` characters: at spaces, never
    inside a word nor between a value and its unit (a word longer than a line has its own)."""
    keep = {m.start() for m in _UNIT_SPACE.finditer(plain)}
    spans: list[tuple[int, int]] = []
    start = 0
    last_break = -1
    i = 0
    n = len(plain)
    while i < n:
        if plain[i] == " " and i not in keep:
            last_break = i
        if i - start >= width and last_break > start:
            spans.append((start, last_break))
            start = last_break + 1
            last_break = -1
            i = start
            continue
        i += 1
    spans.append((start, n))
    return spans


def print_wrapped(console: Any, text: Any) -> None:
    """Print ``text`` (a str or rich Text) wrapped at the console's width by
    :func:`line_spans`."""
    from rich.text import Text

    t = text if isinstance(text, Text) else Text(str(text))
    for a, b in line_spans(t.plain, console.width):
        console.print(t[a:b], overflow="fold")
