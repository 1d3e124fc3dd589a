"""Terminal renderer (rich): summary, op table, kernels, findings; fits a 100-column terminal."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from opscope.render import brief as brief_text
from opscope.render import text_critical, text_distributed, text_graphs
from opscope.render.finding_groups import group_findings
from opscope.render.fmt import line_spans, pct, print_wrapped, shorten_kernel, truncate, us


def ops_table(data: dict[str, Any], top: int = 20, name_width: int = 38) -> Table:
    host = data["device"]["kind"] == "cpu"
    dev = "CPU-as-device" if host else "device"
    # the device executions are the JSON's and Markdown's device_calls (TraceLens's Count)
    t = Table(
        title=f"Ops by {dev} self time (top {top}; calls as torch counts them; share of all "
        f"{dev} time)",
        title_justify="left",
        expand=False,
    )
    t.add_column("op", no_wrap=True, max_width=name_width)
    t.add_column("calls", justify="right")
    t.add_column("CPU self", justify="right")
    t.add_column("CPU total", justify="right")
    t.add_column(f"{'dev' if not host else 'exec'} self", justify="right")
    t.add_column(f"{'dev' if not host else 'exec'} total", justify="right")
    t.add_column("share", justify="right")
    for r in data["ops"][:top]:
        replayed = r.get("graph_replayed") and r.get("replayed_calls") == r["calls"]
        t.add_row(
            Text(truncate(r["name"], name_width)),
            str(r["calls"]),
            "replay" if replayed else us(r["cpu_self_us"]),
            "replay" if replayed else us(r["cpu_total_us"]),
            us(r["device_self_us"]),
            us(r["device_total_us"]),
            pct(r["device_share"]),
        )
    return t


def kernels_table(data: dict[str, Any], top: int = 10, name_width: int = 44) -> Table:
    t = Table(title=f"Device kernels (top {top})", title_justify="left")
    t.add_column("kernel", no_wrap=True, max_width=name_width)
    t.add_column("calls", justify="right")
    t.add_column("total", justify="right")
    t.add_column("mean", justify="right")
    t.add_column("op", no_wrap=True, max_width=20)
    for k in text_graphs.kernel_rows(data)[:top]:
        t.add_row(
            Text(shorten_kernel(k["name"], name_width)),
            str(k["calls"]),
            us(k["device_us"]),
            us(k["mean_us"]),
            Text(truncate(k.get("op") or "—", 20)),
        )
    return t


def neuron_table(data: dict[str, Any], top: int = 10, name_width: int = 40) -> Table | None:
    """NeuronCore engines per execution (a Neuron profile's device tables), or None."""
    nd = data.get("neuron")
    if not isinstance(nd, dict) or not nd.get("executions"):
        return None
    sm = nd.get("summary") or {}
    util = " · ".join(
        f"{label} {sm[key]:.2f} %"
        for label, key in (("MFU", "mfu_estimated_percent"), ("MBU", "mbu_estimated_percent"))
        if isinstance(sm.get(key), (int, float))
    )
    title = "NeuronCore engines" + (f" ({util}, Neuron Explorer)" if util else "")
    t = Table(title=title, title_justify="left")
    t.add_column("op", no_wrap=True, max_width=name_width)
    t.add_column("duration", justify="right")
    t.add_column("bound", no_wrap=True)
    t.add_column("busiest engine", justify="right", no_wrap=True)
    for ex in nd["executions"][:top]:
        dom = str(ex.get("dominant") or "")
        share = float((ex.get("busy_share") or {}).get(dom) or 0.0)
        t.add_row(
            Text(truncate(str(ex.get("op_name") or ex.get("neff") or "—"), name_width)),
            us((ex.get("dur_ns") or 0) / 1e3),
            str(ex.get("bound") or "—"),
            f"{dom} {pct(share)}" if dom else "—",
        )
    return t


def ranks_table(data: dict[str, Any], top: int = 20) -> Table | None:
    """A job's ranks (the report of a folder of rank traces), or None for one rank."""
    ranks = data.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        return None
    t = Table(title=f"Ranks ({len(ranks)})", title_justify="left")
    for header in ("rank", "events", "wall", "device busy", "device idle", "device time"):
        t.add_column(header, justify="right", no_wrap=True)
    t.add_column("findings", justify="right")
    for r in ranks[:top]:
        s = r.get("summary") or {}
        t.add_row(
            str(r.get("rank")),
            str(r.get("events", "")),
            us(s.get("wall_us")),
            us(s.get("device_busy_us")),
            us(s.get("device_idle_us")),
            us(s.get("device_time_us")),
            str(r.get("findings", 0)),
        )
    return t


def brief_block(console: Console, brief: Mapping[str, Any]) -> None:
    """The brief (:mod:`opscope.render.brief`), with a command line as each fix's next step."""
    console.print("[bold]In brief[/bold]")
    shown = brief_text.lines(
        brief, name=lambda s: shorten_kernel(s, 48), title=str, calls=False, commands=True
    )
    for line in shown:
        indent = "  " + " " * (len(line) - len(line.lstrip()))
        if line.lstrip().startswith("next:"):  # a command line, to copy as one line
            console.print(Text(indent + line.strip()), no_wrap=True, overflow="ignore", crop=False)
            continue
        for a, b in line_spans(line.strip(), max(20, console.width - len(indent))):
            console.print(Text(indent + line.strip()[a:b]), overflow="fold")
    console.print()


_PER_RANK_WORDS = (
    ("wall_us", "wall"),
    ("device_span_us", "device span"),
    ("device_busy_us", "busy"),
    ("device_idle_us", "idle"),
)


def _per_rank(per: dict[str, Any]) -> str:
    """A job's per-rank figures: ``wall 84.8 / 79.7 ms`` (max / median)."""
    parts = []
    for key, word in _PER_RANK_WORDS:
        got = per.get(key)
        if isinstance(got, dict):
            parts.append(f"{word} {us(got.get('max'))} / {us(got.get('median'))}")
    return " · ".join(parts)


def print_text(
    console: Console,
    data: dict[str, Any],
    top: int = 20,
    *,
    critical_path: bool = False,
    brief: Mapping[str, Any] | None = None,
    what_if: dict[str, Any] | None = None,
    roofline: bool = False,
) -> None:
    """The report on a console; ``critical_path``: the path's full view, not its short block;
    ``brief``: the report's brief (:func:`opscope.service.brief.brief`), its first block;
    ``what_if``: a what-if's answer (:meth:`opscope.service.Workspace.what_if`), after the
    report; ``roofline``: the roofline table last (at the console's width)."""
    _print_report(console, data, top, critical_path=critical_path, brief=brief)
    if what_if is not None:
        for line in text_critical.what_if_lines(what_if):
            console.print(escape(line))
    if roofline and data.get("roofline"):
        from opscope.render.roofline import render_text as roofline_text

        console.print(roofline_text(data["roofline"], top=top, width=console.width))


def _print_report(
    console: Console,
    data: dict[str, Any],
    top: int,
    *,
    critical_path: bool,
    brief: Mapping[str, Any] | None,
) -> None:
    if brief is not None:
        brief_block(console, brief)
    dev = data["device"]
    src = data["source"]
    s = data["summary"]
    console.print(
        f"[bold]{escape(', '.join(src['paths']))}[/bold]  {src['events']} events · device "
        f"[bold]{escape(dev['kind'])}[/bold] ({escape(dev['name'])})"
    )
    if dev.get("note"):
        console.print(f"[dim]{escape(dev['note'])}[/dim]")
    per = s.get("per_rank")
    if isinstance(per, dict) and per:  # a job: per rank, never summed over the ranks
        console.print(f"wall {us(s['wall_us'])} · per rank (max / median): " + _per_rank(per))
    else:
        console.print(
            f"wall {us(s['wall_us'])} · device span {us(s.get('device_span_us'))} · busy "
            f"{us(s['device_busy_us'])} · idle {us(s['device_idle_us'])} · device time "
            f"{us(s['device_time_us'])}"
        )
    comm = text_distributed.summary_line(data)
    if comm is not None:
        console.print(comm)
    path = text_critical.summary_line(data)
    if path is not None:
        console.print(escape(path))
        if not critical_path:
            for line in text_critical.top_pieces(data):
                console.print(f"[dim]  {escape(line)}[/dim]")
    graphs = text_graphs.capture_line(data)
    if graphs is not None:
        console.print(escape(graphs))
    engine = src.get("engine")
    if isinstance(engine, dict):
        console.print(
            f"[dim]ranks analysed on {escape(str(engine.get('name')))}: "
            f"{engine.get('workers')} workers at {escape(str(engine.get('scheduler')))}[/dim]"
        )
        for note in (data.get("critical_path") or {}).get("notes") or []:
            console.print(f"[dim]no job critical path: {escape(str(note))}[/dim]")
    ranks = ranks_table(data, top)
    if ranks is not None:
        console.print(
            f"[dim]a job of {len(data['ranks'])} ranks: figures per rank are the max and the "
            "median over the ranks (the JSON summary also sums them); wall spans every "
            "rank[/dim]"
        )
    for w in [*src.get("warnings", []), *text_distributed.warnings(data)]:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    width = console.width
    if ranks is not None:
        console.print(ranks)
    for table in text_distributed.tables(data, top):
        console.print(table)
    if critical_path:
        for table in text_critical.tables(data, top, name_width=max(16, width - 40)):
            console.print(table)
    console.print(ops_table(data, top, name_width=max(16, width - 74)))
    if text_graphs.kernel_rows(data):
        console.print(kernels_table(data, min(top, 10), name_width=max(16, width - 66)))
    replays = text_graphs.replays_table(data, min(top, 10), name_width=max(16, width - 70))
    if replays is not None:
        console.print(replays)
        note = text_graphs.hint(data)
        if note is not None:
            print_wrapped(console, Text(f"note: {note}", style="dim"))
    neuron = neuron_table(data, top, name_width=max(16, width - 60))
    if neuron is not None:
        console.print(neuron)
    findings = data.get("findings") or []
    if findings:
        console.print(
            "[bold]Findings[/bold] (ranked by the step time their fix can save on the "
            "critical path, then time at stake)"
        )
        styles = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}
        for group in group_findings(findings)[:top]:
            f = group.lead
            sev = str(f.get("severity", ""))
            entry = Text("• ")
            entry.append(f"{sev:<6}", style=styles.get(sev, ""))
            label = group.rank_label()
            if label is not None:  # a rank's finding in a job: whose ranks
                entry.append(f" [{label}]")
            entry.append(f" {f['title']}", style="bold")
            entry.append(f" — {us(f.get('time_at_stake_us'))} at stake")
            entry.append(group.spread())
            if f.get("step_savings_us") is not None:
                entry.append(f", saves ≤ {us(f['step_savings_us'])} of the path")
            entry.append(". ")
            entry.append(str(f.get("recommendation", "")))
            print_wrapped(console, entry)
            for line in referenced_details(f):
                print_wrapped(console, Text(f"    {line}", style="dim"))


_DETAILS_REF = re.compile(r"details\.([A-Za-z_]+)")


def referenced_details(finding: dict[str, Any], top: int = 5) -> list[str]:
    """The details a finding's recommendation points at ("see details.host_activity"), one
    line each, when they are a mapping of names to microseconds: the text shows what it
    refers to."""
    details = finding.get("details") or {}
    out = []
    for key in dict.fromkeys(_DETAILS_REF.findall(str(finding.get("recommendation", "")))):
        value = details.get(key)
        if not isinstance(value, dict) or not value:
            continue
        nums = [(k, v) for k, v in value.items() if isinstance(v, int | float)]
        nums.sort(key=lambda kv: -float(kv[1]))
        shown = ", ".join(f"{truncate(str(k), 60)} {us(float(v))}" for k, v in nums[:top])
        more = f" (+{len(nums) - top} more)" if len(nums) > top else ""
        if shown:
            out.append(f"{key.replace('_', ' ')}: {shown}{more}")
    return out


def finding_lines(f: Mapping[str, Any]) -> list[str]:
    """One finding in full (``opscope report --finding ID``): what, how much, the next step,
    the details its recommendation refers to and its evidence."""
    saves = f.get("step_savings_us")
    lines = [
        f"{f.get('id')} {f.get('severity')} {f.get('kind')}"
        + (f" (rank {f['rank']})" if f.get("rank") is not None else "")
        + f": {f.get('title')}",
        f"{us(f.get('time_at_stake_us'))} at stake ({pct(f.get('share'))} of the wall)"
        + (f", saves ≤ {us(saves)} of the critical path" if saves is not None else "")
        + f"; confidence {f.get('confidence')}.",
        f"Next step: {f.get('recommendation', '')}",
    ]
    lines += referenced_details(dict(f))
    evidence = f.get("evidence") or []
    if evidence:
        lines.append(f"Evidence ({len(evidence)}):")
        for e in evidence[:20]:
            ids = list(e.get("event_ids") or [])
            shown = ", ".join(str(i) for i in ids[:8]) + (" ..." if len(ids) > 8 else "")
            lines.append(f"  - {e.get('note') or 'events'}: event ids {shown or '—'}")
    return lines


def render_text(
    data: dict[str, Any],
    width: int = 100,
    top: int = 20,
    *,
    critical_path: bool = False,
    brief: Mapping[str, Any] | None = None,
    what_if: dict[str, Any] | None = None,
    roofline: bool = False,
) -> str:
    """The report as text, ``width`` columns (the options are :func:`print_text`'s; the
    roofline table is 130 columns wide)."""
    console = Console(record=True, width=width, file=io.StringIO())
    _print_report(console, data, top, critical_path=critical_path, brief=brief)
    text = console.export_text()
    if what_if is not None:
        text += "\n".join(text_critical.what_if_lines(what_if)) + "\n"
    if roofline and data.get("roofline"):
        from opscope.render.roofline import render_text as roofline_text

        text += roofline_text(data["roofline"], top=top)
    return text
