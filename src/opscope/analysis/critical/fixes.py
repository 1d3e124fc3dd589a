"""A change to the work of a trace, as the critical path's what-if makes it: what a finding
proposes (:class:`Fix`) and what ``--what-if NAME=FACTOR`` asks for are one thing, applied to
the graph's weights by one function (:func:`fix_weights`), so that a finding's step saving is
the what-if of its fix (:func:`fix_savings`).

A :class:`Fix` is parts, each selecting some of the graph's time and scaling it by a factor
(0: gone, 0.5: twice as fast, 1: unchanged):

* ``label`` - every piece of that label (``launch_overhead``);
* ``name`` - an op's device work (the kernels it and the ops under it launched; with ``own``
  only those it launched itself), else, for an op that launched none (a CPU trace), its host
  time; a kernel's own time;
* ``rows`` - the same for these events (the index's rows): every occurrence of a finding,
  not the few its evidence lists;
* ``ranges`` - host time inside these time ranges (``(start_ns, end_ns)``: the gaps where the
  device sat idle while the host worked);
* ``unblock`` - with ``rows`` of blocking calls: they no longer wait (their waits on device
  work are cut, their time scaled);
* ``host`` - with ``rows`` or ``name``: their host time, whatever device work they launched
  (a compile span that benchmarks kernels while it compiles).

The spec a finding prints (``what_if``) reproduces its fix where names can say it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.analysis.critical.model import (
    CPU,
    DATA,
    LABELS,
    LAUNCH,
    SPAN,
    SPLIT,
    SYNC,
    SYNC_EDGE,
    UNTRACED,
    Graph,
    under,
)
from opscope.trace.heap import between_parts

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex
    from opscope.trace.model import Trace

# what a what-if name ending in this suffix selects: the device work the op launched itself
OWN_SUFFIX = "@self"
# labels of host time (a gap's ``ranges`` scale these)
HOST_LABELS = (CPU, DATA, LAUNCH, SYNC, UNTRACED)


class FixError(ValueError):
    """A change that names nothing in the trace."""


@dataclass(frozen=True)
class FixPart:
    """One selection and its factor (see the module docstring)."""

    factor: float
    label: str | None = None
    name: str | None = None
    own: bool = False
    rows: np.ndarray | None = field(default=None, compare=False)
    #: ``(start_ns, end_ns)`` pairs: a tuple of them, or an int64 array of shape (n, 2) (a
    #: rule's thousands of gaps held in 16 bytes each rather than as tuples)
    ranges: tuple[tuple[int, int], ...] | np.ndarray | None = field(default=None, compare=False)
    #: only the time of these labels (with ``ranges`` the default is host time)
    labels: tuple[str, ...] | None = None
    unblock: bool = False
    #: with ``rows`` or ``name``: their host time, whatever device work runs under them
    host: bool = False


@dataclass(frozen=True)
class Fix:
    """A finding's proposed change: its parts, and the ``--what-if`` spec that makes the same
    change where names can say it (None: the change is of particular events)."""

    parts: tuple[FixPart, ...]
    what_if: str | None = None


def part_of_name(name: str, factor: float) -> FixPart:
    """A what-if's ``NAME=FACTOR`` as a part: a label, else an event name (``NAME@self``: the
    device work the op launched itself)."""
    if name in LABELS:
        return FixPart(factor, label=name)
    if name.endswith(OWN_SUFFIX) and len(name) > len(OWN_SUFFIX):
        return FixPart(factor, name=name[: -len(OWN_SUFFIX)], own=True)
    return FixPart(factor, name=name)


def fix_weights(
    idx: EventIndex, graph: Graph, fix: Fix | Sequence[FixPart]
) -> tuple[np.ndarray, np.ndarray | None]:
    """The graph's weights with the fix made, and which edges stay (None: all of them)."""
    parts = fix.parts if isinstance(fix, Fix) else tuple(fix)
    w = graph.weight.astype(np.float64)
    keep: np.ndarray | None = None
    for part in parts:
        if part.ranges is not None:
            codes = HOST_LABELS if part.labels is None else [LABELS.index(x) for x in part.labels]
            w = _scale_ranges(graph, w, part.ranges, part.factor, codes)
            continue
        sel = _selected(idx, graph, part)
        if part.labels is not None:
            sel &= np.isin(graph.label, [LABELS.index(x) for x in part.labels])
        w[sel] *= part.factor  # in place: w is this call's own copy
        del sel
        if part.unblock and part.rows is not None:
            cut = _waits_of(idx, graph, part.rows)
            if cut.any():
                keep = ~cut if keep is None else keep & ~cut
    return _rounded_in_place(w), keep


def _rounded_in_place(w: np.ndarray) -> np.ndarray:
    """``np.rint(w).astype(np.int64)`` written over ``w``'s own memory (float64 and int64
    are one size), a block at a time: no second array of the graph's edges."""
    out = w.view(np.int64)
    for a in range(0, len(w), _BLOCK):
        out[a : a + _BLOCK] = np.rint(w[a : a + _BLOCK])
    return out


_SPAN_KINDS = (SPAN, SPLIT)
#: edges taken at a time by the passes over a range fix's edges
_BLOCK = 1 << 18


def _selected(idx: EventIndex, graph: Graph, part: FixPart) -> np.ndarray:
    if part.label is not None:
        if part.label not in LABELS:
            raise FixError(f"no label {part.label!r} (labels: {', '.join(LABELS)})")
        out: np.ndarray = graph.label == LABELS.index(part.label)
        return out
    if part.name is not None:
        marked = idx.name.eq(part.name)
        if not marked.any():
            raise FixError(f"no event named {part.name!r} in the trace")
    else:
        marked = np.zeros(idx.n, dtype=bool)
        rows = np.asarray(part.rows if part.rows is not None else [], dtype=np.int64)
        marked[rows[(rows >= 0) & (rows < idx.n)]] = True
    attributed = graph.edge_row >= 0
    span_like = np.isin(graph.kind, _SPAN_KINDS)

    def at(rows: np.ndarray) -> np.ndarray:
        """``rows[edge_row]`` of each edge (unattributed edges read row 0; ``attributed``
        masks them): no array of the edges' rows made for it."""
        got: np.ndarray = np.take(rows, graph.edge_row, mode="clip")
        return got

    if part.own:
        op = idx.op
        device = idx.is_work & (op >= 0) & marked[np.maximum(op, 0)]
        device |= marked & idx.is_device
        rows_under = marked
    else:
        rows_under = under(idx, marked & idx.is_framework) | (marked & ~idx.is_framework)
        device = rows_under & idx.is_device
    if not part.host and (device & idx.is_work).any():
        sel: np.ndarray = at(device) & span_like & attributed
        return sel
    sel = at(rows_under) & attributed & (graph.label >= 0)
    return sel


def _scale_ranges(
    graph: Graph,
    w: np.ndarray,
    ranges: Sequence[tuple[int, int]] | np.ndarray,
    factor: float,
    labels: Sequence[int],
) -> np.ndarray:
    """The time of ``labels`` inside ``ranges`` scaled: each such edge's weighted part (the
    last ``w`` ns of its span) loses ``(1 - factor)`` of its overlap with the ranges."""
    if not len(ranges):
        return w
    r = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    r = r[np.lexsort((r[:, 1], r[:, 0]))]  # as sorted() orders the pairs
    lo, hi = r[:, 0], r[:, 1]
    host = np.isin(graph.label, np.asarray(labels, dtype=np.int64)) & (w > 0)
    # overlap with the union of the ranges, by prefix sums over the merged ranges
    merged_lo, merged_hi = _merge(lo, hi)
    cum = np.concatenate([[0], np.cumsum(merged_hi - merged_lo)])

    def covered(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(merged_lo, x, side="right")
        prev = np.maximum(k - 1, 0)
        width = merged_hi[prev] - merged_lo[prev]
        inside = np.where(k > 0, np.clip(x - merged_lo[prev], 0, width), 0)
        got: np.ndarray = np.where(k > 0, cum[prev] + inside, 0)
        return got

    # a block of edges at a time (the temporaries stay small); w is fix_weights' own copy,
    # changed in place
    for a in range(0, len(w), _BLOCK):
        e = a + np.flatnonzero(host[a : a + _BLOCK])
        t1 = graph.time[graph.dst[e]].astype(np.int64)
        t0 = t1 - w[e].astype(np.int64)
        overlap = covered(t1) - covered(t0)
        w[e] = np.maximum(w[e] - (1.0 - factor) * overlap, 0)
    return w


def _merge(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    run_hi = np.maximum.accumulate(hi)
    new = np.r_[True, lo[1:] > run_hi[:-1]]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(lo)] - 1
    return lo[starts], run_hi[ends]


def _waits_of(idx: EventIndex, graph: Graph, rows: np.ndarray) -> np.ndarray:
    """The sync edges into the end of ``rows`` (what they waited for)."""
    marked = np.zeros(idx.n, dtype=bool)
    r = np.asarray(rows, dtype=np.int64)
    marked[r[(r >= 0) & (r < idx.n)]] = True
    dst_row = graph.row[graph.dst]
    out: np.ndarray = (graph.kind == SYNC_EDGE) & marked[dst_row] & (graph.role[graph.dst] == 1)
    return out


def collective_rows(
    trace: Trace, records: Sequence[Mapping[str, Any]], name: Any, pg: Any
) -> np.ndarray:
    """The rows of the device work of a rank's collectives called ``name`` in group ``pg``
    (``name`` None: every collective of the rank)."""
    ids = [
        int(w)
        for r in records
        if name is None or (r.get("name") == name and r.get("pg") == pg)
        for w in (r.get("work_event_ids") or [])
    ]
    if not ids:
        return np.zeros(0, dtype=np.int64)
    rows = trace.index.rows_of(np.asarray(ids, dtype=np.int64))
    out: np.ndarray = rows[rows >= 0]
    return out


def capped_saving(saved_us: float, at_stake_us: float) -> float:
    """A finding's ``step_savings_us``: ``saved_us`` to the ns (3 decimals), never above its
    time at stake (a stake finer than a ns could round up past itself: the stake then)."""
    got = round(min(at_stake_us, saved_us), 3)
    return at_stake_us if got > at_stake_us else got


def fix_savings(
    idx: EventIndex,
    graph: Graph,
    findings: Sequence[Mapping[str, Any]],
    fixes: Sequence[Fix | None],
    base_ns: int,
    *,
    base_edges: np.ndarray | None = None,
) -> list[float | None]:
    """Each finding's ``step_savings_us``: the window path's length less its length with the
    finding's fix made (the what-if of the fix), at most its time at stake; 0 for a finding
    with nothing at stake, None for one with no fix (``fixes``: one per finding, in order).
    ``base_edges``: the window path's edges (solved with the graph's own weights); given,
    a fix that only lightens or drops edges off that path is not solved again
    (:func:`off_the_path`)."""
    from opscope.analysis.critical.path import solve_length

    out: list[float | None] = []
    memo: dict[int, int] = {}
    nonnegative: bool | None = None  # whether the graph's weights are all >= 0 (read once)
    for f, fix in zip(findings, fixes, strict=True):
        at_stake = float(f.get("time_at_stake_us") or 0.0)
        if at_stake <= 0:
            out.append(0.0)
            continue
        if fix is None:
            out.append(None)
            continue
        key = id(fix)
        if key not in memo:
            # the last what-if's arrays back first: each fix's land elsewhere in the heap,
            # and at 10M events the holes they leave would add up to the report's peak
            between_parts()
            w, keep = fix_weights(idx, graph, fix)
            changed = keep is not None or bool((w != graph.weight).any())
            lowered = only_lowers(fix)
            if lowered and base_edges is not None and changed:
                if nonnegative is None:
                    nonnegative = bool(graph.weight.min(initial=0) >= 0)
                lowered = nonnegative
            if not changed or (
                base_edges is not None
                and off_the_path(graph.weight, w, keep, base_edges, lowered=lowered)
            ):
                memo[key] = base_ns
            else:
                memo[key] = solve_length(graph, w, keep)
            del w, keep
        # less work never lengthens the step (see section.no_longer)
        saved = max(0, base_ns - memo[key]) / 1000.0
        out.append(capped_saving(saved, at_stake))
    return out


def only_lowers(fix: Fix) -> bool:
    """Whether every part of ``fix`` scales by a factor in [0, 1]: on weights that are all
    0 or more, its weights (:func:`fix_weights`) are then each at most the graph's (a part
    of names or labels multiplies its edges by the factor; a part of ranges takes
    ``(1 - factor)`` of an edge's overlap off it, never below 0; both round to the nearest
    ns, which cannot pass an integer the value did not pass)."""
    return all(0.0 <= part.factor <= 1.0 for part in fix.parts)


def off_the_path(
    weight: np.ndarray,
    fixed: np.ndarray,
    keep: np.ndarray | None,
    path_edges: np.ndarray,
    *,
    lowered: bool = False,
) -> bool:
    """Whether weights ``fixed`` (edges ``keep``, None: all) leave the longest path of
    ``weight`` whose edges are ``path_edges`` the longest, and the one the search returns:
    no edge weighs more and none on the path weighs less or is dropped.  Every other path
    then weighs what it did or less while this one weighs the same, so at every node the
    search keeps the predecessor it chose before (the ties it broke only lose members), and
    the what-if's path is the window's own: it saves nothing.  ``lowered``: the caller knows
    no edge weighs more (:func:`only_lowers` on weights all 0 or more), and the pass over
    every edge that would check it is skipped."""
    if keep is not None and not bool(keep[path_edges].all()):
        return False
    if bool((fixed[path_edges] != weight[path_edges]).any()):
        return False
    return lowered or bool((fixed <= weight).all())


__all__ = [
    "OWN_SUFFIX",
    "Fix",
    "FixError",
    "FixPart",
    "capped_saving",
    "collective_rows",
    "fix_savings",
    "fix_weights",
    "off_the_path",
    "only_lowers",
    "part_of_name",
]
