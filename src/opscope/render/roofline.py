"""Roofline views of :meth:`opscope.analysis.roofline.Roofline.to_dict` data.

``render_svg(data)`` - a self-contained SVG (no scripts, no external references): log-log axes
of arithmetic intensity (FLOP/byte) against achieved FLOP/s, one roofline per (dtype, unit)
in use with its ridge point marked, one dot per (op, shapes) sized by its device time and
coloured by its bound; every op name is escaped and shown as a ``<title>`` tooltip.
``render_text(data, top)`` - a rich table for ``opscope report --roofline``.
"""

from __future__ import annotations

import io
import math
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from rich.console import Console
from rich.table import Table
from rich.text import Text

from opscope.render.fmt import pct, truncate, us

BOUND_COLOURS = {
    "compute": "#1f77b4",
    "memory": "#2ca02c",
    "overhead": "#d62728",
    None: "#7f7f7f",
}
_W, _H = 760, 500
_L, _R, _T, _B = 80, 170, 40, 60  # margins: room for tick labels and the legend


def _si(value: float | None, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    for div, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _ceilings(data: dict[str, Any]) -> list[tuple[str, float, float]]:
    """(label, peak FLOP/s, bandwidth) of each compute class the costed rows use."""
    peaks = data.get("peaks") or {}
    flops: dict[str, float] = peaks.get("flops") or {}
    bw = float(peaks.get("bandwidth") or 0.0)
    if not flops or bw <= 0:
        return []
    used: set[tuple[str, bool]] = set()
    for r in data.get("op_shapes", []):
        if r.get("intensity"):
            used.add((r.get("dtype") or "fp32", bool(r.get("matrix"))))
    out: dict[float, str] = {}
    for dtype, matrix in sorted(used):
        if matrix:
            peak = flops.get(dtype) or flops.get("fp32")
            label = f"{dtype} matrix"
        else:
            peak = flops.get("vector") or flops.get("fp32")
            label = "vector"
        if peak:
            out.setdefault(float(peak), label)
    if not out and "fp32" in flops:
        out[float(flops["fp32"])] = "fp32"
    return [(label, peak, bw) for peak, label in sorted(out.items())]


def _points(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r
        for r in data.get("op_shapes", [])
        if (r.get("intensity") or 0) > 0
        and (r.get("achieved_flops") or 0) > 0
        and (r.get("costed_us") or 0) > 0
    ]


def render_svg(data: dict[str, Any]) -> str:
    """The roofline chart as SVG text (valid XML, no scripts)."""
    pts = _points(data)
    ceilings = _ceilings(data)
    device = data.get("device") or {}
    title = f"Roofline — {device.get('name') or device.get('kind') or 'device'}"
    xs = [float(p["intensity"]) for p in pts]
    ys = [float(p["achieved_flops"]) for p in pts]
    for _, peak, bw in ceilings:
        xs.append(peak / bw)
        ys.append(peak)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="white"/>',
        f'<text x="{_L}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    if not xs:
        parts.append(
            f'<text x="{_L}" y="{_H / 2}">No op with FLOPs and device time to place.</text>'
        )
        parts.append("</svg>")
        return "\n".join(parts)
    x0 = 10 ** math.floor(math.log10(min(xs)) - 0.3)
    x1 = 10 ** math.ceil(math.log10(max(xs)) + 0.3)
    y0 = 10 ** math.floor(math.log10(min(ys)) - 0.3)
    y1 = 10 ** math.ceil(math.log10(max(ys)) + 0.3)
    pw, ph = _W - _L - _R, _H - _T - _B

    def px(x: float) -> float:
        return _L + pw * (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))

    def py(y: float) -> float:
        return _T + ph * (1 - (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)))

    parts.append(f'<rect x="{_L}" y="{_T}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
    for k in range(round(math.log10(x0)), round(math.log10(x1)) + 1):
        x = px(10.0**k)
        parts.append(f'<line x1="{x:.1f}" y1="{_T}" x2="{x:.1f}" y2="{_T + ph}" stroke="#eee"/>')
        parts.append(f'<text x="{x:.1f}" y="{_T + ph + 16}" text-anchor="middle">1e{k}</text>')
    for k in range(round(math.log10(y0)), round(math.log10(y1)) + 1):
        y = py(10.0**k)
        parts.append(f'<line x1="{_L}" y1="{y:.1f}" x2="{_L + pw}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{_L - 6}" y="{y + 4:.1f}" text-anchor="end">1e{k}</text>')
    parts.append(
        f'<text x="{_L + pw / 2}" y="{_H - 18}" text-anchor="middle">'
        "arithmetic intensity (FLOP/byte)</text>"
    )
    parts.append(
        f'<text x="18" y="{_T + ph / 2}" text-anchor="middle" '
        f'transform="rotate(-90 18 {_T + ph / 2})">achieved FLOP/s</text>'
    )
    for label, peak, bw in ceilings:
        ridge = peak / bw
        start = max(x0, y0 / bw)
        line = [(start, start * bw), (ridge, peak), (x1, peak)]
        pts_attr = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in line if a >= x0)
        parts.append(
            f'<polyline points="{pts_attr}" fill="none" stroke="#222" stroke-width="1.5"/>'
        )
        tip = f"{label}: peak {_si(peak, 'FLOP/s')}, {_si(bw, 'B/s')}, ridge {ridge:.3g} FLOP/B"
        parts.append(
            f'<circle cx="{px(ridge):.1f}" cy="{py(peak):.1f}" r="3.5" fill="#222">'
            f"<title>{escape(tip)}</title></circle>"
        )
        caption = escape(f"{label} {_si(peak, 'FLOP/s')}")
        parts.append(f'<text x="{px(ridge) + 6:.1f}" y="{py(peak) - 6:.1f}">{caption}</text>')
    total = sum(float(p["costed_us"]) for p in pts) or 1.0
    for p in sorted(pts, key=lambda r: -float(r["costed_us"])):
        share = float(p["costed_us"]) / total
        radius = max(2.5, min(18.0, 18.0 * math.sqrt(share)))
        colour = BOUND_COLOURS.get(p.get("bound"), BOUND_COLOURS[None])
        shapes = p.get("input_dims") or ""
        tip = (
            f"{p['name']} {shapes}\n{us(float(p['costed_us']))} over {p.get('costed_calls')} "
            f"calls, {_si(p.get('achieved_flops'), 'FLOP/s')}, intensity "
            f"{float(p['intensity']):.3g} FLOP/B, bound: {p.get('bound') or '—'}"
        )
        parts.append(
            f'<circle cx="{px(float(p["intensity"])):.1f}" '
            f'cy="{py(float(p["achieved_flops"])):.1f}" r="{radius:.1f}" '
            f'fill={quoteattr(colour)} fill-opacity="0.6" stroke={quoteattr(colour)}>'
            f"<title>{escape(tip)}</title></circle>"
        )
    lx = _L + pw + 14
    for i, (bound, colour) in enumerate(BOUND_COLOURS.items()):
        y = _T + 10 + 18 * i
        parts.append(f'<circle cx="{lx}" cy="{y}" r="5" fill="{colour}" fill-opacity="0.6"/>')
        parts.append(f'<text x="{lx + 10}" y="{y + 4}">{escape(bound or "no peaks")}</text>')
    skipped = len(data.get("op_shapes", [])) - len(pts)
    parts.append(
        f'<text x="{lx}" y="{_T + 10 + 18 * 5}" font-size="10">dot area: device time</text>'
    )
    if skipped:
        parts.append(
            f'<text x="{lx}" y="{_T + 10 + 18 * 6}" font-size="10">{skipped} rows without '
            "FLOPs or time</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


# the table's numeric columns: (header, cell width), in the order they are dropped when the
# table would not fit (the last ones are what the roofline is read for)
_COLUMNS = (
    ("B/call", 8),
    ("FLOP/call", 9),
    ("calls", 6),
    ("FLOP/B", 6),
    ("dev self", 9),
    ("FLOP/s", 8),
    ("of roof", 7),
    ("bound", 9),
)
_SHAPES = 22
_SHOWN = ("calls", "dev self", "FLOP/call", "B/call", "FLOP/B", "FLOP/s", "of roof", "bound")


def _fit(width: int | None, name_width: int) -> tuple[list[str], int, int]:
    """The numeric columns kept, the op name's width and the shapes' (0: no shapes column)
    for a table at most ``width`` characters wide (None: everything)."""
    keep = list(_SHOWN)
    if width is None:
        return keep, name_width, _SHAPES
    cell = dict(_COLUMNS)
    shapes = _SHAPES

    def used() -> int:
        cols = [cell[h] for h in keep] + ([shapes] if shapes else [])
        return sum(cols) + 3 * (len(cols) + 1) + 1  # borders and padding

    order = [h for h, _ in _COLUMNS]
    while used() + name_width > width and len(keep) > 4:
        keep.remove(order.pop(0))
    if used() + name_width > width and shapes:
        shapes = 14
    if used() + name_width > width:
        shapes = 0
    name_width = max(16, min(name_width, width - used()))
    return [h for h in _SHOWN if h in keep], name_width, shapes


def roofline_table(
    data: dict[str, Any], top: int = 20, name_width: int = 30, *, width: int | None = None
) -> Table:
    """The roofline rows as a table; ``width``: at most this many characters, columns dropped
    (bytes and FLOPs per call first, then calls and intensity) rather than cells squeezed."""
    rows = [r for r in data.get("op_shapes", []) if r.get("flops") is not None]
    rows.sort(key=lambda r: -float(r.get("costed_us") or 0.0))
    keep, name_width, shapes = _fit(width, name_width)
    t = Table(
        title=f"Roofline by op and shapes (top {top} by device time)",
        title_justify="left",
        expand=False,
    )
    t.add_column("op", no_wrap=True, max_width=name_width)
    if shapes:
        t.add_column("shapes", no_wrap=True, max_width=shapes)
    for header in keep:
        if header == "bound":
            t.add_column(header, no_wrap=True)
        else:
            t.add_column(header, justify="right", no_wrap=True)
    for r in rows[:top]:
        intensity = r.get("intensity")
        cells = {
            "calls": str(r.get("calls", "")),
            "dev self": us(r.get("costed_us")),
            "FLOP/call": _si(r.get("flops_per_call"), "").strip(),
            "B/call": _si(r.get("bytes_per_call"), "").strip(),
            "FLOP/B": "—" if intensity is None else f"{intensity:.3g}",
            "FLOP/s": _si(r.get("achieved_flops"), "").strip(),
            "of roof": pct(r.get("roofline_share")),
            "bound": str(r.get("bound") or "—"),
        }
        row: list[Any] = [Text(truncate(str(r["name"]), name_width))]
        if shapes:
            row.append(Text(truncate(str(r.get("input_dims") or ""), shapes)))
        row += [Text(cells[h]) if h == "bound" else cells[h] for h in keep]
        t.add_row(*row)
    return t


def empty_reason(rows: list[dict[str, Any]]) -> str:
    """Why no op is on the roofline (no FLOPs and bytes for any row)."""
    if not any(r.get("input_dims") for r in rows):
        return (
            "No op on the roofline: the trace records no input shapes, so no op's FLOPs and "
            "bytes can be counted (profile with record_shapes=True; opscope profile does)."
        )
    return (
        "No op on the roofline: none of the ops with recorded shapes is in the cost model "
        "(matmuls, convolutions, attention, norms, elementwise; docs/cost-model.md)."
    )


def render_text(data: dict[str, Any], top: int = 20, width: int = 130) -> str:
    """The roofline as a terminal table, with the peaks used and the notes."""
    console = Console(record=True, width=width, file=io.StringIO())
    peaks = data.get("peaks")
    if peaks:
        flops = ", ".join(f"{k} {_si(v, 'FLOP/s')}" for k, v in sorted(peaks["flops"].items()))
        console.print(
            Text(f"Peaks: {peaks.get('name')} — {flops}; memory {_si(peaks['bandwidth'], 'B/s')}")
        )
        console.print(Text(f"Source: {peaks.get('source')}", style="dim"))
    else:
        console.print(Text("Peaks: unknown for this device (no bound)"))
    factor = data.get("overhead_factor")
    console.print(
        Text(
            f"overhead = device time > {factor:g}x the roofline time (launch/latency bound)"
            if factor
            else ""
        )
    )
    rows = data.get("op_shapes") or []
    if any(r.get("flops") is not None for r in rows):
        console.print(roofline_table(data, top, width=width))
    else:
        console.print(Text(empty_reason(rows)))
    for note in data.get("notes", []):
        console.print(Text(f"note: {note}", style="yellow"))
    return console.export_text()
