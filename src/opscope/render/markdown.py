"""Markdown renderer: the summary, ops, kernels and findings as GitHub-flavoured tables."""

from __future__ import annotations

from typing import Any

from opscope.render.fmt import pct, truncate, us

EXTENSION = ".md"


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


def render(data: dict[str, Any], top: int = 30) -> str:
    dev = data["device"]
    src = data["source"]
    s = data["summary"]
    out = [
        "# opscope report",
        "",
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
    out += _distributed(data)
    findings = data.get("findings") or []
    if findings:
        out += ["## Findings", ""]
        for i, f in enumerate(findings, 1):
            out.append(
                f"{i}. **{_cell(f['title'])}** — {us(f.get('time_at_stake_us'))} at stake "
                f"({pct(f.get('share'))}). {_cell(f.get('recommendation', ''))}"
            )
        out.append("")
    out += [
        f"## Ops (top {top})",
        "",
        "| op | calls | CPU self | CPU total | device self | device total | share |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["ops"][:top]:
        out.append(
            f"| `{_cell(truncate(r['name'], 80))}` | {r['calls']} | {us(r['cpu_self_us'])} | "
            f"{us(r['cpu_total_us'])} | {us(r['device_self_us'])} | {us(r['device_total_us'])} "
            f"| {pct(r['device_share'])} |"
        )
    if data.get("kernels"):
        out += [
            "",
            f"## Kernels (top {top})",
            "",
            "| kernel | calls | total | mean | op |",
            "|---|---:|---:|---:|---|",
        ]
        for k in data["kernels"][:top]:
            out.append(
                f"| `{_cell(truncate(k['name'], 80))}` | {k['calls']} | {us(k['device_us'])} | "
                f"{us(k['mean_us'])} | `{_cell(k.get('op') or '—')}` |"
            )
    return "\n".join(out) + "\n"
