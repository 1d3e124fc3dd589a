"""A report's finding as a typed object: the JSON object (a ``dict`` with every key of
:class:`opscope.documents.Finding`), read also by attribute, as the op table's rows are.

``opscope.analyze`` gives its findings as :class:`Finding`; they stay dicts (``f["kind"]``,
``json.dumps``, ``==`` with a plain dict), so nothing that reads them as dicts changes.
"""

from __future__ import annotations

from typing import Any


class Finding(dict[str, Any]):
    """One finding: ``f.kind``, ``f.title``, ``f.time_at_stake_us``... or ``f["kind"]``."""

    __slots__ = ()

    @property
    def id(self) -> str:
        """``F1``, ``F2``... in rank order."""
        return str(self["id"])

    @property
    def kind(self) -> str:
        """The rule that found it (``hotspots``, ``idle_gaps``, ``straggler``...)."""
        return str(self["kind"])

    @property
    def severity(self) -> str:
        """``high``, ``medium``, ``low`` or ``info``."""
        return str(self["severity"])

    @property
    def title(self) -> str:
        return str(self["title"])

    @property
    def time_at_stake_us(self) -> float:
        """The most the fix could save in the window, µs."""
        return float(self.get("time_at_stake_us") or 0.0)

    @property
    def share(self) -> float:
        """The time at stake over the window's wall time, 0..1."""
        return float(self.get("share") or 0.0)

    @property
    def step_savings_us(self) -> float | None:
        """The most the fix can shorten the critical path, µs (None: not measured)."""
        v = self.get("step_savings_us")
        return None if v is None else float(v)

    @property
    def rank(self) -> int | None:
        """(a job) The rank it is about; None for one rank's trace or the job's own."""
        v = self.get("rank")
        return None if v is None else int(v)

    @property
    def recommendation(self) -> str:
        return str(self.get("recommendation") or "")

    @property
    def confidence(self) -> str:
        return str(self.get("confidence") or "")

    @property
    def evidence(self) -> list[dict[str, Any]]:
        """The events behind it: ``[{"event_ids", "start_ns", "end_ns", "note"}]``."""
        return list(self.get("evidence") or [])

    @property
    def details(self) -> dict[str, Any]:
        """The rule's own figures (docs/findings.md)."""
        return dict(self.get("details") or {})

    def __repr__(self) -> str:
        title = self.get("title", "")
        short = title if len(title) <= 60 else title[:59] + "…"
        rank = f" rank {self['rank']}" if self.get("rank") is not None else ""
        return f"Finding({self.get('id')} {self.get('severity')} {self.get('kind')}{rank}: {short})"


def typed(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings as :class:`Finding` (the same dicts' contents; typed as the report's
    plain dicts, which they are)."""
    return [f if isinstance(f, Finding) else Finding(f) for f in findings]


__all__ = ["Finding", "typed"]
