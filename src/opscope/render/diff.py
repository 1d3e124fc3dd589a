"""Renders a trace diff (``opscope.diff/1``) as text (rich), Markdown or HTML."""

from __future__ import annotations

import html
import io
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from opscope.render.fmt import print_wrapped, shorten_kernel, truncate, us


def _delta_table(title: str, what: str, *more: str) -> Table:
    """A table of A→B deltas: ``what`` (left), calls, device A and B, Δ device, then ``more``
    (right-aligned), no cell wrapped."""
    tab = Table(title=title, title_justify="left")
    tab.add_column(what, justify="left", no_wrap=True)
    for h in ("calls A→B", "device A", "device B", "Δ device", *more):
        tab.add_column(h, justify="right", no_wrap=True)
    return tab


def _signed(v: float) -> str:
    return ("+" if v > 0 else "") + us(v) if v else "0"


def _cell(side: dict[str, Any] | None, key: str) -> str:
    return "—" if side is None else us(side[key])


def _step_line(label: str, side: dict[str, Any]) -> str:
    steps = side.get("steps") or []
    wall = us(side["summary"].get("wall_us"))
    if not steps:
        return f"{label}: wall {wall}, no profiler steps"
    walls = [s["wall_us"] for s in steps]
    shown = ", ".join(us(w) for w in walls[:8]) + (", …" if len(walls) > 8 else "")
    return f"{label}: wall {wall}, {len(steps)} step{'s' if len(steps) > 1 else ''} ({shown})"


def _names_line(label: str, names: list[str], width: int) -> str:
    head = f"only in {label} ({len(names)}): "
    out = head
    for i, n in enumerate(names):
        piece = (", " if i else "") + n
        rest = len(names) - i
        if len(out) + len(piece) > width - 12 and i:
            return out + f", … {rest} more"
        out += piece
    return out


def render_text(data: dict[str, Any], top: int = 20, width: int = 100) -> str:
    """The diff as text no wider than ``width``: the two sides, wall and step times (and
    warnings when a side's steps cannot carry a comparison), the ops by device time delta, the
    ops and kernels on one side only, the kernels by delta, the timeline's deltas and the
    findings resolved and new."""
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
        f"{us(b['cpu_total_us'])} ({_signed(t['delta_cpu_us'])})",
        markup=False,
    )
    for label, side in (("A", a), ("B", b)):
        console.print(_step_line(label, side), markup=False)
    steps = data.get("steps") or {}
    med = steps.get("median_step_us") or {}
    if med.get("a") is not None and med.get("b") is not None:
        console.print(
            f"median step {us(med['a'])} → {us(med['b'])} "
            f"({_signed(steps['delta_median_step_us'])})",
            markup=False,
        )
    for w in steps.get("warnings") or []:
        print_wrapped(console, Text(f"warning: {w}", style="yellow"))
    tab = _delta_table(f"Ops by |Δ device time| (top {top})", "op", "Δ CPU self")
    name_w = max(16, width - 75)
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
    for label, key in (("A", "only_in_a"), ("B", "only_in_b")):
        if data.get(key):
            console.print(_names_line(f"{label} (ops)", data[key], width), markup=False)
    kernels = data.get("kernels") or []
    if kernels:
        ktab = _delta_table(f"Kernels by |Δ device time| (top {top})", "kernel")
        kname_w = max(16, width - 62)
        for r in kernels[:top]:
            ka, kb = r["a"], r["b"]
            ktab.add_row(
                Text(shorten_kernel(r["name"], kname_w)),
                f"{ka['calls'] if ka else 0}→{kb['calls'] if kb else 0}",
                _cell(ka, "device_us"),
                _cell(kb, "device_us"),
                _signed(r["delta_device_us"]),
            )
        console.print(ktab)
        for label, side_key in (("A", "b"), ("B", "a")):
            only = [str(r["name"]) for r in kernels if r[side_key] is None]
            if only:
                console.print(
                    _names_line(f"{label} (kernels)", [shorten_kernel(n, 60) for n in only], width),
                    markup=False,
                )
    td = data.get("timeline_delta") or {}
    parts = [
        f"{label} {_signed(td[k])}"
        for k, label in (
            ("wall_us", "wall"),
            ("device_busy_us", "device busy"),
            ("device_idle_us", "idle"),
            ("compute_us", "compute"),
            ("comm_us", "comm"),
            ("exposed_comm_us", "exposed comm"),
            ("memcpy_us", "memcpy"),
        )
        if td.get(k) is not None
    ]
    if parts:
        print_wrapped(console, "timeline Δ (B - A): " + " · ".join(parts))
    f = data["findings"]
    # findings in both whose runtime calls the two traces spell differently (cuda*/hip*)
    renamed = [m for m in f.get("matched", []) if m.get("renamed")]
    if f["resolved"] or f["new"] or renamed:
        console.print(f"findings resolved: {len(f['resolved'])}, new: {len(f['new'])}")
        for x in f["resolved"][:top]:
            print_wrapped(console, f"  ✓ resolved: {x['title']}")
        for x in f["new"][:top]:
            print_wrapped(console, f"  ✗ new: {x['title']}")
        for m in renamed[:top]:
            print_wrapped(
                console,
                f"  = in both: {m['title']} (at stake {us(m['a']['time_at_stake_us'])} → "
                f"{us(m['b']['time_at_stake_us'])})",
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
