"""Bottleneck findings: one module per rule (see :mod:`.base` for the contract)."""

from __future__ import annotations

import importlib

from opscope.analysis.findings.base import Context, Rule
from opscope.analysis.findings.finding import Evidence, Finding, rank_key, renumbered

__all__ = ["RULE_MODULES", "Context", "Evidence", "Finding", "Rule", "rules", "run_rules"]

# Rule modules, in no particular order (findings are ranked by time at stake).
RULE_MODULES: tuple[str, ...] = (
    "hotspots",
    "fusion",
    "idle_gaps",
    "sync_stalls",
    "h2d_copies",
    "launch_bound",
    "compile",
    "dtype",
    "profile_quality",
    "comm_exposed",
    "graph_host_gaps",
    "graph_input_copies",
    "graph_recapture",
)


def rules() -> list[Rule]:
    out: list[Rule] = []
    for name in RULE_MODULES:
        mod = importlib.import_module(f"opscope.analysis.findings.{name}")
        out.append(mod.RULE)
    return out


def run_rules(ctx: Context, only: set[str] | None = None) -> list[Finding]:
    """Run every rule (or those named in ``only``), rank the findings by time at stake and
    number them F1, F2..."""
    found: list[Finding] = []
    for rule in rules():
        if only is not None and rule.name not in only:
            continue
        found.extend(rule.run(ctx))
    found.sort(key=lambda f: rank_key(f.time_at_stake_us, f.severity, f.title))
    return renumbered(found)
