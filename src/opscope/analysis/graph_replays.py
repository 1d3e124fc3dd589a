"""CUDA/HIP graph replays as units: what the kernel table says of a graph no capture
attributes.

A graph replay is one launch on the host and every node of the graph on the device; without
the trace of its capture the kernels cannot be put back under the ops that launched them
(:mod:`opscope.trace.graphs.merge` does that when one is given).  The kernel table then keeps
each graph as a unit, one row per graph (appended after the kernel rows, whose device time it
groups: do not add the two), named after its launch call and its order of appearance
(``hipGraphLaunch #1``):

* ``calls`` - its replays in the window; ``device_us`` their device time; ``mean_us``,
  ``min_us``, ``max_us`` per replay;
* ``graph`` - ``graph_id`` (where the trace records one), ``replays``,
  ``kernels_per_replay``, ``device_us_per_replay``, ``span_us_per_replay`` (first start to
  last end of a replay's work), ``launch_us_per_replay`` (the launch call on the host),
  ``idle_between_us`` (mean time from one replay's last end to the next one's first start),
  ``ordered_by`` (``graph_node_ids`` or ``start``), ``replays_listed``;
* ``replays`` - one entry per replay (at most :data:`MAX_REPLAYS_LISTED`): its launch's event
  id, first start and last end, device time, span, work, launch time, the idle before it
  (from the previous replay of the graph);
* ``kernels`` - the graph's work grouped by name within the replay: calls (all replays),
  per replay, device time, mean, min, max;
* ``hint`` - that a capture trace would attribute the kernels, and the one line that records
  it (:data:`CAPTURE_HINT`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.trace.graphs.replays import Replay, find_replays

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex
    from opscope.trace.model import Trace

MAX_REPLAYS_LISTED = 1000

CAPTURE_HINT = (
    "a trace of the graph's capture would attribute these kernels to the ops that launched "
    "them: profile the capture (with torch.profiler.profile(record_shapes=True, "
    "with_stack=True) as p: with torch.cuda.graph(g): out = model(x); then "
    "p.export_chrome_trace('capture_traces/capture.json.gz')) and run opscope report TRACE "
    "--graph-capture capture_traces/"
)


def replays_of(index: EventIndex) -> list[Replay]:
    """The trace's graph replays (:func:`opscope.trace.graphs.replays.find_replays`), found
    once per index."""
    got: list[Replay] = index.memo("graphs.replays", lambda: find_replays(index))
    return got


def unattributed(trace: Trace, steps: tuple[int, int] | None = None) -> list[Replay]:
    """The replays in the window whose work no capture attributed."""
    index = trace.index
    replays = replays_of(index)
    info = trace.graph_capture
    if info is not None and len(info.replay_capture) == len(replays):
        replays = [r for r, c in zip(replays, info.replay_capture, strict=True) if c < 0]
    if steps is None:
        return replays
    inside = index.in_steps(steps)
    return [r for r in replays if inside[r.launch]]


def _stats(values: list[float]) -> tuple[float, float, float]:
    return (sum(values) / len(values), min(values), max(values)) if values else (0, 0, 0)


def replay_units(trace: Trace, steps: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """One unit per graph whose replays no capture attributed (the module docstring), in the
    order of the graphs' first replay; the dicts take :class:`KernelRow`'s fields."""
    replays = unattributed(trace, steps)
    if not replays:
        return []
    index = trace.index
    groups: dict[tuple[object, ...], list[Replay]] = {}
    for r in replays:
        groups.setdefault(r.key(), []).append(r)
    out: list[dict[str, Any]] = []
    for k, (_key, group) in enumerate(groups.items(), 1):
        out.append(_unit(index, group, k))
    return out


def _unit(index: EventIndex, group: list[Replay], number: int) -> dict[str, Any]:
    start, end, dur = index.start, index.end, index.dur
    first = group[0]
    per_device = [float(dur[r.work].sum()) / 1e3 for r in group]
    bounds = [(int(start[r.work].min()), int(end[r.work].max())) for r in group]
    spans = [(b - a) / 1e3 for a, b in bounds]
    launch_us = [float(dur[r.launch]) / 1e3 for r in group]
    idle: list[float | None] = [None]
    idle += [(bounds[i][0] - bounds[i - 1][1]) / 1e3 for i in range(1, len(group))]
    gaps = [g for g in idle if g is not None]
    ops = sorted({index.name[r.op] for r in group if r.op >= 0})
    mean, lo, hi = _stats(per_device)
    kernels = _kernels(index, group)
    listed = group[:MAX_REPLAYS_LISTED]
    ids = index.ids
    return {
        "name": f"{index.name[first.launch]} #{number}",
        "calls": len(group),
        "device_us": float(sum(per_device)),
        "mean_us": mean,
        "min_us": lo,
        "max_us": hi,
        "ops": ops,
        "graph": {
            "graph_id": first.graph_id,
            "replays": len(group),
            "kernels_per_replay": float(np.mean([len(r.work) for r in group])),
            "device_us_per_replay": mean,
            "span_us_per_replay": float(np.mean(spans)),
            "launch_us_per_replay": float(np.mean(launch_us)),
            "idle_between_us": float(np.mean(gaps)) if gaps else None,
            "ordered_by": first.ordered_by,
            "replays_listed": len(listed),
        },
        "replays": [
            {
                "launch_id": int(ids[r.launch]),
                "start_ns": bounds[i][0],
                "end_ns": bounds[i][1],
                "device_us": per_device[i],
                "span_us": spans[i],
                "kernels": len(r.work),
                "launch_us": launch_us[i],
                "idle_before_us": idle[i],
            }
            for i, r in enumerate(listed)
        ],
        "kernels": kernels,
        "hint": CAPTURE_HINT,
    }


def _kernels(index: EventIndex, group: list[Replay]) -> list[dict[str, Any]]:
    """The group's work by name: calls, per replay, device time, mean, min, max."""
    work = np.concatenate([r.work for r in group])
    codes = index.name.codes[work]
    dur = index.dur[work]
    order = np.argsort(codes, kind="stable")
    codes, dur = codes[order], dur[order]
    cut = np.flatnonzero(np.diff(codes)) + 1
    rows: list[dict[str, Any]] = []
    for part_codes, part in zip(np.split(codes, cut), np.split(dur, cut), strict=True):
        c = int(part_codes[0])
        total = float(part.sum()) / 1e3
        rows.append(
            {
                "name": str(index.name.values[c]) if c >= 0 else "",
                "calls": len(part),
                "per_replay": len(part) / len(group),
                "device_us": total,
                "mean_us": total / len(part),
                "min_us": float(part.min()) / 1e3,
                "max_us": float(part.max()) / 1e3,
            }
        )
    rows.sort(key=lambda r: (-r["device_us"], r["name"]))
    return rows


__all__ = ["CAPTURE_HINT", "MAX_REPLAYS_LISTED", "replay_units", "replays_of", "unattributed"]
