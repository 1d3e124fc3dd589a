"""Near-misses: where a fusable chain got no proven rewrite, and which step kept it.

Three sources, one list (``near_misses[{pattern, where, reason}]``):

* a matcher's :class:`~opscope.optimize.graph.Miss` - the pattern's first op was found but a
  later step differed (an unbiased variance, the epsilon outside the root, a mask that grows
  the scores);
* a match whose patch could not be written or was not proven;
* a finding of the baseline profile that names a chain a pattern rewrites (the fusion
  finding's "Unfused attention", an RMSNorm chain) where neither of the above explains why
  no rewrite came: the graph was not captured, or no op of the pattern is in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opscope.optimize.graph import Match, Miss


def _entry(pattern: str, where: str, reason: str) -> dict[str, Any]:
    return {"pattern": pattern, "where": where, "reason": reason}


def near_misses(
    *,
    misses: Sequence[Miss],
    unpatched: Sequence[tuple[Match, str]],
    findings: Sequence[dict[str, Any]],
    proven: set[str],
    matched: set[str],
    capture_error: str | None,
) -> list[dict[str, Any]]:
    """See the module docstring; ``proven``: the patterns with a proven rewrite; ``matched``:
    the patterns matched (whose misses, if any, are the unpatched matches)."""
    from opscope.optimize.patterns import REGISTRY

    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()

    def add(e: dict[str, Any]) -> None:
        key = (e["pattern"], e["where"], e["reason"])
        if key not in seen:
            seen.add(key)
            out.append(e)

    for m in misses:
        add(_entry(m.pattern, m.where(), m.reason))
    for match, why in unpatched:
        add(_entry(match.pattern, match.where(), f"matched, but {why}"))
    explained = {e["pattern"] for e in out} | proven | matched
    for f in findings:
        details = f.get("details") or {}
        if f.get("kind") != "fusion":
            continue
        for name, p in REGISTRY.items():
            if name in explained or not p.finding(details):
                continue
            where = str(details.get("scope") or f.get("title") or "?")
            if capture_error:
                reason = f"the graph was not captured ({capture_error})"
            else:
                reason = (
                    f"the profile shows {' → '.join(details.get('ops') or [])} but no "
                    f"{p.written.split('`')[1] if '`' in p.written else name} is in the "
                    "captured graph (spelled another way, or in code the graph does not reach)"
                )
            add(_entry(name, where, reason))
            explained.add(name)
    return out


__all__ = ["near_misses"]
