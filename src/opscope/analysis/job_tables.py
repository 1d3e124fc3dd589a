"""A job's op, kernel and roofline tables from its ranks', folded one rank at a time.

:class:`TableFold` adds each rank's tables to running sums keyed by op (and op + shapes) or
kernel name and makes the job's tables at the end; :func:`opscope.analysis.job_report.merge`
folds its ranks so, and a coordinator that receives rank reports one by one folds them as they
arrive and keeps each rank's :meth:`~opscope.analysis.job.RankReport.lean` copy: its memory
then grows with the distinct ops and shapes, not with ranks x shapes.  Ranks are added in
rank order (as :func:`~opscope.analysis.job_report.merge` sorts them), so every float sum is
made in the same order whichever way the tables arrive.

How the figures combine (``docs/architecture.md``, "Per-rank units"): per name (and per name
+ shapes) calls, CPU and device times summed, the device share over the job's device time;
kernels' min/max over the ranks; the roofline's FLOPs, bytes and times summed per (op,
shapes), bounds placed again on the sums, its per-name rows made from the merged op table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from opscope.analysis.kernels import KernelRow
from opscope.analysis.optable import OpRow, OpTable
from opscope.analysis.roofline import Roofline, RooflineRow, classify, rows_by_name

if TYPE_CHECKING:
    from opscope.analysis.job import RankReport

_Key = tuple[str, str | None, str | None]


class JobTables(NamedTuple):
    """A job's merged tables: ops (per name and per shapes), kernels, roofline."""

    ops: OpTable
    kernels: list[KernelRow]
    roofline: Roofline | None


def _add_op_rows(merged: dict[_Key, OpRow], rows: list[OpRow]) -> None:
    for r in rows:
        key = (r.name, r.input_dims, r.input_types)
        m = merged.get(key)
        if m is None:
            merged[key] = replace(r)
            continue
        m.calls += r.calls
        m.cpu_self_us += r.cpu_self_us
        m.cpu_total_us += r.cpu_total_us
        m.device_self_us += r.device_self_us
        m.device_total_us += r.device_total_us
        m.device_calls += r.device_calls
        m.launching_calls += r.launching_calls
        if r.graph_replayed:
            _add_replayed(m, r)


def _add_replayed(m: OpRow, r: OpRow) -> None:
    """A rank's graph-replay marks (:mod:`opscope.analysis.graph_ops`) added to the job's."""
    mods: dict[Any, list[float]] = {}
    for entry in [*(m.modules or []), *(r.modules or [])]:
        acc = mods.setdefault(entry.get("module"), [0, 0.0])
        acc[0] += int(entry.get("calls", 0))
        acc[1] += float(entry.get("device_self_us", 0.0))
    m.graph_replayed = True
    m.replayed_calls += r.replayed_calls
    m.modules = [
        {"module": k, "calls": int(c), "device_self_us": us}
        for k, (c, us) in sorted(mods.items(), key=lambda kv: (-kv[1][1], str(kv[0])))
    ]
    m.call_stack = m.call_stack or r.call_stack


def _op_rows(merged: dict[_Key, OpRow], device_total_us: float) -> list[OpRow]:
    out = list(merged.values())
    for m in out:
        m.device_share = m.device_self_us / device_total_us if device_total_us else 0.0
    out.sort(key=lambda row: (-row.device_self_us, -row.cpu_total_us, row.name))
    return out


def _add_kernels(merged: dict[str, KernelRow], rows: list[KernelRow]) -> None:
    for k in rows:
        m = merged.get(k.name)
        if m is None:
            merged[k.name] = replace(k, ops=list(k.ops))
            continue
        m.calls += k.calls
        m.device_us += k.device_us
        m.min_us = min(m.min_us, k.min_us)
        m.max_us = max(m.max_us, k.max_us)
        m.ops = sorted(set(m.ops) | set(k.ops))


def _add_roofline_rows(merged: dict[_Key, RooflineRow], rows: list[RooflineRow]) -> None:
    for r in rows:
        key = (r.name, r.input_dims, r.input_types)
        m = merged.get(key)
        if m is None:
            merged[key] = replace(r)
            continue
        m.calls += r.calls
        m.device_self_us += r.device_self_us
        m.costed_calls += r.costed_calls
        m.costed_us += r.costed_us
        if r.flops is not None:
            m.flops = (m.flops or 0.0) + r.flops
            m.bytes = (m.bytes or 0.0) + (r.bytes or 0.0)
            m.formula = m.formula or r.formula
            m.dtype = m.dtype or r.dtype
            m.matrix = m.matrix or r.matrix
        for name in ("compute_us", "memory_us"):
            a, b = getattr(m, name), getattr(r, name)
            setattr(m, name, None if a is None and b is None else (a or 0.0) + (b or 0.0))


class TableFold:
    """A job's tables folded one rank at a time (:meth:`add`, in rank order), made by
    :meth:`tables`; the fold of no rank is the empty job's tables."""

    def __init__(self) -> None:
        self.ranks = 0
        self._device_us = 0.0
        self._host = True
        self._ops: dict[_Key, OpRow] = {}
        self._shapes: dict[_Key, OpRow] = {}
        self._kernels: dict[str, KernelRow] = {}
        self._roof: dict[_Key, RooflineRow] = {}
        self._first_roofline: Roofline | None = None
        self._notes: list[str] = []

    def add(self, rank: RankReport) -> None:
        """Add one rank's op and kernel tables and roofline (the rank is not kept)."""
        self.ranks += 1
        self._device_us += rank.ops.device_time_us
        self._host = self._host and rank.ops.device_is_host
        _add_op_rows(self._ops, rank.ops.rows)
        _add_op_rows(self._shapes, rank.ops.by_shape)
        _add_kernels(self._kernels, rank.kernels)
        rl = rank.roofline
        if rl:
            if self._first_roofline is None:
                self._first_roofline = rl
            _add_roofline_rows(self._roof, rl.op_shapes)
            self._notes += [n for n in rl.notes if n not in self._notes]

    def tables(self) -> JobTables:
        """The job's tables from the ranks added so far."""
        device_us = self._device_us
        ops = OpTable(
            rows=_op_rows(self._ops, device_us),
            device_is_host=self._host if self.ranks else False,
            device_time_us=device_us,
            by_shape=_op_rows(self._shapes, device_us),
        )
        kernels = list(self._kernels.values())
        for k in kernels:
            k.mean_us = k.device_us / k.calls if k.calls else 0.0
        kernels.sort(key=lambda r: (-r.device_us, r.name))
        return JobTables(ops, kernels, self._roofline(ops))

    def _roofline(self, table: OpTable) -> Roofline | None:
        first = self._first_roofline
        if first is None:
            return None
        factor = first.overhead_factor
        shapes = list(self._roof.values())
        for m in shapes:
            m.bound = classify(m.costed_us, m.compute_us, m.memory_us, factor)
        by_key = {(r.name, r.input_dims, r.input_types): r for r in shapes}
        ordered = [
            by_key[(r.name, r.input_dims, r.input_types)]
            for r in table.by_shape
            if (r.name, r.input_dims, r.input_types) in by_key
        ]
        return Roofline(
            device_kind=first.device_kind,
            device_name=first.device_name,
            peaks=first.peaks,
            ops=rows_by_name(table, ordered, factor),
            op_shapes=ordered,
            overhead_factor=factor,
            notes=list(self._notes),
        )


def fold(ranks: list[RankReport]) -> JobTables:
    """The job tables of ``ranks``, added in the order given."""
    acc = TableFold()
    for rank in ranks:
        acc.add(rank)
    return acc.tables()


__all__ = ["JobTables", "TableFold", "fold"]
