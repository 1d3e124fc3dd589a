"""Derived per-event tables: ``ops`` (one row per framework op/annotation) and ``kernels`` (one row
per device execution), computed once from the event table.

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
import orjson
import pyarrow as pa
import pyarrow.compute as pc

_TREE_KINDS = ("op", "annotation", "step")
_DEVICE_WORK_KINDS = ("kernel", "memcpy", "memset", "comm", "exec")


def _np(col: pa.ChunkedArray | pa.Array, fill: int = -1) -> np.ndarray:
    arr = col.fill_null(fill) if col.null_count else col
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def _strings(col: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(col.cast(pa.string()).to_numpy(zero_copy_only=False), dtype=object)


def _shape_fields(args: list[str | None]) -> tuple[list[str | None], list[str | None]]:
    dims: list[str | None] = []
    types: list[str | None] = []
    for a in args:
        if not a or '"Input Dims"' not in a:
            dims.append(None)
            types.append(None)
            continue
        try:
            d = orjson.loads(a)
        except orjson.JSONDecodeError:
            dims.append(None)
            types.append(None)
            continue
        dv = d.get("Input Dims")
        tv = d.get("Input type")
        dims.append(orjson.dumps(dv).decode() if dv is not None else None)
        types.append(orjson.dumps(tv).decode() if tv is not None else None)
    return dims, types


def op_tree_parent(events: pa.Table) -> np.ndarray:
    """For every row, the row index of its parent in the op tree (-1 at top level)."""
    n = events.num_rows
    ids = _np(events.column("id"))
    base = int(ids[0]) if n else 0
    if n and not np.array_equal(ids, np.arange(base, base + n)):
        raise ValueError("event ids must be contiguous row positions")
    parent = _np(events.column("parent_id")) - base
    parent[parent < -1] = -1
    kind = _strings(events.column("kind"))
    is_python = kind == "python"
    # climb over Python frames
    cur = parent.copy()
    for _ in range(10_000):
        climb = (cur >= 0) & is_python[np.maximum(cur, 0)]
        if not climb.any():
            break
        cur[climb] = parent[cur[climb]]
    out: np.ndarray = cur
    return out


def build_ops(events: pa.Table) -> pa.Table:
    """One row per framework op/annotation/step event with self and device times."""
    n = events.num_rows
    if n == 0:
        return _empty_ops()
    base = int(events.column("id")[0].as_py())
    kind = _strings(events.column("kind"))
    source = _strings(events.column("source"))
    dur = _np(events.column("dur_ns"), 0)
    tparent = op_tree_parent(events)
    in_tree = np.isin(kind, _TREE_KINDS) & (source == "framework")
    host_child = (source == "runtime") | in_tree
    # children durations -> self time
    has_parent = host_child & (tparent >= 0)
    child_sum = np.bincount(tparent[has_parent], weights=dur[has_parent], minlength=n).astype(
        np.int64
    )
    tree_child_count = np.bincount(tparent[in_tree & (tparent >= 0)], minlength=n)
    self_ns = dur - child_sum

    # device time: launches attributed to their op, then summed up the op tree
    op_id = _np(events.column("op_id")) - base
    work = (source == "device") & np.isin(kind, _DEVICE_WORK_KINDS) & (op_id >= 0)
    dev_self = np.bincount(op_id[work], weights=dur[work], minlength=n).astype(np.int64)
    dev_self_count = np.bincount(op_id[work], minlength=n).astype(np.int64)
    depth = np.zeros(n, dtype=np.int64)
    cur = tparent.copy()
    for _ in range(10_000):
        live = cur >= 0
        if not live.any():
            break
        depth[live] += 1
        cur[live] = tparent[cur[live]]
    dev_total = dev_self.copy()
    dev_total_count = dev_self_count.copy()
    order = np.argsort(-depth, kind="stable")
    order = order[in_tree[order] & (tparent[order] >= 0)]
    # deepest first: each event passes its accumulated total to its parent
    for d in np.unique(depth[order])[::-1]:
        rows = order[depth[order] == d]
        np.add.at(dev_total, tparent[rows], dev_total[rows])
        np.add.at(dev_total_count, tparent[rows], dev_total_count[rows])

    rows = np.nonzero(in_tree)[0]
    args = events.column("args").take(pa.array(rows)).to_pylist()
    dims, types = _shape_fields(args)
    take = pa.array(rows)
    return pa.table(
        {
            "id": events.column("id").take(take),
            "rank": events.column("rank").take(take),
            "name": events.column("name").take(take),
            "kind": events.column("kind").take(take),
            "pid": events.column("pid").take(take),
            "tid": events.column("tid").take(take),
            "start_ns": events.column("start_ns").take(take),
            "dur_ns": events.column("dur_ns").take(take),
            "self_ns": pa.array(self_ns[rows], pa.int64()),
            "parent_op": pa.array(
                np.where(tparent[rows] >= 0, tparent[rows] + base, 0),
                pa.int64(),
                mask=tparent[rows] < 0,
            ),
            "depth": pa.array(depth[rows], pa.int32()),
            "is_leaf": pa.array(tree_child_count[rows] == 0),
            "device_self_ns": pa.array(dev_self[rows], pa.int64()),
            "device_total_ns": pa.array(dev_total[rows], pa.int64()),
            "device_self_count": pa.array(dev_self_count[rows], pa.int64()),
            "device_total_count": pa.array(dev_total_count[rows], pa.int64()),
            "step": events.column("step").take(take),
            "input_dims": pa.array(dims, pa.string()),
            "input_types": pa.array(types, pa.string()),
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
            ("input_dims", pa.string()),
            ("input_types", pa.string()),
        ]
    )


def build_kernels(events: pa.Table) -> pa.Table:
    """One row per device execution, with the op and the runtime call that launched it."""
    n = events.num_rows
    source = _strings(events.column("source")) if n else np.array([], dtype=object)
    dev_rows = np.nonzero(source == "device")[0]
    take = pa.array(dev_rows, pa.int64())
    base = int(events.column("id")[0].as_py()) if n else 0
    op_id = _np(events.column("op_id")) - base if n else np.array([], dtype=np.int64)
    names = events.column("name").cast(pa.string())
    dev_op = op_id[dev_rows]
    op_name = (
        names.take(pa.array(np.maximum(dev_op, 0))) if len(dev_rows) else pa.array([], pa.string())
    )
    op_name = pc.if_else(pa.array(dev_op >= 0), op_name, pa.scalar(None, pa.string()))

    rank = events.column("rank")
    if "launch_id" in events.column_names:
        # linked at ingest (correlation, else ac2g flows: graph launches included)
        launch_arr = events.column("launch_id").take(take)
    else:
        # launching runtime call: same rank and correlation
        corr = events.column("correlation")
        launch_of: dict[tuple[int, int], int] = {}
        if n:
            rt = np.nonzero(source == "runtime")[0]
            rt_corr = corr.take(pa.array(rt, pa.int64())).to_pylist()
            rt_rank = rank.take(pa.array(rt, pa.int64())).to_pylist()
            for r, c, k in zip(rt.tolist(), rt_corr, rt_rank, strict=True):
                if c is not None:
                    launch_of.setdefault((k, c), r)
        dev_corr = corr.take(take).to_pylist()
        dev_rank = rank.take(take).to_pylist()
        launch = [
            launch_of.get((k, c)) if c is not None else None
            for c, k in zip(dev_corr, dev_rank, strict=True)
        ]
        launch_arr = pa.array([None if x is None else x + base for x in launch], pa.int64())
    return pa.table(
        {
            "id": events.column("id").take(take),
            "rank": rank.take(take),
            "name": events.column("name").take(take),
            "kind": events.column("kind").take(take),
            "pid": events.column("pid").take(take),
            "lane": events.column("lane").take(take),
            "start_ns": events.column("start_ns").take(take),
            "dur_ns": events.column("dur_ns").take(take),
            "op_id": events.column("op_id").take(take),
            "op_name": op_name,
            "launch_id": launch_arr,
            "step": events.column("step").take(take),
        }
    )
