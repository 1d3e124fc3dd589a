"""The path's ``data_loading`` time explained by the DataLoader's worker processes.

With ``num_workers > 0`` the thread that runs the steps waits inside the loader's ``__next__``
while worker processes decode and collate: the path names that wait ``data_loading`` (its
ops and its untraced time alike).  Given the workers' own traces
(:mod:`opscope.trace.loader_work`), each instant of the path's ``data_loading`` is shared out
among the worker events running then (equally where several workers overlap: they work in
parallel and the trace does not say whose batch was awaited); an instant with no worker busy
is the loader's other time (queues, IPC, pinning memory, a worker that had not started).  The
shares sum to the path's ``data_loading`` time exactly, so the section is a breakdown of a
label the path already has: lengths, labels and what-ifs are unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opscope.analysis.critical.model import DATA
from opscope.analysis.critical.path import Segments
from opscope.trace.loader_work import LoaderWork

#: names listed in ``top``
TOP = 10

METHOD = (
    "each instant of the path's data_loading shared equally among the worker events "
    "(top-level work of each worker's own trace) running then; instants with no worker "
    "busy are not_in_workers_us"
)


def _us(ns: float) -> float:
    return round(float(ns) / 1000.0, 3)


def _data_loading(segments: Segments) -> tuple[np.ndarray, np.ndarray]:
    starts, ends = [], []
    for pieces, _idx in segments.blocks:
        on = np.asarray(pieces.label) == DATA
        s = np.asarray(pieces.start_ns, dtype=np.int64)[on]
        starts.append(s)
        ends.append(s + np.asarray(pieces.dur_ns, dtype=np.int64)[on])
    if not starts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(starts), np.concatenate(ends)


def _coverage(bounds: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many of the intervals cover each piece between consecutive ``bounds``."""
    delta = np.zeros(len(bounds) + 1, np.int64)
    np.add.at(delta, np.searchsorted(bounds, start), 1)
    np.add.at(delta, np.searchsorted(bounds, end), -1)
    return np.cumsum(delta)[: max(len(bounds) - 1, 0)]


def loader_section(segments: Segments, work: LoaderWork) -> dict[str, Any]:
    """``critical_path.data_loading``: the path's data_loading time shared out among the
    workers' events (see the module docstring)."""
    d_start, d_end = _data_loading(segments)
    bounds = np.unique(np.concatenate([d_start, d_end, work.start, work.end]))
    length = np.diff(bounds).astype(np.float64)
    on_path = _coverage(bounds, d_start, d_end) > 0
    busy = _coverage(bounds, work.start, work.end)
    path_ns = float((length * on_path).sum())
    shared = np.where(on_path & (busy > 0), length / np.maximum(busy, 1), 0.0)
    prefix = np.concatenate([[0.0], np.cumsum(shared)])
    got = prefix[np.searchsorted(bounds, work.end)] - prefix[np.searchsorted(bounds, work.start)]
    in_workers = float((length * (on_path & (busy > 0))).sum())
    by_name: dict[str, float] = {}
    for name, ns in zip(work.name, got.tolist(), strict=True):
        if ns > 0:
            by_name[name] = by_name.get(name, 0.0) + ns
    per_worker = np.bincount(work.worker, weights=got, minlength=len(work.workers))
    top = sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP]
    return {
        "on_path_us": _us(path_ns),
        "in_workers_us": _us(in_workers),
        "not_in_workers_us": _us(path_ns - in_workers),
        "workers": [
            {
                "path": w.path,
                "pids": list(w.pids),
                "events": w.events,
                "busy_us": _us(w.busy_ns),
                "on_path_us": _us(float(per_worker[k])),
            }
            for k, w in enumerate(work.workers)
        ],
        "top": [
            {"name": name, "us": _us(ns), "share": round(ns / path_ns, 4) if path_ns else 0.0}
            for name, ns in top
        ],
        "method": METHOD,
    }


__all__ = ["loader_section"]
