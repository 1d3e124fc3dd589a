"""Tools that open, list and close traces, and the first read of one (``summary``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opscope.mcp import schemas as s
from opscope.mcp.registry import Answer, Session, ToolError, ToolSpec
from opscope.mcp.textfmt import call, pct, us
from opscope.mcp.untrusted import NOTICE, block, clean, quote
from opscope.render.brief import saving

_STEPS = re.compile(r"^(\d{1,9})(?::(\d{1,9}))?$")


def _steps(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    m = _STEPS.match(text.strip())
    if not m:
        raise ToolError(f"steps {text!r}: give one step (7) or a range (5:8)")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    if last < first:
        raise ToolError(f"steps {text!r}: the range ends before it starts")
    return first, last


def allowed(path: Path, roots: tuple[Path, ...] | None) -> Path:
    resolved = path.expanduser().resolve()
    if roots is None:
        return resolved
    for root in roots:
        if resolved == root or root in resolved.parents:
            return resolved
    shown = ", ".join(str(r) for r in roots)
    raise ToolError(f"{path}: outside the folders this server may read ({shown})")


def readable(session: Session, raw: str, missing: str) -> Path:
    """``raw`` as a path this server may read (:func:`allowed`) that exists; else a
    :class:`ToolError` ``"<raw>: <missing>"``."""
    path = allowed(Path(raw), session.roots)
    if not path.exists():
        raise ToolError(f"{raw}: {missing}")
    return path


# a file's bytes quoted in a reader's error (``starts with b'root:x:0:0'``): a caller may
# name any file the server can read, so its answer never shows what the file holds
_QUOTED_BYTES = re.compile(r"""\s*\(starts with b(['"]).*?(?<!\\)\1\)|\bb(['"]).*?(?<!\\)\2""")


def unquoted(message: str) -> str:
    """``message`` without the bytes of a file it quotes."""
    return _QUOTED_BYTES.sub(lambda m: "" if m.group(1) else "(bytes not shown)", message)


def open_trace(session: Session, path: Path, **kwargs: Any) -> Any:
    """``session.workspace.open(path, **kwargs)``; a file it cannot read is a
    :class:`ToolError` that says why without quoting the file."""
    from opscope.errors import OpscopeError

    try:
        return session.workspace.open(path, **kwargs)
    except OpscopeError as exc:
        raise ToolError(unquoted(str(exc))) from None


def _open(session: Session, a: dict[str, Any]) -> Answer:
    path = readable(session, a["path"], "no such file or folder")
    ws = session.workspace
    session.progress(0, 2, f"loading {path.name}")
    opened = open_trace(session, path, steps=_steps(a["steps"]), rank=a["rank"])
    session.progress(1, 2, f"analysing {len(opened.trace)} events")
    data = ws.digest(opened.handle)
    session.progress(2, 2, "done")
    return Answer(_summary_text(data, opened=True), {"trace": opened.handle, **data})


def _summary(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    data = ws.digest(a["trace"])
    return Answer(_summary_text(data), {"trace": data["handle"], **data})


def _summary_text(data: Mapping[str, Any], *, opened: bool = False) -> str:
    b = data["brief"]
    summ = b.get("summary") or {}
    dev = b.get("device") or {}
    src = b.get("source") or {}
    lines = [
        f"{'Opened' if opened else 'Trace'} **{data['handle']}** {quote(data['path'], 120)}: "
        f"{src.get('format')}, {src.get('events')} events, "
        f"rank{'s' if len(src.get('ranks') or []) != 1 else ''} {src.get('ranks')}; "
        f"device {clean(dev.get('kind'))} {quote(dev.get('name'), 60)}.",
        NOTICE,
        "",
        f"Wall {us(summ.get('wall_us'))}; device busy {us(summ.get('device_busy_us'))}, "
        f"idle {us(summ.get('device_idle_us'))} of a {us(summ.get('device_span_us'))} span; "
        f"CPU busy {us(summ.get('cpu_busy_us'))}; {b.get('steps')} steps.",
    ]
    if b.get("top_ops"):
        key = b["top_ops_by"]
        lines += ["", f"Top ops by {key}:"]
        rows = [
            f"{i:>2}. {us(r.get(key)):>10}  {clean(r.get('name'), 90)} ({r.get('calls')} calls)"
            for i, r in enumerate(b["top_ops"], 1)
        ]
        lines.append(block(rows))
    if b.get("top_findings"):
        first = call("finding", id=b["top_findings"][0].get("id"))
        lines += [
            "",
            f"Top findings ({b['findings']} in all, ranked by what each saves on the critical "
            f"path, then time at stake; {first} gives one in full):",
        ]
        lines += [
            f"- {f.get('id')} {f.get('severity')} {f.get('kind')}: {saving(f)}. "
            f"{quote(f.get('title'), 200)}"
            for f in b["top_findings"]
        ]
    cp = b.get("critical_path")
    if cp:
        parts = ", ".join(f"{k} {us(v)}" for k, v in list(cp["bound_by_us"].items())[:4])
        lines += [
            "",
            f"Critical path {us(cp.get('length_us'))} of {us(cp.get('wall_us'))}: {parts}.",
        ]
    dist = b.get("distributed")
    if dist:
        lines += [
            "",
            f"Distributed: world size {dist.get('world_size')}, ranks {dist.get('ranks')}, "
            f"stragglers {dist.get('stragglers') or 'none'} (the distributed tool has more).",
        ]
    share = summ.get("device_idle_us"), summ.get("device_span_us")
    if share[0] is not None and share[1]:
        lines.append(f"Device idle: {pct(float(share[0]) / float(share[1]))} of the device span.")
    handle = call("brief", trace=data["handle"])
    lines.append(f"{handle} says what bounds the trace and what to fix first, in one answer.")
    return "\n".join(lines)


def _brief(session: Session, a: dict[str, Any]) -> Answer:
    from opscope.render.brief import lines

    data = session.workspace.brief(a["trace"])
    head = f"Brief of **{data['handle']}** {quote(data['path'], 120)}."
    text = "\n".join([head, NOTICE, *lines(data, name=lambda x: quote(x, 100))])
    return Answer(text, {"trace": data["handle"], **data})


def _brief_output() -> s.JsonSchema:
    obj = {"type": ["object", "null"]}
    return s.result(
        {
            "handle": {"type": "string"},
            "path": {"type": "string"},
            "bound": {
                **obj,
                "description": "the critical path: length_us, wall_us, of_wall, labels "
                "[{label, us, share (of the path)}], top pieces",
            },
            "device": {
                "type": "object",
                "description": "busy_us, idle_us, span_us, busy_share and idle_share (of the "
                "device span), wall_us",
            },
            "roofline": {
                **obj,
                "description": "shares (compute, memory, overhead, unclassified: of the ops' "
                "device self time), verdict, intensity and ridge (FLOP/B)",
            },
            "fixes": {
                "type": "array",
                "items": {"type": "object"},
                "description": "the top findings: id, kind, title, step_savings_us, "
                "time_at_stake_us, call (the next tool call), what_if, command",
            },
            "findings": {"type": "integer", "description": "findings in all"},
        },
        ["bound", "device", "roofline", "fixes"],
    )


def _list(session: Session, a: dict[str, Any]) -> Answer:
    handles = session.workspace.handles()
    try:
        default = session.workspace.get().handle
    except Exception:
        default = None
    lines = [f"{len(handles)} open trace{'s' if len(handles) != 1 else ''}."]
    lines += [
        f"- **{h['handle']}**{' (default)' if h['handle'] == default else ''} "
        f"{quote(h['path'], 120)}: {h['events']} events, ranks {h['ranks']}"
        for h in handles
    ]
    if not handles:
        lines.append("Open one with open_trace (its path: a trace file or folder).")
    return Answer("\n".join(lines), {"trace": default or "", "traces": handles, "default": default})


def _close(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    handle = a["trace"] or ws.get().handle
    ws.close(handle)
    return Answer(f"Closed {handle}.", {"trace": handle, "closed": True})


_DESCRIBED: s.JsonSchema = {
    "handle": {"type": "string"},
    "path": {"type": "string"},
    "events": {"type": "integer"},
    "format": {"type": "string"},
    "ranks": {"type": "array", "items": {"type": "integer"}},
    "device": {"type": "object"},
    "steps": {"type": ["array", "null"], "items": {"type": "integer"}},
}


def _brief_schema() -> s.JsonSchema:
    brief = {
        "type": "object",
        "properties": {
            "device": {"type": "object"},
            "source": {"type": "object"},
            "window": s.titled("Window"),
            "summary": s.titled("Summary"),
            "steps": {"type": "integer", "description": "profiler steps in the window"},
            "top_ops_by": {"type": "string"},
            "top_ops": {"type": "array", "items": {"type": "object"}},
            "findings": {"type": "integer", "description": "findings in all"},
            "top_findings": {"type": "array", "items": {"type": "object"}},
            "critical_path": {"type": "object"},
            "distributed": {"type": "object"},
        },
        "required": ["summary", "top_ops", "top_findings"],
    }
    return s.result({**_DESCRIBED, "brief": brief}, ["handle", "path", "events", "brief"])


TOOLS = [
    ToolSpec(
        name="open_trace",
        title="Open a trace",
        description=(
            "Open a profiler trace (a Kineto/PyTorch .json or .json.gz, a run folder, a folder "
            "of per-rank traces, or a Neuron profile) and analyse it; returns a handle (t1, "
            "t2, ...) and the same compact digest as summary. The last trace opened is the "
            "default for every other tool. Start here."
        ),
        input_schema=s.args(
            {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 4096,
                    "description": "trace file or folder",
                },
                "steps": {
                    "type": "string",
                    "pattern": r"^\d{1,9}(:\d{1,9})?$",
                    "description": "profiler steps to analyse: one (7) or a range (5:8)",
                },
                "rank": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 1_000_000,
                    "description": "keep this rank of a job only",
                },
            },
            ["path"],
        ),
        output=lambda: s.result(
            {
                **_DESCRIBED,
                "brief": {"type": "object", "description": "the digest summary answers"},
            },
            ["handle", "path", "events", "brief"],
        ),
        handler=_open,
        opens=True,
    ),
    ToolSpec(
        name="summary",
        title="Summary of a trace",
        description=(
            "The first read of an open trace: device, window, busy/idle time, the top ops, "
            "the top findings, the critical path's length and what bounds it, and the job's "
            "ranks. Use findings, ops, kernels and chain for details."
        ),
        input_schema=s.args({"trace": s.TRACE}),
        output=_brief_schema,
        handler=_summary,
    ),
    ToolSpec(
        name="brief",
        title="What bounds the trace, and what to fix first",
        description=(
            "What an expert says first, in one short answer: what bounds the step (the "
            "critical path's labels with their shares of the path), device busy/idle (of the "
            "device span), the roofline's verdict, and the top three fixes with what each "
            "saves on the critical path and the exact next call for each. Call it after "
            "open_trace."
        ),
        input_schema=s.args({"trace": s.TRACE}),
        output=_brief_output,
        handler=_brief,
    ),
    ToolSpec(
        name="list_traces",
        title="List open traces",
        description="The traces open on this server, with their handles; marks the default.",
        input_schema=s.args({}),
        output=lambda: s.result(
            {
                "traces": {
                    "type": "array",
                    "items": {"type": "object", "properties": _DESCRIBED},
                },
                "default": {"type": ["string", "null"]},
            },
            ["traces", "default"],
        ),
        handler=_list,
    ),
    ToolSpec(
        name="close_trace",
        title="Close a trace",
        description="Close an open trace (default: the last opened) and free its memory.",
        input_schema=s.args({"trace": s.TRACE}),
        output=lambda: s.result({"closed": {"type": "boolean"}}, ["closed"]),
        handler=_close,
        read_only=False,
    ),
]
