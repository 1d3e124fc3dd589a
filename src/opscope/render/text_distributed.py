"""Terminal tables of a report's ``distributed`` section: communication per rank, collectives
by type, stragglers and the collective instances that waited longest."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from opscope.render.fmt import pct, truncate, us


def _bytes(n: float | None) -> str:
    if n is None:
        return "—"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _gbps(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f} GB/s"


def summary_line(data: dict[str, Any]) -> str | None:
    """One line: communication, how much of it is exposed, the overlap; None without it."""
    s = data.get("summary") or {}
    if not s.get("comm_us"):
        return None
    per = s.get("per_rank") or {}
    comm, exposed = per.get("comm_us"), per.get("exposed_comm_us")
    if isinstance(comm, dict):  # a job: per rank, max / median
        line = f"communication per rank {us(comm.get('max'))} / {us(comm.get('median'))}"
        if isinstance(exposed, dict):
            line += f" · exposed {us(exposed.get('max'))} / {us(exposed.get('median'))}"
        return line + f" (max / median) · overlapped with compute {pct(s.get('overlap_share'))}"
    return (
        f"communication {us(s['comm_us'])} · exposed {us(s.get('exposed_comm_us'))} · "
        f"overlapped with compute {pct(s.get('overlap_share'))}"
    )


def tables(data: dict[str, Any], top: int = 20) -> list[Table]:
    """The tables of the ``distributed`` section (none when the report has no such section)."""
    d = data.get("distributed")
    if not isinstance(d, dict):
        return []
    out: list[Table] = []
    missing = d.get("missing_ranks") or []
    title = f"Communication per rank ({len(d.get('ranks') or [])} of {d.get('world_size')}"
    title += f", ranks from {d.get('rank_source')}"
    if d.get("job_role"):  # one rank chosen: the others are left out on purpose
        title += f"; rank {d['job_role'].get('rank')} chosen)"
    else:
        title += f"; missing {len(missing)})" if missing else ")"
    t = Table(title=title, title_justify="left")
    for h in ("rank", "wall", "compute", "comm", "exposed", "overlap", "wait", "idle"):
        t.add_column(h, justify="right", no_wrap=True)
    for r in (d.get("per_rank") or [])[:top]:
        t.add_row(
            str(r.get("rank")),
            us(r.get("wall_us")),
            us(r.get("compute_us")),
            us(r.get("comm_us")),
            us(r.get("exposed_comm_us")),
            pct(r.get("overlap_share")),
            us(r.get("wait_us")),
            us(r.get("idle_us")),
        )
    out.append(t)
    rows = d.get("by_collective") or []
    if rows:
        t = Table(title="Collectives by type", title_justify="left")
        t.add_column("collective", no_wrap=True)
        for h in ("group", "count", "bytes", "time", "algbw", "busbw"):
            t.add_column(h, justify="right", no_wrap=True)
        for r in rows[:top]:
            t.add_row(
                Text(str(r.get("name"))),
                Text(truncate(str(r.get("pg")), 12)),
                str(r.get("count")),
                _bytes(r.get("bytes")),
                us(r.get("dur_us")),
                _gbps(r.get("algbw_gbps")),
                _gbps(r.get("busbw_gbps")),
            )
        out.append(t)
    stragglers = d.get("stragglers") or []
    if stragglers:
        t = Table(title="Stragglers (worst first)", title_justify="left")
        for h in ("rank", "times last", "others' wait each", "own wait"):
            t.add_column(h, justify="right", no_wrap=True)
        t.add_column("why")
        others = max(1, len(d.get("ranks") or []) - 1)
        for r in stragglers[:top]:
            t.add_row(
                str(r.get("rank")),
                str(r.get("times_last")),
                us(float(r.get("caused_wait_us") or 0.0) / others),
                us(r.get("own_wait_us")),
                Text(str(r.get("cause") or "—")),
            )
        out.append(t)
    instances = d.get("instances") or []
    if instances:
        worst = sorted(
            instances, key=lambda i: -max((i.get("wait_us") or {}).values(), default=0.0)
        )[: min(top, 10)]
        t = Table(
            title=f"Collective instances with the longest waits ({len(instances)} matched)",
            title_justify="left",
        )
        t.add_column("collective", no_wrap=True)
        for h in ("group", "seq", "last", "skew", "max wait", "transfer", "bytes"):
            t.add_column(h, justify="right", no_wrap=True)
        for i in worst:
            t.add_row(
                Text(str(i.get("name"))),
                Text(truncate(str(i.get("pg")), 12)),
                str(i.get("seq")),
                str(i.get("last_rank")),
                us(i.get("start_skew_us")),
                us(max((i.get("wait_us") or {}).values(), default=None)),
                us(i.get("dur_us")),
                _bytes(i.get("bytes")),
            )
        out.append(t)
    return out


def warnings(data: dict[str, Any]) -> list[str]:
    d = data.get("distributed")
    return list(d.get("warnings") or []) if isinstance(d, dict) else []
