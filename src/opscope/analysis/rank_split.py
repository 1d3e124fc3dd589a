"""A job's trace split into its ranks: one :class:`~opscope.trace.Trace` per rank, the unit of
analysis (each analysed alone, then merged: :mod:`opscope.analysis.job_report`)."""

from __future__ import annotations

import numpy as np

from opscope.trace import Trace
from opscope.trace.model import TraceMeta


def rank_traces(trace: Trace) -> list[Trace]:
    """One :class:`Trace` per rank of a trace of several (each rank's rows are one block of
    the event table, ids kept: evidence event ids stay valid in the whole table)."""
    ranks = list(trace.meta.ranks)
    col = np.asarray(trace.events.column("rank").to_numpy(zero_copy_only=False))
    out: list[Trace] = []
    meta = trace.meta
    for i, r in enumerate(ranks):
        rows = np.flatnonzero(col == r)
        if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
            events = trace.events.slice(int(rows[0]), len(rows))
        else:
            events = trace.events.take(rows)
        sub = Trace(events, rank_meta(meta, i, r))
        sub.neuron = trace.neuron
        out.append(sub)
    return out


def rank_meta(meta: TraceMeta, i: int, rank: int) -> TraceMeta:
    """The metadata of the ``i``-th rank (``rank``) of a job whose stacked metadata is
    ``meta``: its own path and rank, the job's device, names and the rest."""
    paths = [meta.paths[i]] if len(meta.paths) == len(meta.ranks) else list(meta.paths)
    return TraceMeta(
        paths=paths,
        format=meta.format,
        ranks=[rank],
        rank_origin={rank: meta.rank_origin.get(rank, "order")},
        device_properties=meta.device_properties,
        distributed_info=meta.distributed_info,
        base_time_ns=meta.base_time_ns,
        process_names=meta.process_names,
        thread_names=meta.thread_names,
        extra=meta.extra,
        cached=meta.cached,
        alignment=meta.alignment,
    )


__all__ = ["rank_meta", "rank_traces"]
