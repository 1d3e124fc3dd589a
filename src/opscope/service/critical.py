"""The critical path placed on the timeline: the report's ``critical_path`` section with each
segment's lane, nesting row and time relative to the timeline's origin (see
:meth:`Workspace.critical_path`).

A segment names the event its time is spent in (``event_id``; for a job the ids are unique in
the whole table, so one :class:`~opscope.trace.viewport.Viewport` places every rank's pieces)
and where the piece begins (``start_ns``, on its rank's clock: the clock its events use).  So
a segment is drawn on its event's lane and row, from ``t = start_ns - origin_ns`` for its own
duration (a piece can be part of an event: an op's time before and after its children).  A
segment with no event (``untraced`` time) is drawn at the top of the lane its evidence names
(the event after it, else the one before it: a thread's lane for host time between its
events, a stream's lane for device work that waited for something the trace does not show);
one with neither keeps ``t`` and gets ``lane`` and ``row`` null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.critical.path import Segments

if TYPE_CHECKING:
    from opscope.trace.viewport import Viewport

# The segments placed at most (a page draws them all while it pans and zooms).
MAX_SEGMENTS = 20_000


def drawn_path(
    section: Mapping[str, Any], index: Viewport, limit: int = MAX_SEGMENTS
) -> dict[str, Any]:
    """The section with its ``segments`` placed for drawing (see the module docstring).

    Each segment keeps the report's keys (``rank``, ``label``, ``name``, ``event_id``,
    ``start_ns``, ``dur_us``) and gains ``i`` (its position in the report's path), ``lane``,
    ``row``, ``t`` and ``dur_ns``.  More than ``limit`` segments: the ``limit`` longest are
    kept, in path order, and ``truncated`` is true.  Also ``segments_total`` (the report's
    count) and ``origin_ns`` (as a string, like ``/api/lanes``)."""
    raw = section.get("segments") or []
    total = len(raw)
    keep = np.arange(total)
    if isinstance(raw, Segments):  # columnar: only the kept ones become dicts
        if total > limit:
            keep = np.sort(np.argsort(-raw.durations_us(), kind="stable")[: max(0, limit)])
        chosen = raw.take(keep)
    else:
        segs = list(raw)
        if total > limit:
            dur = np.asarray([float(s.get("dur_us") or 0.0) for s in segs], dtype=np.float64)
            keep = np.sort(np.argsort(-dur, kind="stable")[: max(0, limit)])
        chosen = [segs[k] for k in keep.tolist()]
    ids = np.asarray([_anchor(s) for s in chosen], dtype=np.int64)
    gap = np.asarray([s.get("event_id") is None for s in chosen], dtype=bool)
    rows = index.rows_of(ids) if len(ids) else np.zeros(0, dtype=np.int64)
    rows = np.where(ids >= 0, rows, -1)
    at = np.maximum(rows, 0)
    lanes = index.lane_of[at].tolist() if index.n else [0] * len(rows)
    depth = np.where(gap, 0, index.depth[at]).tolist() if index.n else [0] * len(rows)
    origin = index.origin_ns
    out: list[dict[str, Any]] = []
    for k, s, r, lane, row in zip(keep.tolist(), chosen, rows.tolist(), lanes, depth, strict=True):
        placed = dict(s)
        placed["i"] = k
        placed["lane"] = int(lane) if r >= 0 else None
        placed["row"] = int(row) if r >= 0 else None
        placed["t"] = int(s["start_ns"]) - origin
        placed["dur_ns"] = round(float(s.get("dur_us") or 0.0) * 1000.0)
        out.append(placed)
    answer = {k: v for k, v in section.items() if k != "segments"}
    answer["segments"] = out
    answer["segments_total"] = total
    answer["truncated"] = total > len(out)
    answer["origin_ns"] = str(origin)
    return answer


def _anchor(segment: Mapping[str, Any]) -> int:
    """The id of the event a segment is drawn by (-1 none): its own, else its evidence's."""
    if segment.get("event_id") is not None:
        return int(segment["event_id"])
    ev = segment.get("evidence") or {}
    for key in ("after_event_id", "before_event_id"):
        if ev.get(key) is not None:
            return int(ev[key])
    return -1


__all__ = ["MAX_SEGMENTS", "drawn_path"]
