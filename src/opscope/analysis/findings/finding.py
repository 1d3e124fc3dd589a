"""One finding, from the rule that makes it to the report's JSON: :class:`Finding`.

A finding is made once (:func:`make_finding`: by a rule, or from a job's rank reports) and never
edited: what the analysis learns later - its ``id`` in rank order, its ``step_savings_us`` on
the critical path, the ``rank`` it is about in a job - makes a new one
(:meth:`Finding.updated`, a :func:`dataclasses.replace`).  :meth:`Finding.to_dict` is the
report's JSON object (:class:`opscope.documents.Finding` describes its keys); it is also read
as that object (``f["kind"]``, ``f.get("rank")``, ``==`` with a dict: a read-only
:class:`~collections.abc.Mapping` over the same keys), so code that reads a report's
findings as dicts reads these.

The JSON object's keys come in the order the finding gained them, as a dict's would: a rule's
finding is numbered among its rank's from the start (``id`` first), a finding made from rank
reports (:data:`JOB_KEYS`) names its ``rank`` and is numbered when ranked with the others;
``step_savings_us``, ``rank`` and ``rank_finding_id`` follow as they are learnt.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opscope.analysis.critical.fixes import Fix

SEVERITIES = ("high", "medium", "low", "info")
_SEVERITY_ORDER = {s: i for i, s in enumerate(SEVERITIES)}

#: The keys of every finding's JSON object, in order.
CORE_KEYS = (
    "kind",
    "severity",
    "title",
    "time_at_stake_us",
    "share",
    "evidence",
    "recommendation",
    "confidence",
    "details",
)
#: The keys a finding gains as the analysis goes on (numbered, measured, placed in a job).
LATER_KEYS = ("id", "step_savings_us", "rank", "rank_finding_id")
#: A rule's finding as made: numbered among its rank's findings (``id``) from the start.
RULE_KEYS = ("id", *CORE_KEYS)
#: A finding made from a job's rank reports: the job's own (``rank`` None) until merged, and
#: numbered when ranked with the others.
JOB_KEYS = (*CORE_KEYS, "rank")


def severity_of(share: float) -> str:
    """high >= 10 % of the window, medium >= 3 %, low >= 1 %, else info."""
    if share >= 0.10:
        return "high"
    if share >= 0.03:
        return "medium"
    if share >= 0.01:
        return "low"
    return "info"


def rank_key(time_at_stake_us: float, severity: str, title: str) -> tuple[float, int, str]:
    """How findings are ranked: most time at stake first, then the graver, then by title."""
    return (-time_at_stake_us, _SEVERITY_ORDER.get(severity, len(SEVERITIES)), title)


def finding_key(f: Finding) -> tuple[float, float, int, str]:
    """How a report's findings are ranked: most step time saved first (``step_savings_us``,
    the critical path's bound on what the fix saves; the time at stake where it is not known),
    then :func:`rank_key`."""
    at_stake = float(f.time_at_stake_us or 0.0)
    first = at_stake if f.step_savings_us is None else float(f.step_savings_us)
    return (-first, *rank_key(at_stake, f.severity, f.title))


@dataclass(frozen=True)
class Evidence:
    """Something the explorer can jump to: events (ids) and/or a time range (``start_ns`` and
    ``end_ns`` on the trace's clock; ``t0`` and ``t1`` on the timeline's, for a job's)."""

    event_ids: list[int] = field(default_factory=list)
    start_ns: int | None = None
    end_ns: int | None = None
    note: str | None = None
    t0: int | None = None
    t1: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"event_ids": self.event_ids}
        if self.start_ns is not None:
            d["start_ns"] = self.start_ns
            d["end_ns"] = self.end_ns
        if self.t0 is not None:
            d["t0"] = self.t0
            d["t1"] = self.t1
        if self.note:
            d["note"] = self.note
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Evidence:
        """The inverse of :meth:`to_dict`."""
        unknown = set(d) - _EVIDENCE_KEYS
        if unknown:
            raise ValueError(f"evidence: unknown key(s) {', '.join(sorted(unknown))}")
        return cls(**{**d, "event_ids": list(d.get("event_ids") or [])})


_EVIDENCE_KEYS = frozenset({"event_ids", "start_ns", "end_ns", "note", "t0", "t1"})


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class Finding(Mapping[str, Any]):
    """One finding: ``f.kind``, ``f.title``, ``f.time_at_stake_us``... or ``f["kind"]``
    (``f["evidence"]`` is the JSON's list of objects, ``f.evidence`` the :class:`Evidence`)."""

    kind: str = ""
    """The rule that found it (``hotspots``, ``idle_gaps``, ``straggler``...): a rule's
    findings are stamped with its name (:meth:`opscope.analysis.findings.base.Rule.run`)."""
    severity: str
    """``high``, ``medium``, ``low`` or ``info``."""
    title: str
    time_at_stake_us: float
    """The most the fix could save in the window, µs."""
    share: float
    """The time at stake over the window's wall time, 0..1."""
    evidence: tuple[Evidence, ...] = ()
    recommendation: str
    confidence: str = "medium"
    """``high``, ``medium`` or ``low``."""
    details: dict[str, Any] = field(default_factory=dict)
    """The rule's own figures (docs/findings.md)."""
    id: str = ""
    """``F1``, ``F2``... in rank order."""
    step_savings_us: float | None = None
    """The most the fix can shorten the critical path, µs (None: not measured)."""
    rank: int | None = None
    """(a job) The rank it is about; None for one rank's trace or the job's own."""
    rank_finding_id: str | None = None
    """(a job) The finding's ``id`` in its rank's report."""
    fix: Fix | None = None
    """The change it proposes, as the critical path's what-if makes it (its
    ``step_savings_us`` is that what-if's saving); not in the JSON (where names can say it,
    ``details.what_if`` holds the spec)."""
    layout: tuple[str, ...] = RULE_KEYS
    """The JSON object's keys, in order (see the module docstring)."""

    def updated(self, **changes: Any) -> Finding:
        """A copy with ``changes``; a key of :data:`LATER_KEYS` it did not have joins the JSON
        object after the others (in the order given)."""
        if "layout" in changes:
            raise TypeError("updated: the layout follows from the keys given")
        new = tuple(k for k in changes if k in LATER_KEYS and k not in self.layout)
        return replace(self, **changes, layout=self.layout + new)

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON object of this finding."""
        return {k: self[k] for k in self.layout}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        """The inverse of :meth:`to_dict` (its keys in its order)."""
        unknown = [k for k in d if k not in _DOCUMENT_KEYS]
        if unknown:
            raise ValueError(f"finding: unknown key(s) {', '.join(unknown)}")
        missing = [k for k in CORE_KEYS if k not in d]
        if missing:
            raise ValueError(f"finding: missing key(s) {', '.join(missing)}")
        values = {k: v for k, v in d.items() if k != "evidence"}
        evidence = tuple(Evidence.from_dict(e) for e in d["evidence"])
        return cls(**values, evidence=evidence, layout=tuple(d))

    # -- read as the JSON object ------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        if key not in self.layout:
            raise KeyError(key)
        if key == "evidence":
            return [e.to_dict() for e in self.evidence]
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.layout)

    def __len__(self) -> int:
        return len(self.layout)

    def __contains__(self, key: object) -> bool:
        return key in self.layout

    def __repr__(self) -> str:
        short = self.title if len(self.title) <= 60 else self.title[:59] + "…"
        rank = f" rank {self.rank}" if self.rank is not None else ""
        return f"Finding({self.id} {self.severity} {self.kind}{rank}: {short})"


_DOCUMENT_KEYS = frozenset(CORE_KEYS) | frozenset(LATER_KEYS)


def make_finding(
    wall_us: float,
    *,
    title: str,
    time_at_stake_us: float,
    evidence: Iterable[Evidence] = (),
    recommendation: str,
    confidence: str = "medium",
    details: dict[str, Any] | None = None,
    severity: str | None = None,
    share: float | None = None,
    fix: Fix | None = None,
    kind: str = "",
    job: bool = False,
) -> Finding:
    """A :class:`Finding` whose ``share`` is ``time_at_stake_us`` over the window's wall time
    ``wall_us`` (unless given), clipped to [0, 1], and whose ``severity`` follows from that
    share (unless given).  A rule's findings take its name as their ``kind`` (leave it out);
    ``job``: made from a job's rank reports (:data:`JOB_KEYS`), its ``kind`` given."""
    sh = share_of(wall_us, time_at_stake_us) if share is None else share
    details = details if details is not None else {}
    if fix is not None and fix.what_if:
        details["what_if"] = fix.what_if
    return Finding(
        kind=kind,
        severity=severity_of(sh) if severity is None else severity,
        title=title,
        time_at_stake_us=time_at_stake_us,
        share=sh,
        evidence=tuple(evidence),
        recommendation=recommendation,
        confidence=confidence,
        details=details,
        fix=fix,
        layout=JOB_KEYS if job else RULE_KEYS,
    )


def share_of(wall_us: float, us: float) -> float:
    """``us`` over ``wall_us``, clipped to [0, 1] (0 for no wall time)."""
    if wall_us <= 0:
        return 0.0
    return float(min(1.0, max(0.0, us / wall_us)))


def renumbered(found: Sequence[Finding]) -> list[Finding]:
    """``found`` numbered F1, F2... in the order given."""
    return [f.updated(id=f"F{i}") for i, f in enumerate(found, 1)]


__all__ = [
    "CORE_KEYS",
    "JOB_KEYS",
    "LATER_KEYS",
    "RULE_KEYS",
    "SEVERITIES",
    "Evidence",
    "Finding",
    "finding_key",
    "make_finding",
    "rank_key",
    "renumbered",
    "severity_of",
    "share_of",
]
