"""Are the files of a trace of several ranks ranks of one job?  Their time windows must
agree (their ``distributedInfo`` is :mod:`opscope.trace.jobs`'s to check, as they are read)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opscope.trace.model import Trace, TraceMeta


def not_one_job(trace: Trace) -> str | None:
    """Why the files of a trace of several ranks are not ranks of one job, or None.

    Unrelated traces (two runs recorded apart) must not be merged into one window: they are
    refused when nothing names their ranks (no ``distributedInfo``, no ``rank<N>`` in the file
    names) and their time windows do not overlap."""
    meta = trace.meta
    index = trace.index
    spans: list[tuple[int, int]] = []
    for r in meta.ranks:
        rows = index.rank == r
        if rows.any():
            spans.append((int(index.start[rows].min()), int(index.end[rows].max())))
    return unrelated_files(meta, spans)


#: Ranks named by their traces whose windows lie this far apart (or further than the longest
#: rank's window) are files of different runs.
APART_NS = 10 * 10**9


def unrelated_files(meta: TraceMeta, spans: list[tuple[int, int]]) -> str | None:
    """:func:`not_one_job` of a job's stacked metadata and its ranks' ``(first start, last
    end)`` in ns (ranks without events left out).  Ranks nothing names are refused when their
    windows do not overlap; ranks their traces name, when their windows lie more than the
    longest rank's window and :data:`APART_NS` apart (clocks of different runs: no clock
    offset of one job's hosts is that large)."""
    ranks = list(meta.ranks)
    if len(ranks) < 2 or len(spans) < 2:
        return None
    named = any(meta.rank_origin.get(r, "order") != "order" for r in ranks)
    spans = sorted(spans)
    gaps = [b[0] - a[1] for a, b in pairwise(spans)]
    files = ", ".join(Path(p).name for p in meta.paths[:4]) + (
        " ..." if len(meta.paths) > 4 else ""
    )
    if named:
        longest = max(b - a for a, b in spans)
        if max(gaps) <= max(longest, APART_NS):
            return None
        return (
            f"{files}: not ranks of one job (their time windows lie {max(gaps) / 1e9:.1f} s "
            "apart, more than any rank's window: files of different runs); nothing is merged: "
            "report each job on its own (opscope report FILE_OR_FOLDER)"
        )
    if not gaps or min(gaps) <= 0:
        return None
    return (
        f"{files}: not ranks of one job (no distributedInfo or rank<N> in their names, and "
        f"their time windows do not overlap: {min(gaps) / 1e9:.1f} s apart); report each file "
        "on its own (opscope report FILE), or compare two with opscope diff A B"
    )


__all__ = ["APART_NS", "not_one_job", "unrelated_files"]
