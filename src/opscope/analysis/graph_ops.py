"""Op rows whose time came from CUDA/HIP graph replays.

When a capture trace attributed a graph's replays (:mod:`opscope.trace.graphs.merge`), each
captured op has a copy per replay in the event table; the op table counts those copies as the
op's calls.  :func:`mark_replayed` then marks each op row (per name, and per name + shapes)
that has such calls: ``graph_replayed``, ``replayed_calls`` (calls made by replays),
``modules`` (the ``nn.Module`` each ran in during capture: calls and device self time per
module, most time first; TraceLens's ``parent_module``) and ``call_stack`` (the capture-time
frames above the call with most device time, outermost first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from opscope.trace.arrays import ints

if TYPE_CHECKING:
    from opscope.trace.model import Trace


class OpRow(Protocol):
    """The fields of an op row (:class:`opscope.analysis.optable.OpRow`) this module reads and
    sets."""

    name: str
    input_dims: str | None
    input_types: str | None
    graph_replayed: bool
    replayed_calls: int
    modules: list[dict[str, Any]] | None
    call_stack: list[str] | None


def _key(name: Any, dims: Any = None, types: Any = None) -> tuple[Any, ...]:
    return (name, dims, types)


def mark_replayed(
    trace: Trace, ops: pa.Table, rows: Sequence[OpRow], by_shape: Sequence[OpRow]
) -> None:
    """Mark the rows of ``rows`` (per name) and ``by_shape`` (per name + shapes) that ``ops``
    (the window's per-event op table) shows ran in graph replays."""
    info = trace.graph_capture
    if info is None or not len(info.copy_rows) or ops.num_rows == 0:
        return
    event_rows = trace.index.rows_of(ops.column("id"))
    captured = info.op_of_rows(event_rows)
    hit = np.flatnonzero(captured >= 0)
    if not len(hit):
        return
    take = pa.array(hit)
    names = ops.column("name").take(take).cast(pa.string()).to_pylist()
    dims = ops.column("input_dims").take(take).cast(pa.string()).to_pylist()
    types = ops.column("input_types").take(take).cast(pa.string()).to_pylist()
    dev = ints(ops.column("device_self_ns").take(take), 0).tolist()
    per_name: dict[tuple[Any, ...], _Acc] = {}
    per_shape: dict[tuple[Any, ...], _Acc] = {}
    for i, op in enumerate(captured[hit].tolist()):
        cop = info.ops[op]
        for table, key in (
            (per_name, _key(names[i])),
            (per_shape, _key(names[i], dims[i], types[i])),
        ):
            acc = table.get(key)
            if acc is None:
                acc = table[key] = _Acc()
            acc.add(cop.module, cop.stack, int(dev[i]))
    for row in rows:
        _apply(row, per_name.get(_key(row.name)))
    for row in by_shape:
        _apply(row, per_shape.get(_key(row.name, row.input_dims, row.input_types)))


class _Acc:
    __slots__ = ("best", "best_ns", "calls", "modules")

    def __init__(self) -> None:
        self.calls = 0
        self.modules: dict[str | None, list[int]] = {}
        self.best: tuple[str, ...] = ()
        self.best_ns = -1

    def add(self, module: str | None, stack: tuple[str, ...], device_ns: int) -> None:
        self.calls += 1
        m = self.modules.setdefault(module, [0, 0])
        m[0] += 1
        m[1] += device_ns
        if device_ns > self.best_ns:
            self.best_ns, self.best = device_ns, stack


def _apply(row: OpRow, acc: _Acc | None) -> None:
    if acc is None:
        return
    row.graph_replayed = True
    row.replayed_calls = acc.calls
    mods = sorted(acc.modules.items(), key=lambda kv: (-kv[1][1], str(kv[0])))
    row.modules = [{"module": m, "calls": c, "device_self_us": ns / 1e3} for m, (c, ns) in mods]
    row.call_stack = list(acc.best)


__all__ = ["mark_replayed"]
