"""``SystemProfileEvents`` -> raw event columns.

Mapping onto :data:`~opscope.trace.schema.EVENT_SCHEMA`:

* ``source``/``kind``: ``framework`` events keep their Kineto category (``cat`` in
  ``extra_attributes_json``, classified as for Kineto: ``cpu_op`` -> op, ``privateuse1_runtime``
  / ``privateuse1_driver`` -> runtime); ``neuron_rt`` -> runtime; ``neuron_hw``:
  ``nc_exec_running`` -> (device, exec), ``cc_running`` -> (device, comm), every other hardware
  marker (``timestamp_sync_point``, ``nrt_model_switch``, ``hw_notify``...) -> (device,
  annotation): drawn on the core's lane, never counted as device work.
* ``lane``: Neuron Explorer's default track labels (schema 2.31+):
  ``<instance>/PID:<pid>/framework/TID:<tid>``, ``<instance>/PID:<pid>/framework/Stream:<s>``
  (framework events with ``framework_stream_id``), ``<instance>/PID:<pid>/neuron_rt/NC:<nc>``,
  ``<instance>/PID:<pid>/neuron_hw/NC<nc>:<pcore>`` (the ``<a>:<b>`` meaning is not documented:
  we write logical core : physical core).  ``pid``/``tid`` stay the recorded ids, and nesting
  (``parent_id``) is per (pid, tid) as for Kineto, so a runtime call's parent may sit on the
  framework lane of its thread.
* ``external_id``: the Kineto ``External id`` of framework events.
* ``args``: the Kineto args of framework events (``extra_attributes_json`` without ``cat``),
  the runtime/hardware attributes otherwise, plus ``"neuron"``: the Neuron event id as text
  (ids exceed 2**53), ``flow_id``, ``nc_idx``, ``pcore_idx``, ``worker_gid``, ``instance_id``,
  ``framework_stream_id`` where set.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from opscope.trace.neuron.columns import Raw, dumps, json_obj
from opscope.trace.neuron.schema import HW_COMM, HW_EXEC, SCHEMA, SYSTEM_TABLE
from opscope.trace.rows import as_int
from opscope.trace.schema import classify


def hw_lane(instance: str, pid: str, nc: Any, pcore: Any) -> str:
    """Neuron Explorer's hardware track label (``<a>:<b>`` = logical : physical core)."""
    nc_s = "?" if nc is None else str(nc)
    pc_s = "?" if pcore is None else str(pcore)
    return f"{instance}/PID:{pid}/neuron_hw/NC{nc_s}:{pc_s}"


def system_rows(spe: pa.Table, raw: Raw, skipped: Counter[str]) -> None:
    cols = {c: spe.column(c).to_pylist() for c in spe.column_names if c in SCHEMA[SYSTEM_TABLE][1]}
    n = spe.num_rows

    def col(name: str) -> list[Any]:
        return cols.get(name) or [None] * n

    ids, names, starts, ends, durs = (
        col("id"),
        col("name"),
        col("start_ts"),
        col("end_ts"),
        col("duration_ns"),
    )
    srcs, inst, procs, threads = (
        col("trace_event_source"),
        col("instance_id"),
        col("process_id"),
        col("thread_id"),
    )
    ncs, pcores, workers, flows, streams, extras = (
        col("nc_idx"),
        col("pcore_idx"),
        col("worker_gid"),
        col("flow_id"),
        col("framework_stream_id"),
        col("extra_attributes_json"),
    )
    for i in range(n):
        start, end, dur = starts[i], ends[i], durs[i]
        if start is None or (dur is None and end is None):
            skipped["neuron event without start or duration"] += 1
            continue
        if dur is None:
            dur = end - start
        if dur < 0:
            skipped["negative duration"] += 1
            continue
        src = str(srcs[i] or "")
        name = str(names[i] or "")
        extra = json_obj(extras[i])
        pid = "" if procs[i] is None else str(procs[i])
        tid = "" if threads[i] is None else str(threads[i])
        instance = str(inst[i] or "")
        prefix = f"{instance}/PID:{pid}"
        stream = streams[i]
        if src == "framework":
            cat = str(extra.pop("cat", None) or "cpu_op")
            source, kind = classify(cat, name)
            if source == "other" and cat.lower() not in ("trace",):
                source, kind = "framework", "annotation"
            lane = (
                f"{prefix}/framework/Stream:{stream}"
                if stream is not None and cat.lower() == "privateuse1_driver"
                else f"{prefix}/framework/TID:{tid}"
            )
            args = extra
        elif src == "neuron_rt":
            cat, source, kind = "neuron_rt", "runtime", "runtime"
            lane = f"{prefix}/neuron_rt/NC:{ncs[i] if ncs[i] is not None else '?'}"
            args = extra
        elif src == "neuron_hw":
            cat, source = "neuron_hw", "device"
            kind = "exec" if name == HW_EXEC else "comm" if name in HW_COMM else "annotation"
            lane = hw_lane(instance, pid, ncs[i], pcores[i])
            args = extra
        else:
            skipped[f"unknown trace_event_source {src[:40]!r}"] += 1
            continue
        ne: dict[str, Any] = {"id": str(ids[i]), "instance_id": instance}
        for key, v in (
            ("nc_idx", ncs[i]),
            ("pcore_idx", pcores[i]),
            ("worker_gid", workers[i]),
            ("framework_stream_id", stream),
        ):
            if v is not None:
                ne[key] = v
        fl = [str(f) for f in (flows[i] or []) if f is not None]
        if fl:
            ne["flow_id"] = fl
        args = dict(args)
        args["neuron"] = ne
        raw.cat.append(cat)
        raw.name.append(name)
        raw.pid.append(pid)
        raw.tid.append(tid)
        raw.start.append(int(start))
        raw.dur.append(int(dur))
        raw.correlation.append(None)
        raw.external_id.append(as_int(extra.get("External id")) if src == "framework" else None)
        raw.args.append(dumps(args))
        raw.source.append(source)
        raw.kind.append(kind)
        raw.lane.append(lane)
        raw.flows.append(fl)
        raw.rank_key.append((instance, pid))
        raw.origin.append(src)
