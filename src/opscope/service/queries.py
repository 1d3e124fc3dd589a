"""Paged, filtered views of a report's tables and of the timeline, for front-ends that cannot
take a whole document at once (an agent's tool call, a terminal page).

Every answer is a **page**: ``rows`` (at most ``limit``, from ``offset``), ``total`` (rows
that pass the filter), ``offset``, ``next_offset`` (the offset of the next page, ``None`` on
the last) and ``truncated`` (whether rows past this page exist).  Rows are the report's own
rows (``ops``, ``op_shapes``, ``kernels``, roofline ``ops``, ``findings``), unchanged, so a
page has the shapes of ``report.json``'s sections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opscope.errors import OpscopeError

if TYPE_CHECKING:
    from opscope.trace.viewport import Viewport

#: The sort keys of each table (the first is the default; numbers sort largest first, names
#: alphabetically).
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "ops": (
        "device_self_us",
        "device_total_us",
        "cpu_self_us",
        "cpu_total_us",
        "calls",
        "device_calls",
        "device_share",
        "name",
    ),
    "kernels": ("device_us", "calls", "mean_us", "max_us", "min_us", "name"),
    "roofline": ("device_self_us", "costed_us", "flops", "bytes", "intensity", "calls", "name"),
}
SEVERITIES = ("high", "medium", "low", "info")
MAX_EVENT_ROWS = 1000


class QueryError(OpscopeError):
    """A view that cannot be given as asked, with what to ask instead."""


@dataclass(frozen=True)
class PageRequest:
    """What to show of a table: sort key, name filter (case-insensitive substring), page."""

    sort: str | None = None
    name_filter: str | None = None
    limit: int = 20
    offset: int = 0


def _check_page(limit: int, offset: int) -> None:
    if limit < 1:
        raise QueryError(f"limit must be at least 1 (got {limit})")
    if offset < 0:
        raise QueryError(f"offset must be 0 or more (got {offset})")


def _sort_value(row: Mapping[str, Any], key: str) -> tuple[int, Any]:
    v = row.get(key)
    if key == "name":
        return (0, str(v or ""))
    if isinstance(v, bool) or not isinstance(v, int | float):
        return (1, 0.0)  # missing values last
    return (0, -float(v))


def page_rows(rows: Sequence[Mapping[str, Any]], table: str, req: PageRequest) -> dict[str, Any]:
    """One page of ``rows`` (a report table named ``table``: a key of :data:`SORT_KEYS`)
    sorted by ``req.sort`` (ties keep the report's order) and filtered on ``name``."""
    keys = SORT_KEYS[table]
    sort = req.sort or keys[0]
    if sort not in keys:
        raise QueryError(f"{table} cannot be sorted by {sort!r}: use one of {', '.join(keys)}")
    _check_page(req.limit, req.offset)
    chosen = list(rows)
    if req.name_filter:
        needle = req.name_filter.casefold()
        chosen = [r for r in chosen if needle in str(r.get("name", "")).casefold()]
    chosen.sort(key=lambda r: _sort_value(r, sort))
    return page_of(chosen, req.limit, req.offset, sort=sort)


def page_of(rows: Sequence[Any], limit: int, offset: int, **extra: Any) -> dict[str, Any]:
    """``rows[offset:offset + limit]`` as a page (see the module docstring), ``extra`` keys
    first."""
    shown = list(rows[offset : offset + limit])
    end = offset + len(shown)
    more = end < len(rows)
    return {
        **extra,
        "rows": shown,
        "total": len(rows),
        "offset": offset,
        "next_offset": end if more else None,
        "truncated": more,
    }


def page_findings(
    findings: Sequence[Mapping[str, Any]],
    *,
    min_severity: str | None = None,
    kind: str | None = None,
    rank: int | None = None,
    limit: int = 10,
    offset: int = 0,
) -> dict[str, Any]:
    """The report's findings (already ranked) at ``min_severity`` or above, of one ``kind``
    and one ``rank`` (a job's; -1: the job's own findings) when given, one page of them."""
    _check_page(limit, offset)
    chosen = list(findings)
    if min_severity is not None:
        if min_severity not in SEVERITIES:
            raise QueryError(
                f"min_severity {min_severity!r}: use one of {', '.join(SEVERITIES)} "
                "(high is the most severe)"
            )
        worst = SEVERITIES.index(min_severity)
        chosen = [
            f for f in chosen if f.get("severity") in SEVERITIES[: worst + 1]
        ]  # unknown severities are below info
    if kind is not None:
        kinds = sorted({str(f.get("kind")) for f in findings})
        if kind not in kinds:
            raise QueryError(f"no finding of kind {kind!r} (this report has: {', '.join(kinds)})")
        chosen = [f for f in chosen if f.get("kind") == kind]
    if rank is not None:
        ranks = sorted({int(f["rank"]) for f in findings if f.get("rank") is not None})
        if not ranks:
            raise QueryError("rank: this report is of one rank (its findings name none)")
        if rank != -1 and rank not in ranks:
            raise QueryError(
                f"rank {rank}: no finding of that rank (ranks with findings: "
                f"{', '.join(map(str, ranks))}; -1 for the job's own)"
            )
        want = None if rank == -1 else rank
        chosen = [f for f in chosen if f.get("rank") == want]
    return page_of(chosen, limit, offset)


def find_finding(findings: Sequence[Mapping[str, Any]], finding_id: str) -> Mapping[str, Any]:
    """The finding with id ``finding_id`` (``F1``...), else a :class:`QueryError` naming the
    ids there are."""
    for f in findings:
        if f.get("id") == finding_id:
            return f
    ids = [str(f.get("id")) for f in findings]
    shown = ", ".join(ids[:30]) + (" ..." if len(ids) > 30 else "")
    raise QueryError(f"no finding {finding_id!r} (this report has: {shown or 'none'})")


def evidence_events(index: Viewport, finding: Mapping[str, Any], limit: int) -> list[Any]:
    """The first ``limit`` events a finding's evidence names, each a :func:`short_record`;
    ids not in the trace are skipped."""
    out: list[Any] = []
    seen: set[int] = set()
    for ev in finding.get("evidence") or []:
        for event_id in ev.get("event_ids") or []:
            if len(out) >= limit:
                return out
            if event_id in seen:
                continue
            seen.add(event_id)
            row = index.row_of(int(event_id))
            if row >= 0:
                out.append(short_record(index, row))
    return out


_SHORT_KEYS = ("id", "name", "kind", "group", "lane", "lane_id", "rank", "t", "dur_ns", "step")


def short_record(index: Viewport, row: int) -> dict[str, Any]:
    """One event's identity and times (no args, no links): what a listing needs; ``t`` (ns
    from the trace's first event) and ``dur_ns`` also as ``t_us`` and ``dur_us``."""
    rec = index.record(row)
    out = {k: rec[k] for k in _SHORT_KEYS}
    out["t_us"] = rec["t"] / 1e3
    out["dur_us"] = rec["dur_ns"] / 1e3
    return out


@dataclass(frozen=True)
class EventsRequest:
    """A slice of the timeline: events overlapping ``[t0_ns, t1_ns)`` (ns from the trace's
    first event; open ends when None) on ``lanes`` (lane ids, all when None), whose name
    contains ``name_filter`` (case-insensitive), in start order, one page of them."""

    t0_ns: int | None = None
    t1_ns: int | None = None
    lanes: tuple[int, ...] | None = None
    name_filter: str | None = None
    limit: int = 100
    offset: int = 0


def events_slice(index: Viewport, req: EventsRequest) -> dict[str, Any]:
    """One page of the events of a window (see :class:`EventsRequest`), each a
    :func:`short_record`; also ``t0_ns``/``t1_ns`` as applied and ``span_ns``, the trace's
    length.  At most :data:`MAX_EVENT_ROWS` rows a page."""
    import numpy as np

    _check_page(req.limit, req.offset)
    if req.limit > MAX_EVENT_ROWS:
        raise QueryError(f"limit is at most {MAX_EVENT_ROWS} events a page")
    t0 = 0 if req.t0_ns is None else int(req.t0_ns)
    t1 = index.span_ns + 1 if req.t1_ns is None else int(req.t1_ns)
    if t1 <= t0:
        raise QueryError(f"t1 must be after t0 (got t0={t0} ns, t1={t1} ns)")
    if req.lanes is not None:
        bad = [lane for lane in req.lanes if not 0 <= lane < len(index.lanes)]
        if bad:
            raise QueryError(
                f"no lane {bad[0]}: lane ids are 0..{len(index.lanes) - 1} (list the lanes first)"
            )
    mask = (index.rel < t1) & ((index.end > t0) | (index.rel >= t0))
    if req.lanes is not None:
        mask &= np.isin(index.lane_of, np.asarray(req.lanes, dtype=np.int64))
    if req.name_filter:
        needle = req.name_filter.casefold()
        codes = [i for i, n in enumerate(index.names) if needle in n.casefold()]
        mask &= np.isin(index.name_code, np.asarray(codes, dtype=index.name_code.dtype))
    rows = np.flatnonzero(mask)
    rows = rows[np.lexsort((index.lane_of[rows], index.rel[rows]))]
    page = rows[req.offset : req.offset + req.limit].tolist()
    end = req.offset + len(page)
    more = end < len(rows)
    return {
        "t0_ns": t0,
        "t1_ns": t1,
        "span_ns": index.span_ns,
        "rows": [short_record(index, r) for r in page],
        "total": len(rows),
        "offset": req.offset,
        "next_offset": end if more else None,
        "truncated": more,
    }
