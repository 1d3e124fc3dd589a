"""The dependency chain of an event (``opscope.analysis.chain.dependency_chain``): framework op
-> runtime launch -> device execution, and back.  Times relative to the timeline's origin
(``t``, ns) as the explorer draws them."""

from typing import Any

from opscope.documents._typing import NotRequired, TypedDict


class EventRecord(TypedDict):
    """One event."""

    id: int
    name: str
    source: str
    """``framework``, ``runtime``, ``device``..."""
    kind: str
    """``op``, ``kernel``, ``memcpy``, ``launch``..."""
    rank: int
    lane_id: int
    lane: str
    """As in the event table: ``thread 6240``, ``stream 7``..."""
    group: str
    """``framework``, ``runtime`` or ``hardware``."""
    row: int
    """Nesting depth."""
    start_ns: int
    t: int
    """``start_ns`` relative to the timeline's origin, ns."""
    dur_ns: int
    step: int | None
    parent_id: int | None
    op_id: int | None
    """The innermost framework op that issued it."""
    launch_id: int | None
    """The runtime call that launched it (device work)."""
    args: NotRequired[dict[str, Any]]
    """The event's ``args``, decoded (only where asked for)."""


class Hop(EventRecord):
    """One event of a path, with its delay from the hop before."""

    role: str
    """``framework op``, ``runtime launch`` or ``device execution``."""
    offset_ns: int | None
    """This hop's start minus the previous hop's start (None: the first hop)."""
    gap_ns: int | None
    """This hop's start minus the previous hop's end: negative while nested in it, positive
    for a queueing delay."""


class Chain(TypedDict):
    """The chain through one event: each path op -> launch -> device work."""

    event: EventRecord
    stack: list[EventRecord]
    """The framework call stack above the chain's op, outermost first."""
    paths: list[list[Hop]]
    """Paths that reach the device first."""
    truncated: int
    """Paths left out (at most 200 are given)."""
    device_executions: int
    device_ns: int
    """Device time of the chain's executions, ns."""
    note: str | None


__all__ = ["Chain", "EventRecord", "Hop"]
