"""Tools over the ranked findings: the list, and one in full with its evidence."""

from __future__ import annotations

from typing import Any

from opscope.mcp import schemas as s
from opscope.mcp.budget import fit, fit_page
from opscope.mcp.registry import Answer, Session, ToolSpec
from opscope.mcp.textfmt import call, footer, name_col, us
from opscope.mcp.untrusted import NOTICE, block, quote
from opscope.render.brief import saving
from opscope.service.queries import SEVERITIES


def _findings(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    page = fit_page(
        {"trace": ws.get(a["trace"]).handle}
        | ws.findings(
            a["trace"],
            min_severity=a["min_severity"],
            kind=a["kind"],
            rank=a["rank"],
            limit=a["limit"],
            offset=a["offset"],
        )
    )
    rows = page["rows"]
    more = f"; {call('finding', id=rows[0]['id'])} gives one in full" if rows else ""
    lines = [
        f"Findings, ranked by what each saves on the critical path, then time at stake{more}.",
        NOTICE,
    ]
    for f in page["rows"]:
        where = f" rank {f['rank']}" if f.get("rank") is not None else ""
        lines.append(
            f"- **{f.get('id')}** {f.get('severity')} {f.get('kind')}{where}: {saving(f)}. "
            f"{quote(f.get('title'), 200)}"
        )
    lines.append(footer(page, "findings", "findings", a))
    return Answer("\n".join(lines), page)


def _finding(session: Session, a: dict[str, Any]) -> Answer:
    ws = session.workspace
    found = fit(ws.finding(a["id"], a["trace"], events=a["events"]))
    lines = [
        f"**{found.get('id')}** {found.get('severity')} {found.get('kind')}: {saving(found)}. "
        f"{quote(found.get('title'), 300)}",
        NOTICE,
        "",
        f"Next step: {quote(found.get('recommendation'), 600)}",
    ]
    evidence = found.get("evidence") or []
    if evidence:
        lines += ["", f"Evidence ({len(evidence)} items; event ids work with chain and events):"]
        lines.append(
            block(
                f"ids {e.get('event_ids', [])[:6]}: {name_col(e.get('note'), 200)}"
                for e in evidence[:10]
            )
        )
    events = found.get("evidence_events") or []
    if events:
        lines += ["Evidence events:"]
        lines.append(
            block(
                f"{e['id']:>8} {e['kind']:<8} {us(e['dur_ns'] / 1e3):>10}  {name_col(e['name'])}"
                for e in events
            )
        )
    return Answer("\n".join(lines), {"trace": ws.get(a["trace"]).handle, **found})


TOOLS = [
    ToolSpec(
        name="findings",
        title="Findings",
        description=(
            "The automated bottleneck findings, ranked by the time fixing each would save "
            "(critical-path savings first, then time at stake): id, kind, severity, title, "
            "time at stake. Filter by min_severity or kind; the finding tool gives one in full."
        ),
        input_schema=s.args(
            {
                "trace": s.TRACE,
                "limit": s.limit(10, 50, "findings"),
                "offset": s.OFFSET,
                "min_severity": s.enum(
                    SEVERITIES, "keep findings at this severity or above (high is the most)"
                ),
                "kind": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "description": "keep findings of this kind (idle_gaps, launch_bound, ...)",
                },
                "rank": {
                    "type": "integer",
                    "minimum": -1,
                    "maximum": 1_000_000,
                    "description": "a job: keep this rank's findings (-1: the job's own)",
                },
            }
        ),
        output=lambda: s.page(
            {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "kind": {"type": "string"},
                    "severity": {"type": "string"},
                    "title": {"type": "string"},
                    "time_at_stake_us": {"type": "number"},
                    "step_savings_us": {"type": ["number", "null"]},
                    "share": {"type": ["number", "null"]},
                    "rank": {"type": ["integer", "null"]},
                },
                "required": ["id", "kind", "severity", "title", "time_at_stake_us"],
            }
        ),
        handler=_findings,
    ),
    ToolSpec(
        name="finding",
        title="One finding in full",
        description=(
            "One finding with its details, evidence (event ids, times, notes), the evidence "
            "events themselves and the recommended next step."
        ),
        input_schema=s.args(
            {
                "id": {
                    "type": "string",
                    "pattern": "^F[0-9]{1,6}$",
                    "description": "the finding's id (F1, F2, ...) from findings or summary",
                },
                "trace": s.TRACE,
                "events": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 50,
                    "default": 10,
                    "description": "evidence events to describe",
                },
            },
            ["id"],
        ),
        output=lambda: s.result(
            {"evidence_events": {"type": "array", "items": {"type": "object"}}},
            ["id", "kind", "severity", "title", "evidence_events"],
            base=s.shallow("Finding"),
        ),
        handler=_finding,
    ),
]
