"""The brief of a report as lines of text: what bounds the step, device busy and idle, the
roofline's verdict, the top fixes with their savings and the next step for each.

The brief is data (:func:`opscope.service.brief.brief`); these lines are its one wording,
shared by the terminal report (its first block), the Markdown report and the ``brief`` tool
for agents, each passing how it shows a string that comes from the trace (``name``) and
which next step it offers: a tool call (``calls``) or a command line (``commands``).
Every share names its denominator: of the path, of the device span, of the ops' device
self time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opscope.render.fmt import num, pct, us

VERDICTS = {"compute": "compute-bound", "memory": "memory-bound", "overhead": "overhead-bound"}


def _plain(text: str) -> str:
    return text


def saving(fix: Mapping[str, Any]) -> str:
    """``saves ≤ 34.80 ms of the path (153.70 ms at stake)``: the figure the findings are
    ranked by, then the time at stake, as the report's findings list says them."""
    stake = us(fix.get("time_at_stake_us"))
    if fix.get("step_savings_us") is None:
        return f"{stake} at stake (no critical-path saving computed)"
    return f"saves ≤ {us(fix['step_savings_us'])} of the path ({stake} at stake)"


def bound_line(b: Mapping[str, Any]) -> str | None:
    bound = b.get("bound")
    if not isinstance(bound, Mapping):
        return None
    labels = ", ".join(f"{x['label']} {pct(x['share'])}" for x in bound.get("labels") or [])
    scope = "the job's critical path" if bound.get("scope") == "job" else "the critical path"
    wall = (
        f", {pct(bound['of_wall'])} of the {us(bound.get('wall_us'))} wall"
        if bound.get("of_wall") is not None
        else ""
    )
    return f"Bound by: {labels or 'nothing'} of {scope} ({us(bound.get('length_us'))}{wall})."


def pieces_line(b: Mapping[str, Any], name: Callable[[str], str] = _plain) -> str | None:
    bound = b.get("bound")
    top = (bound or {}).get("top") if isinstance(bound, Mapping) else None
    if not top:
        return None
    parts = "; ".join(
        f"{t.get('label')} {name(str(t.get('name')))} {us(t.get('dur_us'))} ({t.get('pieces')}×)"
        for t in top
    )
    return f"Biggest pieces on the path: {parts}."


def device_line(b: Mapping[str, Any]) -> str:
    d = b.get("device") or {}
    host = " (the CPU: no device was traced)" if d.get("is_host") else ""
    return (
        f"Device{host}: busy {us(d.get('busy_us'))} ({pct(d.get('busy_share'))}), idle "
        f"{us(d.get('idle_us'))} ({pct(d.get('idle_share'))}) of the {us(d.get('span_us'))} "
        f"device span; wall {us(d.get('wall_us'))}."
    )


def roofline_line(b: Mapping[str, Any]) -> str:
    r = b.get("roofline")
    if not isinstance(r, Mapping):
        return "Roofline: no op costed (no device time, or no shapes recorded)."
    shares = r.get("shares") or {}
    order = sorted(VERDICTS, key=lambda k: -float(shares.get(k) or 0.0))
    parts = [f"{VERDICTS[k]} {pct(shares.get(k))}" for k in order]
    if shares.get("unclassified"):
        parts.append(f"unclassified {pct(shares['unclassified'])}")
    peaks = f" ({r['peaks']})" if r.get("peaks") else " (no peaks known: no bound)"
    line = f"Roofline{peaks}: {', '.join(parts)} of {us(r.get('device_us'))} ops' device self time"
    intensity, ridge = r.get("intensity"), r.get("ridge")
    if intensity is not None and ridge:
        side = "memory" if float(intensity) < float(ridge) else "compute"
        line += (
            f"; the costed work as one: intensity {num(intensity)} FLOP/B against a ridge of "
            f"{num(ridge)} FLOP/B ({side} side)"
        )
    return line + "."


def fix_lines(
    b: Mapping[str, Any],
    *,
    name: Callable[[str], str] = _plain,
    title: Callable[[str], str] | None = None,
    calls: bool = True,
    commands: bool = False,
) -> list[str]:
    fixes = b.get("fixes") or []
    if not fixes:
        return ["No findings: nothing to fix that the rules recognise."]
    out = [
        f"Top fixes ({len(fixes)} of {b.get('findings')} findings, ranked by what each saves "
        "on the critical path, then time at stake):"
    ]
    for i, f in enumerate(fixes, 1):
        where = f" rank {f['rank']}" if f.get("rank") is not None else ""
        out.append(
            f"{i}. {f.get('id')} {f.get('severity')} {f.get('kind')}{where}: {saving(f)}. "
            f"{(title or name)(str(f.get('title')))}"
        )
        steps = []
        if calls:
            if f.get("what_if"):
                steps.append(f"{f['what_if']} (the path without it)")
            steps.append(str(f.get("call")))
        if commands and f.get("command"):
            steps.append(str(f["command"]))
        if steps:
            out.append(f"   next: {'; '.join(steps)}")
    return out


def lines(
    b: Mapping[str, Any],
    *,
    name: Callable[[str], str] = _plain,
    title: Callable[[str], str] | None = None,
    calls: bool = True,
    commands: bool = False,
) -> list[str]:
    """The brief's lines (see the module docstring); ``name`` shows an op or kernel name,
    ``title`` a finding's title (default: as ``name``)."""
    out = [x for x in (bound_line(b), pieces_line(b, name)) if x is not None]
    out += [device_line(b), roofline_line(b)]
    out += fix_lines(b, name=name, title=title, calls=calls, commands=commands)
    return out


__all__ = ["VERDICTS", "lines", "saving"]
