"""Derived per-event tables: ``ops`` (one row per framework op/annotation) and ``kernels`` (one row
per device execution), computed once from the trace's event index
(:class:`opscope.trace.index.EventIndex`; an events table is indexed on the fly).

Definitions (the same as torch.profiler's ``key_averages()`` where it has one):

* op tree - framework events of kind op, annotation and step, nested by ``parent_id`` with
  Python frames skipped (torch's FunctionEvent tree has no Python frames either).
* ``self_ns`` - ``dur_ns`` minus the durations of the direct children in the op tree, runtime
  calls included (torch counts a ``cudaLaunchKernel`` as a child CPU event of its op).
* ``device_self_ns`` - device time of the executions the op launched directly (``op_id`` is
  this op); ``device_total_ns`` also counts its descendants' launches.  Device annotations
  (``gpu_user_annotation``) are spans over other work and are not counted.
* ``is_leaf`` - no op/annotation children: on a CPU-only trace, the events that did the work.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.arrays import ints
from opscope.trace.index import EventIndex


def _index(events: pa.Table | EventIndex) -> EventIndex:
    return events if isinstance(events, EventIndex) else EventIndex(events)


def _taken(ev: pa.Table, take: pa.Array, names: tuple[str, ...]) -> dict[str, pa.ChunkedArray]:
    """The rows ``take`` of the event table's columns ``names``, by name."""
    return {n: ev.column(n).take(take) for n in names}


def build_ops(events: pa.Table | EventIndex) -> pa.Table:
    """One row per framework op/annotation/step event with self and device times."""
    index = _index(events)
    if index.n == 0:
        return _empty_ops()
    ev = index.events
    n = index.n
    tparent = index.tree_parent
    # device time: launches attributed to their op, then summed up the op tree
    op = index.op
    work = index.is_work & (op >= 0)
    dev_self = np.bincount(op[work], weights=index.dur[work], minlength=n).astype(np.int64)
    dev_self_count = np.bincount(op[work], minlength=n).astype(np.int64)
    dev_total = index.subtree_sum(dev_self)
    dev_total_count = index.subtree_sum(dev_self_count)

    rows = np.flatnonzero(index.in_tree)
    take = pa.array(rows)
    dims, types = index.shape_columns(rows)
    parent = tparent[rows]
    return pa.table(
        {
            **_taken(ev, take, ("id", "rank", "name", "kind", "pid", "tid", "start_ns", "dur_ns")),
            "self_ns": pa.array(index.self_ns[rows], pa.int64()),
            "parent_op": pa.array(
                np.where(parent >= 0, index.ids[np.maximum(parent, 0)], 0),
                pa.int64(),
                mask=parent < 0,
            ),
            "depth": pa.array(index.depth[rows], pa.int32()),
            "is_leaf": pa.array(index.is_leaf[rows]),
            "device_self_ns": pa.array(dev_self[rows], pa.int64()),
            "device_total_ns": pa.array(dev_total[rows], pa.int64()),
            "device_self_count": pa.array(dev_self_count[rows], pa.int64()),
            "device_total_count": pa.array(dev_total_count[rows], pa.int64()),
            "step": ev.column("step").take(take),
            "input_dims": dims,
            "input_types": types,
        }
    )


def _empty_ops() -> pa.Table:
    return build_ops_schema().empty_table()


def build_ops_schema() -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.int64()),
            ("rank", pa.int32()),
            ("name", pa.dictionary(pa.int32(), pa.string())),
            ("kind", pa.dictionary(pa.int32(), pa.string())),
            ("pid", pa.dictionary(pa.int32(), pa.string())),
            ("tid", pa.dictionary(pa.int32(), pa.string())),
            ("start_ns", pa.int64()),
            ("dur_ns", pa.int64()),
            ("self_ns", pa.int64()),
            ("parent_op", pa.int64()),
            ("depth", pa.int32()),
            ("is_leaf", pa.bool_()),
            ("device_self_ns", pa.int64()),
            ("device_total_ns", pa.int64()),
            ("device_self_count", pa.int64()),
            ("device_total_count", pa.int64()),
            ("step", pa.int32()),
            ("input_dims", pa.dictionary(pa.int32(), pa.string())),
            ("input_types", pa.dictionary(pa.int32(), pa.string())),
        ]
    )


def build_kernels(events: pa.Table | EventIndex) -> pa.Table:
    """One row per device execution, with the op and the runtime call that launched it."""
    index = _index(events)
    ev = index.events
    n = index.n
    dev_rows = np.flatnonzero(index.is_device) if n else np.zeros(0, dtype=np.int64)
    take = pa.array(dev_rows, pa.int64())
    dev_op = index.op[dev_rows]
    has_op = dev_op >= 0
    op_name = ev.column("name").take(pa.array(np.where(has_op, dev_op, 0))) if n else None
    op_name = (
        pc.if_else(pa.array(has_op), op_name.cast(pa.string()), pa.scalar(None, pa.string()))
        if op_name is not None and len(dev_rows)
        else pa.array([], pa.string())
    )
    if "launch_id" in ev.column_names or "launch_id" in index.held_links():
        # linked at ingest (correlation, else ac2g flows: graph launches included)
        launch_arr = index.link_ids("launch_id", dev_rows)
    else:
        launch_arr = _launch_by_correlation(index, dev_rows)
    return pa.table(
        {
            **_taken(ev, take, ("id", "rank", "name", "kind", "pid", "lane", "start_ns")),
            **_taken(ev, take, ("dur_ns",)),
            "op_id": index.link_ids("op_id", dev_rows),
            "op_name": op_name,
            "launch_id": launch_arr,
            "step": ev.column("step").take(take),
        }
    )


def _launch_by_correlation(index: EventIndex, dev_rows: np.ndarray) -> pa.Array:
    """The launching runtime call of each device row: the first runtime event (in row order)
    of the same rank and correlation; null when there is none."""
    ev = index.events
    corr_col = ev.column("correlation")
    has_corr = ~np.asarray(corr_col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    corr = ints(corr_col, 0)
    rt = np.flatnonzero(index.is_runtime & has_corr)
    dev = dev_rows[has_corr[dev_rows]]
    out = np.full(len(dev_rows), -1, dtype=np.int64)
    if len(rt) and len(dev):
        # one key per (rank, correlation) over both sides
        rank = index.rank
        both = np.concatenate([rt, dev])
        _, rank_code = np.unique(rank[both], return_inverse=True)
        _, corr_code = np.unique(corr[both], return_inverse=True)
        key = rank_code.reshape(-1) * (int(corr_code.max()) + 1) + corr_code.reshape(-1)
        rt_key, dev_key = key[: len(rt)], key[len(rt) :]
        order = np.argsort(rt_key, kind="stable")  # first runtime row of each key first
        sk = rt_key[order]
        first = np.ones(len(sk), dtype=bool)
        first[1:] = sk[1:] != sk[:-1]
        uk, ur = sk[first], rt[order][first]
        pos = np.minimum(np.searchsorted(uk, dev_key), len(uk) - 1)
        found = uk[pos] == dev_key
        out[np.flatnonzero(has_corr[dev_rows])] = np.where(found, index.ids[ur[pos]], -1)
    return pa.array(np.maximum(out, 0), pa.int64(), mask=out < 0)
