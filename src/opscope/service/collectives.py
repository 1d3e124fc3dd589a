"""The collective of an event: which collective record an event belongs to, on which rank, and
the instance it is part of across the ranks of a job (see :meth:`Workspace.collective`).

:class:`CollectiveLookup` is built once per open trace from its report (the ranks' collective
records, :mod:`opscope.analysis.collectives`, and the ``distributed`` section's matched
instances) and answers each question with a few dictionary look-ups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opscope.analysis.collective_match import instance_members

if TYPE_CHECKING:
    from opscope.analysis.report import Report
    from opscope.trace.viewport import Viewport

# The work events drawn per rank at most (a coalesced call can launch many kernels).
MAX_DRAWN = 32
_MAX_HOPS = 256


@dataclass
class CollectiveLookup:
    """Event ids -> collective records and matched instances, for one open trace."""

    records: dict[int, list[dict[str, Any]]]  # rank -> its records
    instances: list[dict[str, Any]]  # the report's matched instances
    members: list[dict[int, int]]  # per instance: rank -> record position
    by_event: dict[int, tuple[int, int]]  # event id -> (rank, record position)
    instance_of: dict[tuple[int, int], int]  # (rank, record position) -> instance

    @classmethod
    def of_report(cls, report: Report, ranks: Sequence[int]) -> CollectiveLookup:
        if report.ranks:
            records = {int(r.rank): list(r.collectives) for r in report.ranks}
        else:
            only = int(ranks[0]) if ranks else 0
            records = {only: list(report.collectives)}
        dist = report.extra.get("distributed") or {}
        return cls.of_records(records, list(dist.get("instances") or []))

    @classmethod
    def of_records(
        cls, records: dict[int, list[dict[str, Any]]], instances: list[dict[str, Any]]
    ) -> CollectiveLookup:
        """From each rank's collective records and the matched instances (a report's
        ``distributed.instances``)."""
        members = instance_members(records, instances)
        by_event: dict[int, tuple[int, int]] = {}
        for rank, recs in records.items():
            for pos, rec in enumerate(recs):
                for eid in [rec.get("event_id"), *(rec.get("work_event_ids") or [])]:
                    if eid is not None:
                        by_event.setdefault(int(eid), (rank, pos))
        instance_of = {(rank, pos): i for i, m in enumerate(members) for rank, pos in m.items()}
        return cls(records, instances, members, by_event, instance_of)

    def find(self, index: Viewport, row: int) -> tuple[int, int] | None:
        """(rank, record position) of the record the event at ``row`` belongs to: the event
        itself when it is a record's anchor or work, else its nearest op-tree ancestor that is
        (a ``record_param_comms`` or backend range nested in the call), else, for a runtime
        or device event, the op that issued it and that op's ancestors."""
        ix = index.index
        ids, up, op = ix.ids, ix.tree_parent, ix.op
        starts = [row]
        if int(op[row]) >= 0 and int(op[row]) != row:
            starts.append(int(op[row]))
        for start in starts:
            cur = start
            for _ in range(_MAX_HOPS):
                if cur < 0:
                    break
                hit = self.by_event.get(int(ids[cur]))
                if hit is not None:
                    return hit
                cur = int(up[cur])
        return None

    def answer(
        self, index: Viewport, rank: int, pos: int, *, drawn: int = MAX_DRAWN
    ) -> dict[str, Any]:
        """The instance of the record ``pos`` of ``rank`` (see :meth:`Workspace.collective`);
        ``drawn``: work events placed per rank at most."""
        rec = self.records[rank][pos]
        i = self.instance_of.get((rank, pos))
        if i is None:  # one rank, or a record no instance holds (point-to-point, unmatched)
            return {
                "name": rec["name"],
                "pg": rec["pg"],
                "seq": rec["seq"] if rec["seq"] is not None else rec["index"],
                "bytes": rec["bytes"],
                "last_rank": rank,
                "start_skew_us": 0.0,
                "end_skew_us": 0.0,
                "dur_us": rec["dur_us"],
                "matched": False,
                "rank": rank,
                "ranks": [_member(index, rec, 0.0, drawn)],
            }
        inst = self.instances[i]
        waits: Mapping[str, float] = inst.get("wait_us") or {}
        members = self.members[i]
        return {
            "name": inst["name"],
            "pg": inst["pg"],
            "seq": inst["seq"],
            "bytes": inst.get("bytes"),
            "last_rank": inst["last_rank"],
            "start_skew_us": inst["start_skew_us"],
            "end_skew_us": inst.get("end_skew_us"),
            "dur_us": inst["dur_us"],
            "matched": True,
            "rank": rank,
            "ranks": [
                _member(index, self.records[r][p], float(waits.get(str(r), 0.0)), drawn)
                for r, p in sorted(members.items())
            ],
        }


def _member(
    index: Viewport, rec: Mapping[str, Any], wait_us: float, limit: int = MAX_DRAWN
) -> dict[str, Any]:
    """One rank's part of an instance, with its events placed for drawing (``drawn``: lane,
    nesting row, relative start ``t`` and duration of the work events, or of the anchor when
    the record has none; at most ``limit``)."""
    work = [int(e) for e in rec.get("work_event_ids") or []]
    anchor = rec.get("event_id")
    shown = work[:limit] if work else ([int(anchor)] if anchor is not None else [])
    drawn = []
    for eid in shown:
        row = index.row_of(eid)
        if row < 0:
            continue
        drawn.append(
            {
                "id": eid,
                "lane_id": int(index.lane_of[row]),
                "row": int(index.depth[row]),
                "t": int(index.rel[row]),
                "dur_ns": int(index.dur[row]),
            }
        )
    origin = index.origin_ns
    return {
        "rank": int(rec["rank"]),
        "arrival_ns": int(rec["arrival_ns"]),
        "end_ns": int(rec["end_ns"]),
        "t0": int(rec["arrival_ns"]) - origin,
        "t1": int(rec["end_ns"]) - origin,
        "wait_us": wait_us,
        "event_id": None if anchor is None else int(anchor),
        "work_event_ids": work,
        "drawn": drawn,
    }


__all__ = ["MAX_DRAWN", "CollectiveLookup"]
