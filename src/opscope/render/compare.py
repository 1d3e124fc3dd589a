"""Renders a variant comparison (``opscope.compare/1``): a terminal table and a small HTML
report with an inline SVG bar chart (no scripts, no network)."""

from __future__ import annotations

import html
import io
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from opscope.render.fmt import us


def _speedup(v: dict[str, Any]) -> str:
    sp = v.get("speedup")
    if not sp:
        return "—"
    lo, hi = sp["ci95"]
    if v.get("verdict") == "reference":
        return "1.00× (ref)"
    return f"{sp['point']:.2f}× [{lo:.2f}, {hi:.2f}]"


def table(data: dict[str, Any]) -> Table:
    dev = data.get("device", {})
    t = Table(
        title=f"Comparison on {dev.get('name', dev.get('kind', '?'))} "
        f"(reference: {data.get('reference')})",
        title_justify="left",
    )
    profiled = any(v.get("device_ops") is not None for v in data["variants"])
    columns = [
        ("variant", "left"),
        ("numerics", "left"),
        ("compile", "right"),
        ("latency\nmedian ± IQR", "right"),
        ("speedup\n[95% CI]", "right"),
        ("verdict", "left"),
    ]
    if profiled:
        columns += [("device\nops", "right"), ("device\ntime", "right"), ("CPU\ntime", "right")]
    for header, justify in columns:
        t.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    styles = {
        "faster": "green",
        "slower": "red",
        "unstable": "yellow",
        "differs": "bold red",
        "error": "bold red",
    }
    for v in data["variants"]:
        lat = v.get("latency_us")
        if v.get("error"):
            num = Text("error", style="bold red")
        elif v.get("max_abs_err") is None:
            num = Text("—")
        elif v["numerics_ok"]:
            num = Text(f"ok ({v['max_abs_err']:.1g})", style="green")
        else:
            num = Text(f"DIFFERS ({v['max_abs_err']:.2g})", style="bold red")
        cells: list[str | Text] = [
            Text(v["name"]),
            num,
            f"{v['compile_s']:.2f} s" if v.get("compile_s") is not None else "—",
            f"{us(lat['median'])} ± {us(lat['iqr'])}" if lat else "—",
            _speedup(v),
            Text(str(v.get("verdict") or "—"), style=styles.get(str(v.get("verdict")), "")),
        ]
        if profiled:
            cells += [
                "—" if v.get("device_ops") is None else str(v["device_ops"]),
                us(v.get("device_us")),
                us(v.get("cpu_us")),
            ]
        t.add_row(*cells)
    return t


def render_text(data: dict[str, Any], width: int = 130) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(table(data))
    for note in data.get("notes") or ():
        console.print(f"  note: {note}", markup=False)
    for v in data["variants"]:
        if v.get("error"):
            console.print(f"  {v['name']} failed: {v['error']}", markup=False)
        elif v.get("numerics_reason") and not v.get("numerics_ok"):
            console.print(f"  {v['name']}: numerics differ: {v['numerics_reason']}", markup=False)
        if v.get("recompiled_during_measurement"):
            console.print(
                f"  {v['name']}: recompiled while being measured: not a steady state", markup=False
            )
    return console.export_text()


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def render_html(data: dict[str, Any]) -> str:
    rows = [v for v in data["variants"] if v.get("latency_us")]
    top = max((v["latency_us"]["median"] + v["latency_us"]["iqr"] for v in rows), default=1) or 1
    bar_h, gap, left, width = 22, 8, 120, 420
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 160}" '
        f'height="{len(rows) * (bar_h + gap) + 10}" role="img" aria-label="median latency">'
    ]
    for i, v in enumerate(rows):
        y = 5 + i * (bar_h + gap)
        med = v["latency_us"]["median"]
        w = max(1, int(width * med / top))
        color = {"faster": "#1a7f37", "slower": "#cf222e"}.get(v.get("verdict", ""), "#0969da")
        svg.append(f'<text x="0" y="{y + 15}" font-size="13">{_e(v["name"])}</text>')
        svg.append(f'<rect x="{left}" y="{y}" width="{w}" height="{bar_h}" fill="{color}"/>')
        svg.append(
            f'<text x="{left + w + 6}" y="{y + 15}" font-size="12">{_e(us(med))} '
            f"({_e(_speedup(v))})</text>"
        )
    svg.append("</svg>")
    body_rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{_e(c)}</td>"
            for c in (
                v["name"],
                "error: " + v["error"]
                if v.get("error")
                else ("ok" if v["numerics_ok"] else "DIFFERS"),
                f"{v['compile_s']:.2f} s" if v.get("compile_s") is not None else "—",
                f"{us(v['latency_us']['median'])} ± {us(v['latency_us']['iqr'])}"
                if v.get("latency_us")
                else "—",
                _speedup(v),
                v.get("verdict") or "—",
                "—" if v.get("device_ops") is None else v["device_ops"],
                us(v.get("device_us")),
                us(v.get("cpu_us")),
            )
        )
        + "</tr>"
        for v in data["variants"]
    )
    heads = "".join(
        f"<th>{h}</th>"
        for h in (
            "variant",
            "numerics",
            "compile",
            "latency (median ± IQR)",
            "speedup [95% CI]",
            "verdict",
            "device ops",
            "device time",
            "CPU time",
        )
    )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\"><title>opscope comparison</title><style>"
        "body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left}</style></head><body>"
        f"<h1>Comparison (reference: {_e(data.get('reference'))})</h1>"
        f"<p>device: {_e(data.get('device', {}).get('name', ''))}</p>"
        + "".join(f"<p>note: {_e(n)}</p>" for n in data.get("notes") or ())
        + f"{''.join(svg)}<table><tr>{heads}</tr>{body_rows}</table></body></html>\n"
    )
