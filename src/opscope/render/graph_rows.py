"""The rows of a report that speak of CUDA/HIP graphs, for every renderer: the kernel table's
graph units (a graph's replays no capture attributed, :mod:`opscope.analysis.graph_replays`)
told from its kernels, and the line saying how a capture attributed the replays."""

from __future__ import annotations

from typing import Any


def is_unit(row: dict[str, Any]) -> bool:
    """A row of ``kernels`` that is a graph's replays as a unit, not a kernel."""
    return "graph" in row


def kernel_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The kernel rows of ``kernels`` (graph units left out)."""
    return [k for k in data.get("kernels") or [] if not is_unit(k)]


def units(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [k for k in data.get("kernels") or [] if is_unit(k)]


def capture_line(data: dict[str, Any]) -> str | None:
    """``graph capture: 421 of 421 replayed kernels attributed (kernel_sequence) from ...``."""
    gc = data.get("source", {}).get("graph_capture")
    if not isinstance(gc, dict):
        return None
    matched, unmatched = int(gc.get("matched_kernels", 0)), int(gc.get("unmatched_kernels", 0))
    files = [str(f).replace("\\", "/").rsplit("/", 1)[-1] for f in gc.get("files") or []]
    shown = ", ".join(files[:3]) + (f" (+{len(files) - 3})" if len(files) > 3 else "")
    return (
        f"graph capture: {matched} of {matched + unmatched} replayed executions attributed to "
        f"the captured ops ({gc.get('method')}; {gc.get('matched_replays', 0)} of "
        f"{gc.get('replays', 0)} replays) from {shown or 'the trace'}"
    )


def hint(data: dict[str, Any]) -> str | None:
    rows = units(data)
    return str(rows[0].get("hint")) if rows and rows[0].get("hint") else None


__all__ = ["capture_line", "hint", "is_unit", "kernel_rows", "units"]
