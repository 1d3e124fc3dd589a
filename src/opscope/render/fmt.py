"""Number formatting shared by the renderers."""

from __future__ import annotations


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


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"
