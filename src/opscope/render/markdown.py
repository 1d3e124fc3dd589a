"""Markdown renderer: the summary, ops, kernels and findings as GitHub-flavoured tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opscope.render.finding_groups import group_findings
from opscope.render.fmt import pct, truncate, us
from opscope.render.graph_rows import capture_line, hint, kernel_rows, units


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _distributed(data: dict[str, Any]) -> list[str]:
    d = data.get("distributed")
    if not isinstance(d, dict):
        return []
    out = [
        "## Communication per rank",
        "",
        "| rank | wall | compute | comm | exposed | overlap | wait | idle |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in d.get("per_rank") or []:
        out.append(
            f"| {r.get('rank')} | {us(r.get('wall_us'))} | {us(r.get('compute_us'))} | "
            f"{us(r.get('comm_us'))} | {us(r.get('exposed_comm_us'))} | "
            f"{pct(r.get('overlap_share'))} | {us(r.get('wait_us'))} | {us(r.get('idle_us'))} |"
        )
    out.append("")
    for r in d.get("stragglers") or []:
        out.append(
            f"- straggler: rank {r.get('rank')}, last {r.get('times_last')} times, the others "
            f"waited {us(r.get('caused_wait_us'))}; {_cell(str(r.get('cause') or ''))}"
        )
    return [*out, ""] if d.get("stragglers") else out


def _critical_path(data: dict[str, Any], top: int) -> list[str]:
    cp = data.get("critical_path")
    if not isinstance(cp, dict) or cp.get("length_us") is None:
        return []
    length = float(cp["length_us"]) or 1.0
    title = "## Critical path (job)" if cp.get("scope") == "job" else "## Critical path"
    out = [
        title,
        "",
        f"{us(cp['length_us'])} of {us(cp.get('wall_us'))} wall"
        + (
            f", {100 * float(cp['explained_share']):.0f}% of it explained by traced work."
            if cp.get("explained_share") is not None
            else "."
        ),
        "",
        "| bound by | time | share |",
        "|---|---:|---:|",
    ]
    for k, v in sorted((cp.get("bound_by_us") or {}).items(), key=lambda kv: -float(kv[1])):
        if float(v) > 0:
            out.append(f"| {k} | {us(v)} | {100 * float(v) / length:.1f}% |")
    out.append("")
    pieces = cp.get("top") or []
    if pieces:
        out += ["| biggest pieces | label | time | pieces |", "|---|---|---:|---:|"]
        for p in pieces[:top]:
            name = _cell(p.get("name") or "(no traced event)")
            out.append(f"| {name} | {p['label']} | {us(p['dur_us'])} | {p['pieces']} |")
        out.append("")
    for note in cp.get("notes") or []:
        out += [f"> {_cell(note)}", ""]
    return out


def _brief(brief: Mapping[str, Any]) -> list[str]:
    """The brief (:mod:`opscope.render.brief`) as the report's first section."""
    from opscope.render.brief import lines

    out = ["## In brief", ""]
    for line in lines(brief, name=lambda s: f"`{_cell(truncate(s, 120))}`", calls=False):
        out.append(_cell(line) if not line.startswith("   next") else line)
    fixes = brief.get("fixes") or []
    if fixes:
        out += ["", "Next steps:", ""]
        out += [f"- {f.get('id')}: `{f.get('command')}`" for f in fixes if f.get("command")]
    return [*out, ""]


def render_markdown(
    data: dict[str, Any], top: int = 30, *, brief: Mapping[str, Any] | None = None
) -> str:
    """The report as Markdown; ``brief``: its brief (:func:`opscope.service.brief.brief`),
    the first section."""
    dev = data["device"]
    src = data["source"]
    s = data["summary"]
    out = [
        "# opscope report",
        "",
        *(_brief(brief) if brief is not None else []),
        f"`{_cell(', '.join(src['paths']))}` · {src['events']} events · device "
        f"**{dev['kind']}** ({_cell(dev['name'])})",
        "",
    ]
    if dev.get("note"):
        out += [f"> {dev['note']}", ""]
    out += [
        f"wall {us(s['wall_us'])} · device busy {us(s['device_busy_us'])} · idle "
        f"{us(s['device_idle_us'])} · device time {us(s['device_time_us'])}",
        "",
    ]
    graphs = capture_line(data)
    if graphs is not None:
        out += [_cell(graphs), ""]
    out += _distributed(data)
    out += _critical_path(data, top)
    findings = data.get("findings") or []
    if findings:
        out += ["## Findings", ""]
        for i, group in enumerate(group_findings(findings), 1):
            f = group.lead
            saves = (
                f", saves ≤ {us(f['step_savings_us'])} of the critical path"
                if f.get("step_savings_us") is not None
                else ""
            )
            label = group.rank_label()
            whose = f"[{label}] " if label is not None else ""
            out.append(
                f"{i}. {whose}**{_cell(f['title'])}** — {us(f.get('time_at_stake_us'))} at "
                f"stake ({pct(f.get('share'))}){group.spread()}{saves}. "
                f"{_cell(f.get('recommendation', ''))}"
            )
        out.append("")
    out += [
        f"## Ops (top {top})",
        "",
        "| op | calls | device calls | CPU self | CPU total | device self | device total | share "
        "of device time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["ops"][:top]:
        out.append(
            f"| `{_cell(truncate(r['name'], 80))}` | {r['calls']} | {r.get('device_calls', '')} | "
            f"{us(r['cpu_self_us'])} | "
            f"{us(r['cpu_total_us'])} | {us(r['device_self_us'])} | {us(r['device_total_us'])} "
            f"| {pct(r['device_share'])} |"
        )
    if kernel_rows(data):
        out += [
            "",
            f"## Kernels (top {top})",
            "",
            "| kernel | calls | total | mean | op |",
            "|---|---:|---:|---:|---|",
        ]
        for k in kernel_rows(data)[:top]:
            out.append(
                f"| `{_cell(truncate(k['name'], 80))}` | {k['calls']} | {us(k['device_us'])} | "
                f"{us(k['mean_us'])} | `{_cell(k.get('op') or '—')}` |"
            )
    out += _graph_units(data, top)
    return "\n".join(out) + "\n"


def _graph_units(data: dict[str, Any], top: int) -> list[str]:
    rows = units(data)
    if not rows:
        return []
    out = [
        "",
        "## Graph replays (not attributed: no capture trace)",
        "",
        "| graph | op | replays | per replay | kernels per replay | idle between |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for u in rows[:top]:
        g = u["graph"]
        idle = g.get("idle_between_us")
        out.append(
            f"| `{_cell(u['name'])}` | `{_cell(u.get('op') or '—')}` | {u['calls']} | "
            f"{us(g.get('device_us_per_replay'))} | {g.get('kernels_per_replay', 0):g} | "
            f"{us(idle) if idle is not None else '—'} |"
        )
    note = hint(data)
    if note:
        out += ["", f"> {_cell(note)}"]
    return out
