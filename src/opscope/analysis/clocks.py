"""Clock offsets between ranks, from the collectives they share.

Ranks on different hosts stamp their events with different clocks, so a wait measured across
ranks (last arrival minus own arrival) mixes the wait with the clocks' offset.  A collective
that synchronises its ranks (every type but point-to-point) ends at nearly the same moment on
every rank: the difference of a rank's end from the reference rank's (the lowest rank) over the
matched instances estimates that rank's offset.

* ``offset`` of a rank: the median of its end differences (robust to the instances where one
  rank's end was delayed by other work);
* ``residual``: the median absolute deviation of those differences from the offset, the
  largest over the ranks: how far the estimate can be trusted;
* the offsets are **applied** (records shifted, instances matched again) only when the data
  support it: some rank's offset exceeds :data:`MIN_OFFSET_US` and :data:`SUPPORT` times the
  residual, over at least :data:`MIN_INSTANCES` instances.  Ranks on one host share a clock:
  their offsets come out about 0 and nothing is applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from opscope.trace.commnames import P2P_TYPES

MIN_OFFSET_US = 50.0
SUPPORT = 5.0
MIN_INSTANCES = 3


def _key_field(records: Sequence[Mapping[str, Any]]) -> str:
    """How the matcher keys a group: ``seq`` when every record has one, else ``index``."""
    return "seq" if all(r.get("seq") is not None for r in records) else "index"


def estimate(records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """``{"method", "reference_rank", "offsets_us", "residual_us", "instances", "applied"}``
    (``applied``: whether the data support applying the offsets; see the module docstring)."""
    ranks = sorted(records_by_rank)
    out: dict[str, Any] = {
        "method": "collective_ends",
        "reference_rank": ranks[0] if ranks else None,
        "offsets_us": {str(r): 0.0 for r in ranks},
        "residual_us": None,
        "instances": 0,
        "applied": False,
    }
    if len(ranks) < 2:
        out["method"] = "none"
        return out
    by_pg: dict[str, list[Mapping[str, Any]]] = {}
    for r in ranks:
        for rec in records_by_rank[r]:
            if rec.get("name") not in P2P_TYPES and rec.get("end_ns") is not None:
                by_pg.setdefault(str(rec.get("pg", "0")), []).append(rec)
    ends: dict[tuple[str, Any], dict[int, int]] = {}
    for pg, recs in by_pg.items():
        field = _key_field(recs)
        for rec in recs:
            slot = ends.setdefault((pg, rec.get(field)), {})
            slot.setdefault(int(rec["rank"]), int(rec["end_ns"]))
    ref = ranks[0]
    residual = 0.0
    used = 0
    for r in ranks[1:]:
        diffs = np.array(
            [e[r] - e[ref] for e in ends.values() if r in e and ref in e], dtype=np.float64
        )
        if len(diffs) == 0:
            continue
        used = max(used, len(diffs))
        offset = float(np.median(diffs))
        out["offsets_us"][str(r)] = offset / 1e3
        residual = max(residual, float(np.median(np.abs(diffs - offset))) / 1e3)
    out["residual_us"] = residual
    out["instances"] = used
    biggest = max((abs(v) for v in out["offsets_us"].values()), default=0.0)
    out["applied"] = bool(
        used >= MIN_INSTANCES and biggest > MIN_OFFSET_US and biggest > SUPPORT * residual
    )
    return out


def corrected(
    records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]], offsets_us: Mapping[str, float]
) -> dict[int, list[dict[str, Any]]]:
    """The records with each rank's times moved onto the reference rank's clock."""
    out: dict[int, list[dict[str, Any]]] = {}
    for r, recs in records_by_rank.items():
        shift = round(float(offsets_us.get(str(r), 0.0)) * 1e3)
        out[r] = [
            {**rec, "arrival_ns": rec["arrival_ns"] - shift, "end_ns": rec["end_ns"] - shift}
            if rec.get("arrival_ns") is not None and rec.get("end_ns") is not None
            else dict(rec)
            for rec in recs
        ]
    return out
