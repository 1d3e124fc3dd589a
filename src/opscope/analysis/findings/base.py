"""Findings: ranked, evidenced, actionable statements about where time goes.

Each rule is a module in this package exposing ``RULE: Rule``.  A rule looks at the
:class:`Context` (the trace, its derived tables, the op table, the timeline and, when the trace
came from a run folder, ``run.json``) and returns zero or more :class:`Finding`.  Rules never fire
on noise: each documents its threshold in its module docstring and is tested on a trace where it
must fire and one where it must not.

Findings are ranked by ``time_at_stake_us`` (what the fix could save at most, in the window).
:func:`make_finding` builds one with its ``share`` of the window and the severity that share
gives (:func:`severity_of`), the boilerplate every rule would otherwise repeat.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from opscope.analysis.critical.fixes import Fix
    from opscope.analysis.optable import OpTable
    from opscope.analysis.steps import StepStats
    from opscope.analysis.timeline import TimelineSummary
    from opscope.trace.model import Trace

SEVERITIES = ("high", "medium", "low", "info")


def rank_key(time_at_stake_us: float, severity: str, title: str) -> tuple[float, int, str]:
    """How findings are ranked: most time at stake first, then the graver, then by title."""
    return (-time_at_stake_us, _SEVERITY_ORDER.get(severity, len(SEVERITIES)), title)


_SEVERITY_ORDER = {s: i for i, s in enumerate(SEVERITIES)}


def finding_key(f: Mapping[str, Any]) -> tuple[float, float, int, str]:
    """How finding dicts are ranked: most step time saved first (``step_savings_us``, the
    critical path's bound on what the fix saves; the time at stake where it is not known),
    then :func:`rank_key`."""
    at_stake = float(f.get("time_at_stake_us") or 0.0)
    savings = f.get("step_savings_us")
    first = at_stake if savings is None else float(savings)
    return (-first, *rank_key(at_stake, str(f.get("severity")), str(f.get("title", ""))))


@dataclass
class Evidence:
    """Something the explorer can jump to: events (ids) and/or a time range."""

    event_ids: list[int] = field(default_factory=list)
    start_ns: int | None = None
    end_ns: int | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"event_ids": self.event_ids}
        if self.start_ns is not None:
            d["start_ns"] = self.start_ns
            d["end_ns"] = self.end_ns
        if self.note:
            d["note"] = self.note
        return d


@dataclass
class Finding:
    kind: str  # the rule's name, e.g. "fusion", "hotspot"
    severity: str  # high | medium | low | info
    title: str
    time_at_stake_us: float
    share: float  # time_at_stake over the window's wall time (0..1)
    evidence: list[Evidence]
    recommendation: str
    confidence: str = "medium"  # high | medium | low
    details: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    #: the change the finding proposes, as the critical path's what-if makes it: its
    #: ``step_savings_us`` is that what-if's saving (not in the document; where names can
    #: say it, ``details.what_if`` holds the spec)
    fix: Fix | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "severity": self.severity,
            "title": self.title,
            "time_at_stake_us": self.time_at_stake_us,
            "share": self.share,
            "evidence": [e.to_dict() for e in self.evidence],
            "recommendation": self.recommendation,
            "confidence": self.confidence,
            "details": self.details,
        }


@dataclass
class Context:
    """What the rules see.  Tables are computed once and shared by all rules."""

    trace: Trace
    op_table: OpTable
    timeline: TimelineSummary
    steps: list[StepStats]
    window_steps: tuple[int, int] | None = None
    run_info: dict[str, Any] | None = None  # run.json of a run folder, when there is one
    # Intermediate arrays shared between rules (see ``findings._view``); not part of the contract.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def events(self) -> pa.Table:
        from opscope.analysis.optable import select_window

        return select_window(self.trace.events, self.window_steps)

    @cached_property
    def ops(self) -> pa.Table:
        """Per-event op table (``trace.derived.build_ops``) in the window."""
        from opscope.analysis.optable import select_window

        return select_window(self.trace.ops, self.window_steps)

    @cached_property
    def kernels(self) -> pa.Table:
        """Per-execution device table (``trace.derived.build_kernels``) in the window."""
        from opscope.analysis.optable import select_window

        return select_window(self.trace.kernels, self.window_steps)

    @property
    def device_is_host(self) -> bool:
        return self.op_table.device_is_host

    @property
    def wall_us(self) -> float:
        return self.timeline.wall_us


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    run: Callable[[Context], list[Finding]]


def clip_words(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def share_of_wall(ctx: Context, us: float) -> float:
    """``us`` over the window's wall time, clipped to [0, 1]."""
    wall = ctx.wall_us
    if wall <= 0:
        return 0.0
    return float(min(1.0, max(0.0, us / wall)))


def severity_of(share: float) -> str:
    """high >= 10 % of the window, medium >= 3 %, low >= 1 %, else info."""
    if share >= 0.10:
        return "high"
    if share >= 0.03:
        return "medium"
    if share >= 0.01:
        return "low"
    return "info"


def make_finding(
    ctx: Context,
    *,
    kind: str,
    title: str,
    time_at_stake_us: float,
    evidence: list[Evidence],
    recommendation: str,
    confidence: str = "medium",
    details: dict[str, Any] | None = None,
    severity: str | None = None,
    share: float | None = None,
    fix: Fix | None = None,
) -> Finding:
    """A :class:`Finding` whose ``share`` is ``time_at_stake_us`` over the window's wall time
    (unless given) and whose ``severity`` follows from that share (unless given)."""
    sh = share_of_wall(ctx, time_at_stake_us) if share is None else share
    return Finding(
        kind=kind,
        severity=severity_of(sh) if severity is None else severity,
        title=title,
        time_at_stake_us=time_at_stake_us,
        share=sh,
        evidence=evidence,
        recommendation=recommendation,
        confidence=confidence,
        details=_with_spec(details if details is not None else {}, fix),
        fix=fix,
    )


def _with_spec(details: dict[str, Any], fix: Fix | None) -> dict[str, Any]:
    if fix is not None and fix.what_if:
        details["what_if"] = fix.what_if
    return details
