"""Unions and intersections of time intervals [start, end), vectorised."""

from __future__ import annotations

import numpy as np


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals [start, end) as sorted, disjoint (starts, ends)."""
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = np.maximum.accumulate(ends[order])
    # a new run starts where the interval begins after everything before it ended
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of intervals [start, end)."""
    s, e = merge_intervals(starts, ends)
    return int((e - s).sum())


def overlap_ns(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> int:
    """|union(a) intersected with union(b)|: |union(a)| + |union(b)| - |union(a and b)|."""
    if len(a_start) == 0 or len(b_start) == 0:
        return 0
    both = union_ns(np.concatenate([a_start, b_start]), np.concatenate([a_end, b_end]))
    return union_ns(a_start, a_end) + union_ns(b_start, b_end) - both


def covered_ns(
    starts: np.ndarray, ends: np.ndarray, by_start: np.ndarray, by_end: np.ndarray
) -> np.ndarray:
    """For each interval [starts[i], ends[i]): how much of it the union of the ``by``
    intervals covers, in ns (one binary search per end point)."""
    s, e = merge_intervals(by_start, by_end)
    if len(s) == 0 or len(starts) == 0:
        return np.zeros(len(starts), dtype=np.int64)
    before = np.concatenate(([0], np.cumsum(e - s)))  # covered length before each run

    def cover(t: np.ndarray) -> np.ndarray:
        j = np.searchsorted(s, t, side="right") - 1
        jj = np.maximum(j, 0)
        inside = np.clip(t - s[jj], 0, e[jj] - s[jj])
        return np.where(j >= 0, before[jj] + inside, 0)

    return np.asarray(cover(ends) - cover(starts), dtype=np.int64)
