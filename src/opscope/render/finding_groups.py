"""A job's findings grouped for reading: the same finding on several ranks shown once.

A job of N ranks has each rank's findings beside the job's own; the same idle gaps or the
same hot op on every rank would otherwise be N entries that differ in their figures only.
Findings of one ``kind`` whose titles agree once their figures (numbers, with their units) are
set aside form a group, led by its best-ranked member (the findings' order is kept: a group
stands where its lead stands).  The report's data is not changed: the renderers group.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opscope.render.fmt import us

# a figure: a number standing alone (not part of a name such as conv2d or f32), with its unit
_FIGURE = re.compile(
    r"(?<![\w.])\d[\d,.]*(?:\s?(?:µs|us|ms|ns|s|%|GB/s|MB/s|GB|MB|kB|KB|B|x|×))?(?![\w])"
)


@dataclass(frozen=True)
class FindingGroup:
    """``members``: the findings of the group in the report's order (``lead`` first)."""

    members: list[dict[str, Any]]

    @property
    def lead(self) -> dict[str, Any]:
        return self.members[0]

    @property
    def ranks(self) -> list[int]:
        return sorted({int(f["rank"]) for f in self.members if f.get("rank") is not None})

    def rank_label(self) -> str | None:
        """``rank 3``, ``ranks 0-3`` or ``ranks 0, 2, 5-7``; None for a job's own finding."""
        ranks = self.ranks
        if not ranks:
            return None
        if len(ranks) == 1:
            return f"rank {ranks[0]}"
        return f"ranks {rank_ranges(ranks)}"

    def stakes_us(self) -> tuple[float, float]:
        """The smallest and largest time at stake over the members."""
        vals = [float(f.get("time_at_stake_us") or 0.0) for f in self.members]
        return min(vals), max(vals)

    def spread(self) -> str:
        """What follows the lead's time at stake in a group of several ranks (empty for one):
        whose figures are shown, and the members' range."""
        if len(self.members) < 2:
            return ""
        lo, hi = (us(v) for v in self.stakes_us())
        n, rank = len(self.members), self.lead.get("rank")
        if lo == hi:
            return f" on rank {rank} (the same on each of {n} ranks)"
        return f" on rank {rank} ({lo} to {hi} on each of {n} ranks; the figures are rank {rank}'s)"


def rank_ranges(ranks: Sequence[int]) -> str:
    """``0-3, 5, 7-9`` for 0, 1, 2, 3, 5, 7, 8, 9."""
    out: list[str] = []
    items = sorted(set(ranks))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ", ".join(out)


def _key(f: dict[str, Any]) -> tuple[str, str]:
    return str(f.get("kind")), _FIGURE.sub("#", str(f.get("title", "")))


def group_findings(findings: Sequence[dict[str, Any]]) -> list[FindingGroup]:
    """The findings grouped (see the module docstring), in the order of their leads.  A job's
    own findings (no ``rank``) stay one per group."""
    groups: list[FindingGroup] = []
    by_key: dict[tuple[str, str], FindingGroup] = {}
    for f in findings:
        if f.get("rank") is None:
            groups.append(FindingGroup([f]))
            continue
        key = _key(f)
        if key in by_key:
            by_key[key].members.append(f)
            continue
        group = FindingGroup([f])
        by_key[key] = group
        groups.append(group)
    return groups


__all__ = ["FindingGroup", "group_findings", "rank_ranges"]
