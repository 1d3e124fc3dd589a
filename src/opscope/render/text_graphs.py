"""The terminal's view of CUDA/HIP graphs: how the replays were attributed (a line under the
summary) and, for graphs no capture attributed, their replays as units (a table and the hint
that a capture trace would attribute them)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from opscope.render.fmt import shorten_kernel, truncate, us
from opscope.render.graph_rows import capture_line, hint, is_unit, kernel_rows, units


def replays_table(data: dict[str, Any], top: int = 10, name_width: int = 30) -> Table | None:
    """One row per graph unit: replays, time per replay, kernels per replay, idle between,
    its heaviest kernel."""
    rows = units(data)
    if not rows:
        return None
    t = Table(title="Graph replays (not attributed: no capture trace)", title_justify="left")
    t.add_column("graph", no_wrap=True)
    t.add_column("replays", justify="right")
    t.add_column("per replay", justify="right")
    t.add_column("kernels", justify="right")
    t.add_column("idle between", justify="right")
    t.add_column("top kernel", no_wrap=True, max_width=name_width)
    for u in rows[:top]:
        g = u["graph"]
        first = (u.get("kernels") or [{}])[0]
        t.add_row(
            Text(truncate(u["name"], 24)),
            str(u["calls"]),
            us(g.get("device_us_per_replay")),
            f"{g.get('kernels_per_replay', 0):g}",
            us(g.get("idle_between_us")) if g.get("idle_between_us") is not None else "—",
            Text(shorten_kernel(str(first.get("name", "—")), name_width)),
        )
    return t


__all__ = ["capture_line", "hint", "is_unit", "kernel_rows", "replays_table", "units"]
