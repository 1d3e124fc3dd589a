"""HTML pieces of a report, every trace string escaped (op names in real traces contain ``<``,
``>`` and quotes): the demo's study section (its comparison table and reading), the roofline
chart, and the report as plain tables (for readers without JavaScript).

The HTML report itself is the explorer's static page (:mod:`opscope.explorer.static_html`),
which places these pieces; the explorer's server page shows the sections too.  Nothing here
knows about the explorer.
"""

from __future__ import annotations

import html
from typing import Any

from opscope.render.finding_groups import group_findings
from opscope.render.fmt import pct, truncate, us
from opscope.render.graph_rows import capture_line, hint, kernel_rows, units

EXTENSION = ".html"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _bar(fraction: float) -> str:
    return f" {'▇' * max(0, round(8 * fraction))}"  # text: the page's CSP forbids style attributes


def _table(headers: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for r in rows:
        cells = []
        for i, c in enumerate(r):
            cls = "n" if i in numeric else ("name" if i == 0 else "")
            cells.append(f'<td class="{cls}">{c}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def study_section(study: dict[str, Any]) -> str:
    """The demo's comparison table for one shape (all variants), with the plain reading."""
    rows = []
    for v in study.get("variants", []):
        lat = v.get("latency_us") or {}
        num = (
            '<span class="ok">ok</span>'
            if v.get("numerics_ok")
            else '<span class="bad">differs</span>'
            if v.get("max_abs_err") is not None
            else "—"
        )
        rows.append(
            [
                _e(v["name"])
                + (f' <span class="bad">({_e(v["error"])})</span>' if v.get("error") else ""),
                _e(v.get("device_ops") if v.get("device_ops") is not None else "—"),
                _e(us(v.get("device_us"))),
                _e(us(v.get("cpu_us"))),
                _e(f"{us(lat.get('median'))} ± {us(lat.get('iqr'))}" if lat else "—"),
                _e(f"{v['speedup_vs_naive']:.2f}×" if v.get("speedup_vs_naive") else "—"),
                _e(f"{v['compile_s']:.1f} s" if v.get("compile_s") is not None else "—"),
                num,
            ]
        )
    table = _table(
        [
            "variant",
            "device ops/call",
            "device time",
            "CPU time",
            "latency (median ± IQR)",
            "speedup vs naive",
            "compile",
            "numerics",
        ],
        rows,
        {1, 2, 3, 4, 5, 6},
    )
    reading = "".join(f'<p class="reading">{_e(line)}</p>' for line in study.get("reading", []))
    shape = "×".join(map(str, study.get("shape", []))) + f" {study.get('dtype', '')}"
    return f"<h2>RMSNorm study at {_e(shape)}</h2>{table}{reading}"


def sections(data: dict[str, Any]) -> str:
    """The sections placed at the top of the page's Summary view: the study (when the report
    carries one) and the roofline chart (when it has one)."""
    study = f'<div class="study">{study_section(data["study"])}</div>' if data.get("study") else ""
    return study + distributed_section(data) + neuron_section(data) + roofline_section(data)


def _gbps(v: Any) -> str:
    return "—" if v is None else f"{float(v):.2f} GB/s"


def distributed_section(data: dict[str, Any], top: int = 64) -> str:
    """Communication per rank, collectives by type and the stragglers (the report's
    ``distributed`` section)."""
    d = data.get("distributed")
    if not isinstance(d, dict):
        return ""
    rows = [
        [
            _e(r.get("rank")),
            _e(us(r.get("wall_us"))),
            _e(us(r.get("compute_us"))),
            _e(us(r.get("comm_us"))),
            _e(us(r.get("exposed_comm_us"))),
            _e(pct(r.get("overlap_share"))),
            _e(us(r.get("wait_us"))),
            _e(us(r.get("idle_us"))),
        ]
        for r in (d.get("per_rank") or [])[:top]
    ]
    heads = ["rank", "wall", "compute", "comm", "exposed", "overlap", "wait", "idle"]
    parts = [_table(heads, rows, set(range(8)))]
    coll = [
        [
            _e(c.get("name")),
            _e(c.get("pg")),
            _e(c.get("count")),
            _e(c.get("bytes")),
            _e(us(c.get("dur_us"))),
            _e(_gbps(c.get("algbw_gbps"))),
            _e(_gbps(c.get("busbw_gbps"))),
        ]
        for c in (d.get("by_collective") or [])[:top]
    ]
    if coll:
        heads = ["collective", "group", "count", "bytes", "time", "algbw", "busbw"]
        parts.append("<h3>Collectives by type</h3>" + _table(heads, coll, {2, 3, 4, 5, 6}))
    late = [
        [
            _e(r.get("rank")),
            _e(r.get("times_last")),
            _e(us(float(r.get("caused_wait_us") or 0.0) / max(1, len(d.get("ranks") or []) - 1))),
            _e(us(r.get("own_wait_us"))),
            _e(r.get("cause") or "—"),
        ]
        for r in d.get("stragglers") or []
    ]
    if late:
        heads = ["rank", "times last", "others' wait each", "own wait", "why"]
        parts.append("<h3>Stragglers</h3>" + _table(heads, late, {1, 2, 3}))
    clock = d.get("clock") or {}
    missing = d.get("missing_ranks") or []
    meta = (
        f"{len(d.get('ranks') or [])} of {d.get('world_size')} ranks (from "
        f"{d.get('rank_source')}){f', {len(missing)} missing' if missing else ''} · "
        f"{len(d.get('instances') or [])} collective instances matched · clock offsets "
        f"{'applied' if clock.get('applied') else 'not applied'} ({clock.get('method')})"
    )
    return (
        f'<div class="distributed"><h2>Communication per rank</h2>{parts[0]}'
        f'<p class="meta">{_e(meta)}</p>{"".join(parts[1:])}</div>'
    )


def neuron_section(data: dict[str, Any]) -> str:
    """NeuronCore engines (a Neuron profile's device tables): per execution, the engine that
    bounds it, with Neuron Explorer's whole-profile utilisation as written."""
    nd = data.get("neuron")
    if not isinstance(nd, dict) or not nd.get("executions"):
        return ""
    rows = []
    for ex in nd["executions"]:
        share = ex.get("busy_share") or {}
        dom = str(ex.get("dominant") or "")
        rows.append(
            [
                _e(ex.get("neff") or "—"),
                _e(ex.get("op_name") or "—"),
                _e(us((ex.get("dur_ns") or 0) / 1e3)),
                _e(ex.get("bound") or "—"),
                _e(f"{dom} {pct(float(share.get(dom) or 0.0))}" if dom else "—"),
            ]
        )
    table = _table(["NEFF", "op", "duration", "bound", "busiest engine"], rows, {2})
    sm = nd.get("summary") or {}
    util = [
        f"{label} {sm[key]:.2f} %"
        for label, key in (
            ("MFU", "mfu_estimated_percent"),
            ("HFU", "hfu_estimated_percent"),
            ("MBU", "mbu_estimated_percent"),
        )
        if isinstance(sm.get(key), (int, float))
    ]
    meta = f'<p class="meta">{_e(" · ".join(util))} (Neuron Explorer)</p>' if util else ""
    return f'<div class="neuron"><h2>NeuronCore engines</h2>{table}{meta}</div>'


def roofline_section(data: dict[str, Any]) -> str:
    """The roofline chart (inline SVG: attributes only, no script, names escaped)."""
    rl = data.get("roofline")
    if not isinstance(rl, dict) or not rl.get("op_shapes"):
        return ""
    from opscope.render.roofline import render_svg

    return f'<div class="roofline"><h2>Roofline</h2>{render_svg(rl)}</div>'


def plain_tables(data: dict[str, Any], top: int = 50) -> str:
    """The report as plain HTML tables (shown where JavaScript is off), every string escaped."""
    dev = data["device"]
    src = data["source"]
    s = data["summary"]
    host = dev["kind"] == "cpu"
    parts = [
        "<h1>opscope report</h1>",
        f'<p class="meta">{_e(", ".join(src["paths"]))} · {src["events"]} events · device '
        f"<b>{_e(dev['kind'])}</b> ({_e(dev['name'])})</p>",
    ]
    if dev.get("note"):
        parts.append(f'<p class="note">{_e(dev["note"])}</p>')
    for w in src.get("warnings", []):
        parts.append(f'<p class="note">warning: {_e(w)}</p>')
    parts.append("<h2>Summary</h2>")
    parts.append(
        _table(
            ["", "time"],
            [
                [_e(k), _e(us(s.get(key)))]
                for k, key in (
                    ("wall", "wall_us"),
                    ("device busy", "device_busy_us"),
                    ("device idle", "device_idle_us"),
                    ("device time", "device_time_us"),
                    ("compute", "compute_us"),
                    ("communication", "comm_us"),
                    ("memcpy", "memcpy_us"),
                )
            ],
            {1},
        )
    )
    findings = data.get("findings") or []
    if findings:
        parts.append("<h2>Findings</h2><ol>")
        for group in group_findings(findings):
            f = group.lead
            label = group.rank_label()
            whose = f"[{_e(label)}] " if label is not None else ""
            parts.append(
                f"<li>{whose}<b>{_e(f['title'])}</b> — {_e(us(f.get('time_at_stake_us')))} at "
                f"stake ({_e(pct(f.get('share')))}){_e(group.spread())}. "
                f"{_e(f.get('recommendation', ''))}</li>"
            )
        parts.append("</ol>")
    max_dev = max((r["device_self_us"] for r in data["ops"]), default=0) or 1
    dev_label = "exec" if host else "device"
    rows = [
        [
            _e(truncate(r["name"], 120)),
            _e(r["calls"]),
            _e(us(r["cpu_self_us"])),
            _e(us(r["cpu_total_us"])),
            _e(us(r["device_self_us"])),
            _e(us(r["device_total_us"])),
            _e(pct(r["device_share"])) + _bar(r["device_self_us"] / max_dev),
        ]
        for r in data["ops"][:top]
    ]
    parts.append(f"<h2>Ops (top {top} by {dev_label} self time)</h2>")
    parts.append(
        _table(
            [
                "op",
                "calls",
                "CPU self",
                "CPU total",
                f"{dev_label} self",
                f"{dev_label} total",
                "share",
            ],
            rows,
            {1, 2, 3, 4, 5, 6},
        )
    )
    if kernel_rows(data):
        krows = [
            [
                _e(truncate(k["name"], 120)),
                _e(k["calls"]),
                _e(us(k["device_us"])),
                _e(us(k["mean_us"])),
                _e(k.get("op") or "—"),
            ]
            for k in kernel_rows(data)[:top]
        ]
        parts.append("<h2>Device kernels</h2>")
        parts.append(_table(["kernel", "calls", "total", "mean", "op"], krows, {1, 2, 3}))
    parts += _graph_units(data, top)
    return "".join(parts)


def _graph_units(data: dict[str, Any], top: int) -> list[str]:
    """The attribution line, or the graph units and the hint (escaped)."""
    line = capture_line(data)
    if line is not None:
        return [f"<p>{_e(line)}</p>"]
    rows = units(data)
    if not rows:
        return []
    urows = [
        [
            _e(u["name"]),
            _e(u.get("op") or "—"),
            _e(u["calls"]),
            _e(us(u["graph"].get("device_us_per_replay"))),
            _e(f"{u['graph'].get('kernels_per_replay', 0):g}"),
            _e(
                us(u["graph"]["idle_between_us"])
                if u["graph"].get("idle_between_us") is not None
                else "—"
            ),
        ]
        for u in rows[:top]
    ]
    out = ["<h2>Graph replays (not attributed: no capture trace)</h2>"]
    out.append(
        _table(
            ["graph", "op", "replays", "per replay", "kernels per replay", "idle between"],
            urows,
            {2, 3, 4, 5},
        )
    )
    note = hint(data)
    if note:
        out.append(f"<p>{_e(note)}</p>")
    return out
