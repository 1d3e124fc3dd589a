"""Findings: ranked, evidenced, actionable statements about where time goes.

Each rule is a module in this package exposing ``RULE: Rule``.  A rule looks at the
:class:`Context` (the trace, its derived tables, the op table, the timeline and, when the trace
came from a run folder, ``run.json``) and returns zero or more :class:`Finding`
(:mod:`.finding`), of its own ``kind``: the rule's name, given by :meth:`Rule.run`.  Rules never
fire on noise: each documents its threshold in its module docstring and is tested on a trace
where it must fire and one where it must not.

Findings are ranked by ``time_at_stake_us`` (what the fix could save at most, in the window).
:func:`make_finding` builds one with its ``share`` of the window and the severity that share
gives (:func:`severity_of`), the boilerplate every rule would otherwise repeat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from opscope.analysis.findings.finding import (
    SEVERITIES,
    Evidence,
    Finding,
    finding_key,
    make_finding,
    rank_key,
    severity_of,
    share_of,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from opscope.analysis.optable import OpTable
    from opscope.analysis.steps import StepStats
    from opscope.analysis.timeline import TimelineSummary
    from opscope.trace.model import Trace


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
    """A rule: its ``name`` (the ``kind`` of every finding it makes), a line saying what it
    finds, and ``find``, which looks at a :class:`Context` and makes the findings."""

    name: str
    description: str
    find: Callable[[Context], list[Finding]]

    def run(self, ctx: Context) -> list[Finding]:
        """The rule's findings on ``ctx``, each of ``kind`` :attr:`name`."""
        return [f.updated(kind=self.name) for f in self.find(ctx)]


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
    return share_of(ctx.wall_us, us)


__all__ = [
    "SEVERITIES",
    "Context",
    "Evidence",
    "Finding",
    "Rule",
    "clip_words",
    "finding_key",
    "make_finding",
    "rank_key",
    "severity_of",
    "share_of_wall",
]
