"""Renders a trace diff (``opscope.diff/1``) as text (rich), Markdown or HTML."""

from __future__ import annotations

import html
import io
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from opscope.render.fmt import truncate, us


def _signed(v: float) -> str:
    return ("+" if v > 0 else "") + us(v) if v else "0"


def _cell(side: dict[str, Any] | None, key: str) -> str:
    return "—" if side is None else us(side[key])


def render_text(data: dict[str, Any], top: int = 20, width: int = 110) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    a, b = data["a"], data["b"]
    for label, side in (("A", a), ("B", b)):
        dev = side["device"]
        console.print(
            f"{label}: {', '.join(side['paths'])} ({dev['kind']}, {dev['name']})", markup=False
        )
    if data["cross_device"]:
        console.print("[yellow]A and B ran on different devices: a cross-device comparison[/]")
    t = data["totals"]
    console.print(
        f"device time {us(a['device_total_us'])} → {us(b['device_total_us'])} "
        f"({_signed(t['delta_device_us'])}); CPU self {us(a['cpu_total_us'])} → "
        f"{us(b['cpu_total_us'])} ({_signed(t['delta_cpu_us'])})"
    )
    tab = Table(title=f"Ops by |Δ device time| (top {top})", title_justify="left")
    for h, j in (
        ("op", "left"),
        ("calls A→B", "right"),
        ("device A", "right"),
        ("device B", "right"),
        ("Δ device", "right"),
        ("Δ CPU self", "right"),
    ):
        tab.add_column(h, justify=j, no_wrap=True)  # type: ignore[arg-type]
    name_w = max(16, width - 72)
    for r in data["ops"][:top]:
        ca = r["a"]["calls"] if r["a"] else 0
        cb = r["b"]["calls"] if r["b"] else 0
        tab.add_row(
            Text(truncate(r["name"], name_w)),
            f"{ca}→{cb}",
            _cell(r["a"], "device_self_us"),
            _cell(r["b"], "device_self_us"),
            _signed(r["delta_device_us"]),
            _signed(r["delta_cpu_us"]),
        )
    console.print(tab)
    f = data["findings"]
    # findings in both whose runtime calls the two traces spell differently (cuda*/hip*)
    renamed = [m for m in f.get("matched", []) if m.get("renamed")]
    if f["resolved"] or f["new"] or renamed:
        console.print(f"findings resolved: {len(f['resolved'])}, new: {len(f['new'])}")
        for x in f["resolved"][:top]:
            console.print(f"  ✓ resolved: {x['title']}", markup=False)
        for x in f["new"][:top]:
            console.print(f"  ✗ new: {x['title']}", markup=False)
        for m in renamed[:top]:
            console.print(
                f"  = in both: {m['title']} (at stake {us(m['a']['time_at_stake_us'])} → "
                f"{us(m['b']['time_at_stake_us'])})",
                markup=False,
            )
    return console.export_text()


def render_markdown(data: dict[str, Any], top: int = 30) -> str:
    t = data["totals"]
    out = [
        "# opscope diff",
        "",
        f"A: `{', '.join(data['a']['paths'])}` · B: `{', '.join(data['b']['paths'])}`",
        "",
        f"Δ device time {_signed(t['delta_device_us'])} · Δ CPU self {_signed(t['delta_cpu_us'])}"
        + (" · cross-device" if data["cross_device"] else ""),
        "",
        "| op | calls A→B | device A | device B | Δ device | Δ CPU self |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in data["ops"][:top]:
        ca = r["a"]["calls"] if r["a"] else 0
        cb = r["b"]["calls"] if r["b"] else 0
        name = truncate(r["name"], 80).replace("|", "\\|")
        out.append(
            f"| `{name}` | {ca}→{cb} | {_cell(r['a'], 'device_self_us')} | "
            f"{_cell(r['b'], 'device_self_us')} | {_signed(r['delta_device_us'])} | "
            f"{_signed(r['delta_cpu_us'])} |"
        )
    return "\n".join(out) + "\n"


def render_html(data: dict[str, Any], top: int = 50) -> str:
    e = html.escape
    rows = []
    for r in data["ops"][:top]:
        ca = r["a"]["calls"] if r["a"] else 0
        cb = r["b"]["calls"] if r["b"] else 0
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{e(str(c))}</td>"
                for c in (
                    truncate(r["name"], 120),
                    f"{ca}→{cb}",
                    _cell(r["a"], "device_self_us"),
                    _cell(r["b"], "device_self_us"),
                    _signed(r["delta_device_us"]),
                    _signed(r["delta_cpu_us"]),
                )
            )
            + "</tr>"
        )
    t = data["totals"]
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\"><title>opscope diff</title><style>"
        "body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{padding:3px 10px;border-bottom:1px solid #ddd}</style></head><body>"
        f"<h1>opscope diff</h1><p>A: {e(', '.join(data['a']['paths']))}<br>B: "
        f"{e(', '.join(data['b']['paths']))}</p><p>Δ device time {e(_signed(t['delta_device_us']))}"
        f" · Δ CPU self {e(_signed(t['delta_cpu_us']))}</p><table><tr><th>op</th><th>calls A→B"
        "</th><th>device A</th><th>device B</th><th>Δ device</th><th>Δ CPU self</th></tr>"
        + "".join(rows)
        + "</table></body></html>\n"
    )
