"""Tools for the critical path (its length, what bounds it, its longest segments, what-if)
and for a job's ranks (communication, collectives matched across ranks, stragglers)."""

from __future__ import annotations

from typing import Any

from opscope.mcp import schemas as s
from opscope.mcp.budget import fit
from opscope.mcp.registry import Answer, Session, ToolError, ToolSpec
from opscope.mcp.textfmt import call, name_col, pct, us
from opscope.mcp.untrusted import NOTICE, block


def _gbps(value: Any) -> str:
    return "-" if value is None else f"{float(value):.2f}"


def _ranked(bound: dict[str, Any]) -> list[tuple[str, float]]:
    return sorted(((k, float(v)) for k, v in bound.items() if v), key=lambda kv: -kv[1])


def _bound(bound: dict[str, Any]) -> str:
    return ", ".join(f"{k} {us(v)}" for k, v in _ranked(bound)) or "nothing"


def _critical_path(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    cp = ws.critical_path(a["trace"], limit=a["limit"])
    cp.pop("origin_ns", None)
    for seg in cp.get("segments") or []:  # t is ns from the trace's start; events takes us
        seg["t_us"] = seg["t"] / 1e3
    out = fit({"trace": ws.get(a["trace"]).handle, "critical_path": cp})
    c = out["critical_path"]
    lines = [
        f"Critical path ({c.get('scope')}) {us(c.get('length_us'))} of "
        f"{us(c.get('wall_us'))} wall; bound by: {_bound(c.get('bound_by_us') or {})}.",
        NOTICE,
    ]
    top = c.get("top") or []
    if top:
        lines += ["What the path spends its time on:"]
        lines.append(
            block(
                f"{us(t.get('dur_us')):>10} {t.get('label'):<18} {name_col(t.get('name'))}"
                for t in top[:12]
            )
        )
    loading = c.get("data_loading")
    if isinstance(loading, dict) and loading.get("on_path_us"):
        named = ", ".join(
            f"{name_col(t.get('name'))} {us(t.get('us'))}" for t in (loading.get("top") or [])[:5]
        )
        lines.append(
            f"data_loading on the path {us(loading.get('on_path_us'))}, in the "
            f"{len(loading.get('workers') or [])} loader workers' traces: {named or 'nothing'}; "
            f"{us(loading.get('not_in_workers_us'))} while no worker was busy."
        )
    segs = c.get("segments") or []
    if segs:
        lines.append(
            f"The {len(segs)} longest of {c.get('segments_total')} segments are in the "
            "structured content (event_id works with chain and event)."
        )
    label = next(iter(_ranked(c.get("bound_by_us") or {})), ("gpu_compute", 0.0))[0]
    example = call("what_if", changes=[f"{label}=0.5"])
    lines.append(
        "Project a change with what_if: its changes are NAME=FACTOR items (NAME an op, kernel "
        f"or label; FACTOR >= 0 scales its time), e.g. {example}."
    )
    return Answer("\n".join(lines), out)


def _what_if(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    spec = ",".join(a["changes"]) if isinstance(a["changes"], list) else a["changes"]
    out = fit({"trace": ws.get(a["trace"]).handle, "what_if": ws.what_if(spec, a["trace"])})
    w = out["what_if"]
    length, projected = w.get("length_us"), w.get("projected_us")
    lines = [
        f"What if {name_col(spec, 200)}: the critical path goes from {us(length)} to "
        f"{us(projected)} (saves {us(w.get('saved_us'))}"
        + (f", {pct(float(w['saved_us']) / float(length))}" if length and w.get("saved_us") else "")
        + ")."
    ]
    steps = w.get("steps") or []
    if steps:
        lines.append(
            block(
                f"step {st.get('step')}: {us(st.get('length_us'))} -> {us(st.get('projected_us'))}"
                for st in steps[:12]
            )
        )
    return Answer("\n".join(lines), out)


def _distributed(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    data = ws.report(a["trace"])
    dist = data.get("distributed")
    if not isinstance(dist, dict):  # one rank, no communication: an answer that says 0
        summary = data.get("summary") or {}
        none: dict[str, Any] = {
            "trace": ws.get(a["trace"]).handle,
            "distributed": None,
            "comm_us": float(summary.get("comm_us") or 0.0),
            "collectives": 0,
            "stragglers": [],
        }
        return Answer(
            "No communication: one rank and no collectives recorded (communication 0 µs, no "
            "stragglers); see summary and critical_path for where the time goes.",
            none,
        )
    out = fit({"trace": ws.get(a["trace"]).handle, "distributed": dist})
    d = out["distributed"]
    lines = [
        f"World size {d.get('world_size')}; ranks traced {d.get('ranks')}; missing "
        f"{d.get('missing_ranks') or 'none'}; stragglers {d.get('stragglers') or 'none'}.",
        NOTICE,
    ]
    per = d.get("per_rank") or []
    if per:
        lines.append(
            block(
                f"rank {r.get('rank'):>4}: comm {us(r.get('comm_us'))}, exposed "
                f"{us(r.get('exposed_comm_us'))}, overlap {pct(r.get('overlap_share'))}, "
                f"waits {us(r.get('wait_us'))}"
                for r in per[:32]
            )
        )
    by = d.get("by_collective") or []
    if by:
        lines.append("Collectives by type:")
        lines.append(
            block(
                f"{name_col(c.get('name'), 40)} pg {name_col(c.get('pg'), 20)}: "
                f"{c.get('count')} calls, {us(c.get('dur_us'))}, busbw "
                f"{_gbps(c.get('busbw_gbps'))} GB/s"
                for c in by[:16]
            )
        )
    return Answer("\n".join(lines), out)


def _collective(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    try:
        c = ws.collective(a["event_id"], a["trace"])
    except KeyError:
        raise ToolError(f"no event {a['event_id']} in this trace") from None
    out = fit({"trace": ws.get(a["trace"]).handle, "collective": c})
    col = out["collective"]
    matched = "matched across ranks" if col.get("matched") else "not matched"
    lines = [
        f"Collective {name_col(col.get('name'), 60)} (pg {name_col(col.get('pg'), 20)}, "
        f"seq {col.get('seq')}): last to arrive rank {col.get('last_rank')}, start skew "
        f"{us(col.get('start_skew_us'))}, {matched}.",
        NOTICE,
        block(
            f"rank {r.get('rank'):>4}: waited {us(r.get('wait_us'))}"
            for r in col.get("ranks", [])[:64]
        ),
    ]
    return Answer("\n".join(lines), out)


TOOLS = [
    ToolSpec(
        name="critical_path",
        title="Critical path",
        description=(
            "The critical path of the trace (across ranks for a job): its length, the time "
            "by what bounds it (cpu, launch_overhead, gpu_compute, gpu_comm, "
            "kernel_kernel_gap, sync, wait_for_peer, data_loading, untraced), per step, what it "
            "spends "
            "time on, and its longest segments with event ids."
        ),
        input_schema=s.args({"trace": s.TRACE, "limit": s.limit(20, 200, "segments")}),
        output=lambda: s.result({"critical_path": s.shallow("CriticalPath")}, ["critical_path"]),
        handler=_critical_path,
    ),
    ToolSpec(
        name="what_if",
        title="What-if on the critical path",
        description=(
            "Project the critical path with changes: an op, kernel or label scaled by a "
            "factor, e.g. 'aten::mm=0.5' (twice as fast), 'launch_overhead=0', "
            "'gpu_comm=0.8'. Returns the length now and projected, per step."
        ),
        input_schema=s.args(
            {
                "changes": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 3, "maxLength": 1000},
                    "minItems": 1,
                    "maxItems": 32,
                    "description": "NAME=FACTOR items (factor >= 0)",
                },
                "trace": s.TRACE,
            },
            ["changes"],
        ),
        output=lambda: s.result({"what_if": {"type": "object"}}, ["what_if"]),
        handler=_what_if,
    ),
    ToolSpec(
        name="distributed",
        title="Ranks and communication",
        description=(
            "A job's communication: world size, ranks traced and missing, per rank compute, "
            "communication, exposed communication and waits; collectives by type with "
            "bandwidth; collective instances matched across ranks; stragglers.  A trace of "
            "one rank with no communication gets distributed null, comm_us 0."
        ),
        input_schema=s.args({"trace": s.TRACE}),
        output=lambda: s.result(
            {
                "distributed": {"anyOf": [s.shallow("Distributed"), {"type": "null"}]},
                "comm_us": {"type": "number", "description": "no distributed section: 0"},
                "collectives": {"type": "integer"},
                "stragglers": {"type": "array"},
            },
            ["distributed"],
        ),
        handler=_distributed,
    ),
    ToolSpec(
        name="collective",
        title="One collective across ranks",
        description=(
            "The collective an event belongs to (its c10d op, comm kernel or gloo range, on "
            "any rank), across the job's ranks: arrival and end per rank, who arrived last, "
            "each rank's wait."
        ),
        input_schema=s.args(
            {
                "event_id": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 2**62,
                    "description": "an event of the collective (c10d op, comm kernel, gloo range)",
                },
                "trace": s.TRACE,
            },
            ["event_id"],
        ),
        output=lambda: s.result({"collective": {"type": "object"}}, ["collective"]),
        handler=_collective,
    ),
]
