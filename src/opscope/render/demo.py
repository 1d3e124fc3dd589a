"""Renders the demo study (``opscope.demo/1``) for the terminal: one table per shape."""

from __future__ import annotations

import io
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from opscope.render.fmt import us

HOST_NOTE = (
    "device = the CPU: device ops are the ops that computed, device time their own (self) time"
)


def study_title(shape: dict[str, Any], device: dict[str, Any]) -> str:
    dims = "×".join(map(str, shape["shape"]))
    return f"RMSNorm {dims} {shape['dtype']} on {device.get('name', device.get('kind'))}"


def study_table(shape: dict[str, Any]) -> Table:
    t = Table(
        # no vertical rules or edges, two spaces between columns: the eight columns fit a
        # 100-column terminal with three-digit milliseconds
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
        show_edge=False,
    )
    for header, justify in (
        ("variant", "left"),
        ("device ops\nper call", "right"),
        ("device\ntime", "right"),
        ("CPU\ntime", "right"),
        ("latency\nmedian ± IQR", "right"),
        ("speedup\nvs naive", "right"),
        ("compile", "right"),
        ("numerics\nvs naive", "left"),
    ):
        t.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for v in shape["variants"]:
        lat = v.get("latency_us")
        if v.get("error"):
            numerics = Text("error", style="bold red")
        elif v.get("max_abs_err") is None:
            numerics = Text("—")
        elif v["name"] == "naive":
            numerics = Text("reference")
        elif v["numerics_ok"]:
            numerics = Text(f"ok {v['max_abs_err']:.0e}", style="green")
        else:
            numerics = Text(f"DIFFERS {v['max_abs_err']:.1e}", style="bold red")
        t.add_row(
            v["name"],
            "—" if v.get("device_ops") is None else str(v["device_ops"]),
            us(v.get("device_us")),
            us(v.get("cpu_us")),
            f"{us(lat['median'])} ± {us(lat['iqr'])}" if lat else "—",
            f"{v['speedup_vs_naive']:.2f}×" if v.get("speedup_vs_naive") else "—",
            f"{v['compile_s']:.1f} s" if v.get("compile_s") is not None else "—",
            numerics,
        )
    return t


def print_text(console: Console, data: dict[str, Any]) -> None:
    """The study's tables on a console (a terminal: its colours and width)."""
    console.print(render_study(data))


def render_text(data: dict[str, Any], width: int = 100) -> str:
    """The study as text, ``width`` columns."""
    console = Console(record=True, width=width, file=io.StringIO())
    print_text(console, data)
    return console.export_text()


def render_study(data: dict[str, Any]) -> Group:
    """The study as one rich renderable (its tables, the reading, the notes)."""
    items: list[Any] = []
    for shape in data["shapes"]:
        items += [Text(study_title(shape, data["device"]), style="table.title"), Text("")]
        items.append(study_table(shape))
        if data["device"].get("kind") == "cpu":
            items += [Text(""), Text(HOST_NOTE)]
        for v in shape["variants"]:
            if v.get("error"):
                items.append(Text(f"  {v['name']} failed: {v['error']}", style="red"))
        items.append(Text(""))
    if data.get("reading"):
        items.append(Text("Reading", style="bold"))
        for line in data["reading"]:
            items.append(Text(f"  {line}"))
    for note in data.get("notes") or ():
        items.append(Text(f"  note: {note}"))
    if data.get("run_dirs"):
        items.append(
            Text(
                f"\nRun folders ({len(data['run_dirs'])}) under "
                f"{_common_parent(data['run_dirs'])}; open report.html in each.",
                style="dim",
            )
        )
    return Group(*items)


def _common_parent(paths: list[str]) -> str:
    """The folder that holds the run folders (their common ancestor; for one folder, its
    parent)."""
    import os

    try:
        common = os.path.commonpath(paths)
    except ValueError:  # absolute and relative mixed, or nothing
        return "."
    if len(set(map(os.path.normpath, paths))) <= 1:
        common = os.path.dirname(common)
    return common or "."
