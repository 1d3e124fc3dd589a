"""Linking the Neuron events: the launches of hardware executions and their ops.

* ``correlation``: the event's flow component (:mod:`.flows`), set before linking.
* ``launch_id`` of a hardware execution: the runtime execute call of its component
  (``nrta_execute_schedule``, ``nrt_execute``...), else matched on ``nrt_sequence_id``.
* ``op_id``: a runtime call's innermost enclosing framework op on its thread, else the op of
  its component's framework events; a hardware execution takes its launch's op, else its
  component's.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from opscope.trace.events import event_table
from opscope.trace.kineto.columns import FLOW_SCHEMA
from opscope.trace.link import link
from opscope.trace.neuron.columns import json_obj
from opscope.trace.neuron.schema import RT_EXECUTE
from opscope.trace.rows import as_int


def _seq_ids(args: list[str | None], rows: np.ndarray) -> dict[int, int | None]:
    out: dict[int, int | None] = {}
    for r in rows.tolist():
        a = args[r]
        if a and "nrt_sequence_id" in a:
            out[r] = as_int(json_obj(a).get("nrt_sequence_id"))
        else:
            out[r] = None
    return out


def link_neuron(table: pa.Table, comp: np.ndarray) -> tuple[pa.Table, dict[str, int]]:
    """Link the Neuron events (see the module docstring) and build the event table."""
    empty_flows = FLOW_SCHEMA.empty_table()
    links = link(table, empty_flows)
    names = np.asarray(table.column("name").to_pylist(), dtype=object)
    source = np.asarray(table.column("source").cast(pa.string()).to_pylist(), dtype=object)
    kind = np.asarray(table.column("kind").cast(pa.string()).to_pylist(), dtype=object)
    op, launch, step = links.op, links.launch, links.step
    stats = {"executions": 0, "launched": 0, "attributed": 0}

    # per component: its runtime execute call and the op its framework side belongs to
    comp_exec: dict[int, int] = {}
    comp_op: dict[int, int] = {}
    rank_of = {nm: i for i, nm in enumerate(RT_EXECUTE)}
    for r in np.flatnonzero(comp >= 0).tolist():
        c = int(comp[r])
        if source[r] == "runtime" and names[r] in rank_of:
            best = comp_exec.get(c)
            if best is None or rank_of[names[r]] < rank_of[names[best]]:
                comp_exec[c] = r
        if source[r] in ("framework", "runtime") and op[r] >= 0 and c not in comp_op:
            comp_op[c] = int(op[r])  # rows are in time order: the earliest one's op
    # runtime calls outside any op on their thread (driver events on a stream, runtime worker
    # threads): the op of their component
    for r in np.flatnonzero((source == "runtime") & (op < 0) & (comp >= 0)).tolist():
        op[r] = comp_op.get(int(comp[r]), -1)

    hw = np.flatnonzero((source == "device") & np.isin(kind, ("exec", "comm")))
    stats["executions"] = len(hw)
    args = table.column("args").to_pylist()
    # fallback without flows (env-var capture): the execute call with the same nrt_sequence_id
    seq_exec: dict[int, int] = {}
    rt_exec = np.flatnonzero((source == "runtime") & np.isin(names, RT_EXECUTE))
    for r, s in _seq_ids(args, rt_exec).items():
        if s is not None:
            seq_exec.setdefault(s, r)
    hw_seq = _seq_ids(args, hw)
    for r in hw.tolist():
        c = int(comp[r])
        lr = comp_exec.get(c, -1) if c >= 0 else -1
        if lr < 0 and hw_seq.get(r) is not None:
            lr = seq_exec.get(hw_seq[r] or 0, -1)
        if lr >= 0:
            launch[r] = lr
            stats["launched"] += 1
        o = int(op[lr]) if lr >= 0 and op[lr] >= 0 else comp_op.get(c, -1) if c >= 0 else -1
        if o >= 0:
            op[r] = o
            step[r] = step[o]
            stats["attributed"] += 1
    return event_table(table, links), stats
