"""Terminal views of a report's ``critical_path`` section and of a what-if answer."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from opscope.render.fmt import truncate, us


def _shares(bound: dict[str, Any], length: float) -> str:
    parts = [(k, float(v)) for k, v in (bound or {}).items() if v and float(v) > 0 and length > 0]
    parts.sort(key=lambda kv: -kv[1])
    return " · ".join(f"{k} {100 * v / length:.0f}%" for k, v in parts) or "—"


def summary_line(data: dict[str, Any]) -> str | None:
    """One line: the path's length, against the wall time, and its breakdown."""
    cp = data.get("critical_path")
    if not isinstance(cp, dict) or cp.get("length_us") is None:
        return None
    length = float(cp["length_us"])
    scope = "job critical path" if cp.get("scope") == "job" else "critical path"
    wall = cp.get("wall_us")
    of = f" of {us(wall)} wall" if wall else ""
    return f"{scope} {us(length)}{of}: {_shares(cp.get('bound_by_us') or {}, length)}"


def top_pieces(data: dict[str, Any], n: int = 3) -> list[str]:
    """The path's biggest pieces (per label and name), one short line each."""
    cp = data.get("critical_path") or {}
    out = []
    for note in cp.get("notes") or []:
        out.append(f"note: {note}")
    for t in (cp.get("top") or [])[:n]:
        name = t.get("name") or "(no traced event)"
        out.append(
            f"{t['label']}: {truncate(str(name), 60)} {us(t.get('dur_us'))} ({t['pieces']}×)"
        )
    return out


def tables(data: dict[str, Any], top: int = 20, name_width: int = 50) -> list[Table]:
    """The full view (``--critical-path``): breakdown, steps, top pieces, rank jumps."""
    cp = data.get("critical_path")
    if not isinstance(cp, dict) or cp.get("length_us") is None:
        return []
    length = float(cp["length_us"]) or 1.0
    out: list[Table] = []
    t = Table(title="Critical path: what bounds the window", title_justify="left")
    t.add_column("bound by")
    t.add_column("time", justify="right")
    t.add_column("share", justify="right")
    for k, v in sorted((cp.get("bound_by_us") or {}).items(), key=lambda kv: -float(kv[1])):
        if float(v) > 0:
            t.add_row(k, us(v), f"{100 * float(v) / length:.1f}%")
    t.add_row("[bold]path[/bold]", f"[bold]{us(cp['length_us'])}[/bold]", "")
    if cp.get("wall_us"):
        t.add_row("[dim]wall (first to last event)[/dim]", f"[dim]{us(cp['wall_us'])}[/dim]", "")
    out.append(t)
    steps = cp.get("steps") or []
    if steps:
        st = Table(title="Critical path per step", title_justify="left")
        st.add_column("step", justify="right")
        st.add_column("path", justify="right")
        st.add_column("wall", justify="right")
        st.add_column("traced", justify="right")
        st.add_column("bound by")
        for s in steps[:top]:
            share = s.get("explained_share")
            st.add_row(
                str(s["step"]),
                us(s["length_us"]),
                us(s.get("wall_us")),
                f"{100 * float(share):.0f}%" if share is not None else "—",
                _shares(s["bound_by_us"], float(s["length_us"])),
            )
        out.append(st)
    pieces = cp.get("top") or []
    if pieces:
        pt = Table(title="Biggest pieces on the path", title_justify="left")
        pt.add_column("label")
        pt.add_column("event", max_width=name_width)
        pt.add_column("time", justify="right")
        pt.add_column("pieces", justify="right")
        for p in pieces[:top]:
            name = p.get("name") or "(no traced event)"
            pt.add_row(
                p["label"], truncate(str(name), name_width), us(p["dur_us"]), str(p["pieces"])
            )
        out.append(pt)
    jumps = cp.get("jumps") or []
    if jumps:
        jt = Table(title="Where the job path crosses ranks", title_justify="left")
        jt.add_column("collective")
        jt.add_column("seq", justify="right")
        jt.add_column("from rank (arrived last)", justify="right")
        jt.add_column("to rank", justify="right")
        for j in jumps[:top]:
            jt.add_row(
                str(j.get("collective")), str(j.get("seq")), str(j["from_rank"]), str(j["to_rank"])
            )
        out.append(jt)
    return out


def what_if_lines(answer: dict[str, Any]) -> list[str]:
    """A what-if answer as lines: the projection, then per step."""
    changes = ", ".join(f"{c['name']} ×{c['factor']:g}" for c in answer.get("changes") or [])
    who = " (job path)" if answer.get("scope") == "job" else ""
    lines = [
        f"what-if {changes}: critical path {us(answer.get('length_us'))} -> "
        f"{us(answer.get('projected_us'))}{who}, {us(answer.get('saved_us'))} shorter"
    ]
    for s in answer.get("steps") or []:
        lines.append(
            f"  step {s['step']}: {us(s['length_us'])} -> {us(s['projected_us'])} "
            f"({us(s['saved_us'])} shorter)"
        )
    for r in answer.get("ranks") or []:
        lines.append(
            f"  rank {r['rank']} alone: {us(r['length_us'])} -> {us(r['projected_us'])} "
            f"({us(r['saved_us'])} shorter)"
        )
    return lines


__all__ = ["summary_line", "tables", "top_pieces", "what_if_lines"]
