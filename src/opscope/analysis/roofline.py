"""The device level: FLOPs, bytes, arithmetic intensity and roofline position of every op.

``roofline(report)`` costs each (op, input shapes) row of the report's op table with
:mod:`opscope.analysis.costs` and places it under the device's roofline
(:mod:`opscope.analysis.peaks`).  Time is the op's **device self time** (on a CPU-only trace the
CPU self time of the ops that computed, as in the op table), so a wrapper such as
``aten::linear`` has FLOPs but no bound of its own: its child ``aten::addmm`` is where the work
ran.

Classification of a row with device time ``t``, FLOPs ``F``, bytes ``B``, peak ``P`` (of its
dtype, matrix or vector) and bandwidth ``W``: the roofline time is ``max(F/P, B/W)``;
``overhead`` when ``t > OVERHEAD_FACTOR ×`` that (launch-, latency- or host-bound: the work
itself would take a tenth of the time or less), else ``compute`` when ``F/P >= B/W``, else
``memory``.  ``roofline_share`` is roofline time / ``t`` (= achieved / attainable FLOP/s).

Speed: the op table already aggregated per (name, shapes); here each distinct (name, shapes,
strides, concrete inputs) is costed once, the variants found with Arrow regexes over the args
text, never by decoding every event's JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import pyarrow as pa

from opscope.analysis.costs import Cost, normalize_name, op_cost
from opscope.analysis.optable import select_window
from opscope.analysis.peaks import DevicePeaks, device_peaks
from opscope.trace.arrays import Codes
from opscope.trace.groupby import group_columns

if TYPE_CHECKING:
    from pathlib import Path

    from opscope.analysis.optable import OpRow, OpTable
    from opscope.trace.model import Trace


class Analysed(Protocol):
    """What :func:`roofline` needs of a report (a :class:`~opscope.analysis.report.Report`):
    named structurally so that this module does not import the report built on it."""

    @property
    def trace(self) -> Trace | None: ...

    @property
    def ops(self) -> OpTable: ...

    @property
    def window_steps(self) -> tuple[int, int] | None: ...


# Device time more than this many times the roofline time is overhead, not work (a 10x gap is
# far outside the error of the cost model and of datasheet peaks, which are within ~2x).
OVERHEAD_FACTOR = 10.0
ROOFLINE_SCHEMA = "opscope.roofline/1"


def _per_call(
    flops: float | None, nbytes: float | None, calls: int
) -> tuple[float | None, float | None, float | None]:
    """(FLOPs per call, bytes per call, intensity) of a row's totals over its costed calls:
    :attr:`RooflineRow.flops_per_call`, ``bytes_per_call`` and ``intensity`` in one call, for
    the dicts of tables of thousands of rows."""
    return (
        flops / calls if flops is not None and calls else None,
        nbytes / calls if nbytes is not None and calls else None,
        None if flops is None or not nbytes else flops / nbytes,
    )


@dataclass
class RooflineRow:
    """One op name (``input_dims is None``) or one (op, shapes) row of the op table."""

    name: str
    input_dims: str | None
    input_types: str | None
    calls: int
    device_self_us: float
    flops: float | None  # over all calls in the window
    bytes: float | None
    formula: str | None = None
    dtype: str | None = None
    matrix: bool = False
    costed_calls: int = 0
    costed_us: float = 0.0  # device self time of the costed calls (the rates' denominator)
    compute_us: float | None = None  # F / peak over the costed calls
    memory_us: float | None = None  # B / bandwidth
    bound: str | None = None

    @property
    def flops_per_call(self) -> float | None:
        return _per_call(self.flops, self.bytes, self.costed_calls)[0]

    @property
    def bytes_per_call(self) -> float | None:
        return _per_call(self.flops, self.bytes, self.costed_calls)[1]

    @property
    def intensity(self) -> float | None:
        return _per_call(self.flops, self.bytes, self.costed_calls)[2]

    @property
    def roofline_us(self) -> float | None:
        if self.compute_us is None or self.memory_us is None:
            return None
        return max(self.compute_us, self.memory_us)

    @property
    def achieved_flops(self) -> float | None:
        """FLOP/s over the device self time."""
        if self.flops is None or self.costed_us <= 0:
            return None
        return self.flops / (self.costed_us * 1e-6)

    @property
    def achieved_bandwidth(self) -> float | None:
        """Bytes/s over the device self time."""
        if self.bytes is None or self.costed_us <= 0:
            return None
        return self.bytes / (self.costed_us * 1e-6)

    @property
    def roofline_share(self) -> float | None:
        """Roofline time / device time: 1.0 = on the roofline (achieved = attainable)."""
        rt = self.roofline_us
        if rt is None or self.costed_us <= 0:
            return None
        return rt / self.costed_us

    def to_dict(self) -> dict[str, Any]:
        # the properties' values, computed inline (one call per row of a table of thousands)
        flops, nbytes, n, us = self.flops, self.bytes, self.costed_calls, self.costed_us
        compute, memory = self.compute_us, self.memory_us
        roof = None if compute is None or memory is None else max(compute, memory)
        d: dict[str, Any] = {"name": self.name}
        if self.input_dims is not None or self.input_types is not None:
            d["input_dims"] = self.input_dims
            d["input_types"] = self.input_types
        d["calls"] = self.calls
        d["costed_calls"] = n
        d["device_self_us"] = self.device_self_us
        d["costed_us"] = us
        d["flops"] = flops
        d["bytes"] = nbytes
        d["flops_per_call"], d["bytes_per_call"], d["intensity"] = _per_call(flops, nbytes, n)
        d["achieved_flops"] = None if flops is None or us <= 0 else flops / (us * 1e-6)
        d["achieved_bandwidth"] = None if nbytes is None or us <= 0 else nbytes / (us * 1e-6)
        d["compute_us"] = compute
        d["memory_us"] = memory
        d["roofline_us"] = roof
        d["roofline_share"] = None if roof is None or us <= 0 else roof / us
        d["bound"] = self.bound
        d["dtype"] = self.dtype
        d["matrix"] = self.matrix
        d["formula"] = self.formula
        return d


@dataclass
class Roofline:
    """Rooflines of a report's ops: per name (``ops``) and per (op, shapes) (``op_shapes``)."""

    device_kind: str
    device_name: str
    peaks: DevicePeaks | None
    ops: list[RooflineRow]
    op_shapes: list[RooflineRow]
    overhead_factor: float = OVERHEAD_FACTOR
    notes: list[str] = field(default_factory=list)

    def row(self, name: str) -> RooflineRow | None:
        for r in self.ops:
            if r.name == name:
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        costed = [r for r in self.op_shapes if r.flops is not None]
        total_dev = sum(r.device_self_us for r in self.op_shapes)
        costed_dev = sum(r.costed_us for r in costed)
        return {
            "schema": ROOFLINE_SCHEMA,
            "device": {"kind": self.device_kind, "name": self.device_name},
            "peaks": self.peaks.to_dict() if self.peaks else None,
            "overhead_factor": self.overhead_factor,
            "totals": {
                "flops": sum(r.flops or 0.0 for r in costed),
                "bytes": sum(r.bytes or 0.0 for r in costed),
                "device_self_us": total_dev,
                "costed_device_self_us": costed_dev,
                "coverage": costed_dev / total_dev if total_dev > 0 else None,
            },
            "ops": [r.to_dict() for r in self.ops],
            "op_shapes": [r.to_dict() for r in self.op_shapes],
            "notes": list(self.notes),
        }


def classify(
    device_us: float,
    compute_us: float | None,
    memory_us: float | None,
    overhead_factor: float = OVERHEAD_FACTOR,
) -> str | None:
    """``compute``, ``memory`` or ``overhead`` for a row's times (None when unknown)."""
    if compute_us is None or memory_us is None or device_us <= 0:
        return None
    roof = max(compute_us, memory_us)
    if device_us > overhead_factor * roof:
        return "overhead"
    return "compute" if compute_us >= memory_us else "memory"


def _place(row: RooflineRow, cost: Cost | None, peaks: DevicePeaks | None, factor: float) -> None:
    """Fill a shape row's roofline times and bound from its per-call cost."""
    if cost is None or row.flops is None or row.bytes is None:
        return
    row.formula, row.dtype, row.matrix = cost.formula, cost.dtype, cost.matrix
    if peaks is None:
        return
    peak = peaks.peak_flops(cost.dtype, cost.matrix)
    if not peak or peaks.bandwidth <= 0:
        return
    row.compute_us = row.flops / peak * 1e6
    row.memory_us = row.bytes / peaks.bandwidth * 1e6
    row.bound = classify(row.costed_us, row.compute_us, row.memory_us, factor)


def _variants(
    trace: Trace, steps: tuple[int, int] | None, names: set[str]
) -> dict[tuple[str, str | None, str | None], list[tuple[str | None, str | None, int]]]:
    """Per (name, dims, types): the distinct (strides JSON, concrete JSON) and their counts."""
    ops = select_window(trace.ops, steps)
    if ops.num_rows == 0:
        return {}
    ops = ops.filter(pa.array(Codes.of(ops.column("name")).isin(names)))
    if ops.num_rows == 0:
        return {}
    rows = trace.index.rows_of(ops.column("id"))
    strides, concrete = trace.index.layouts
    t = pa.table(
        {
            "name": ops.column("name"),
            "input_dims": ops.column("input_dims"),
            "input_types": ops.column("input_types"),
            # codes, not text: faster to group, and a variant's order changes nothing
            "strides": strides.codes[rows],
            "concrete": concrete.codes[rows],
        }
    )
    g = group_columns(
        t, ["name", "input_dims", "input_types", "strides", "concrete"], [("name", "count")]
    )
    out: dict[tuple[str, str | None, str | None], list[tuple[str | None, str | None, int]]] = {}
    s_text, c_text = strides.values.tolist(), concrete.values.tolist()
    for name, dims, types, s, c, count in zip(
        g["name"],
        g["input_dims"],
        g["input_types"],
        g["strides"],
        g["concrete"],
        g["name_count"],
        strict=True,
    ):
        text_s = str(s_text[s]) if s >= 0 else None
        text_c = str(c_text[c]) if c >= 0 else None
        out.setdefault((name, dims, types), []).append((text_s, text_c, count))
    return out


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _shape_cost(
    row: OpRow,
    variants: list[tuple[str | None, str | None, int]],
    memo: dict[tuple[str, str | None, str | None, str | None, str | None], Cost | None],
) -> tuple[float, float, int, Cost | None]:
    """(FLOPs, bytes, costed calls, a representative cost) of a shape row over its calls.

    Variants (different strides or concrete inputs under the same shapes) are weighted by how
    often they occur; the op table's call count (after folding duplicate dispatcher nodes) is
    the total.
    """
    if row.input_dims is None or normalize_name(row.name) is None:
        return 0.0, 0.0, 0, None  # no shapes, or an op the cost model does not know
    dims, types = _loads(row.input_dims), _loads(row.input_types)
    if dims is None or types is None:
        return 0.0, 0.0, 0, None
    if not variants:
        variants = [(None, None, 1)]
    total = sum(n for _, _, n in variants)
    flops = nbytes = 0.0
    costed = 0
    rep: Cost | None = None
    for strides, concrete, n in variants:
        key = (row.name, row.input_dims, row.input_types, strides, concrete)
        if key not in memo:
            memo[key] = op_cost(row.name, dims, types, _loads(strides), _loads(concrete))
        cost = memo[key]
        if cost is None:
            continue
        flops += cost.flops * n
        nbytes += cost.bytes * n
        costed += n
        if rep is None or n > costed - n:
            rep = cost
    if costed == 0:
        return 0.0, 0.0, 0, None
    # scale the sampled mix to the op table's call count
    calls_costed = round(row.calls * costed / total)
    scale = calls_costed / costed if costed else 0.0
    return flops * scale, nbytes * scale, calls_costed, rep


def _neuron_share(peaks: DevicePeaks, trace: Trace) -> DevicePeaks:
    """An eager op runs on one logical NeuronCore: scale the chip's peaks to one."""
    cores = peaks.extra.get("neuron_cores")
    if not isinstance(cores, int) or cores <= 0:
        return peaks
    lnc = trace.meta.extra.get("neuron_lnc") or trace.meta.extra.get("lnc")
    if not isinstance(lnc, int) or lnc <= 0:
        lnc = 2 if cores >= 8 else 1  # Trn2/Trn3 default to LNC=2; Trn1/Inf2 have no LNC
    f = lnc / cores
    return DevicePeaks(
        key=f"{peaks.key}/lnc{lnc}",
        name=f"{peaks.name}, one logical NeuronCore (LNC={lnc})",
        flops={k: v * f for k, v in peaks.flops.items()},
        bandwidth=peaks.bandwidth * f,
        source=peaks.source,
        note=f"chip peaks x {lnc}/{cores}" + (f"; {peaks.note}" if peaks.note else ""),
        measured=peaks.measured,
        extra=dict(peaks.extra),
    )


def roofline_of(
    trace: Trace,
    table: OpTable,
    steps: tuple[int, int] | None = None,
    peaks: DevicePeaks | None = None,
    *,
    find_peaks: bool = True,
    overrides: str | Path | dict[str, Any] | None = None,
    overhead_factor: float = OVERHEAD_FACTOR,
) -> Roofline:
    """The roofline of an op table computed from ``trace`` over ``steps``.

    ``peaks``: the device's peaks; when None and ``find_peaks``, looked up from the trace's
    device (``device_peaks``; on a CPU-only trace the cached CPU measurement, measured once).
    Without peaks the rows still carry FLOPs, bytes, intensity and achieved rates, no bound.
    """
    dev = trace.device
    notes: list[str] = []
    if peaks is None and find_peaks:
        props = trace.meta.device_properties[0] if trace.meta.device_properties else None
        peaks = device_peaks(
            dev.kind, dev.name, props if isinstance(props, dict) else None, overrides
        )
        if peaks is not None and dev.kind == "neuron":
            peaks = _neuron_share(peaks, trace)
    if peaks is None:
        notes.append(
            f"no peaks known for device {dev.name!r}: no bound; give them in a peaks file "
            "(OPSCOPE_PEAKS)"
        )
    # only ops the cost model knows need their strides and concrete inputs read
    names = {
        r.name
        for r in table.by_shape
        if r.input_dims is not None and normalize_name(r.name) is not None
    }
    variants = _variants(trace, steps, names) if names else {}
    memo: dict[tuple[str, str | None, str | None, str | None, str | None], Cost | None] = {}
    shape_rows: list[RooflineRow] = []
    for r in table.by_shape:
        flops, nbytes, costed, rep = _shape_cost(
            r, variants.get((r.name, r.input_dims, r.input_types), []), memo
        )
        # the device time of the costed share of the calls
        dev_us = r.device_self_us * (costed / r.calls) if r.calls else 0.0
        row = RooflineRow(
            name=r.name,
            input_dims=r.input_dims,
            input_types=r.input_types,
            calls=r.calls,
            device_self_us=r.device_self_us,
            costed_us=dev_us,
            flops=flops if rep is not None else None,
            bytes=nbytes if rep is not None else None,
            costed_calls=costed,
        )
        _place(row, rep, peaks, overhead_factor)
        shape_rows.append(row)
    if peaks is not None and peaks.measured:
        notes.append(
            "CPU peaks were measured on this machine; they describe the recording machine only "
            "if the trace was recorded here"
        )
    over = [r for r in shape_rows if (r.roofline_share or 0.0) > 1.2]
    if over:
        worst = max(over, key=lambda r: r.roofline_share or 0.0)
        notes.append(
            f"{len(over)} op shapes run faster than the roofline allows (up to "
            f"{worst.roofline_share:.1f}x, {worst.name}): the peaks do not describe the device "
            "that ran them, or its device times are not execution times"
        )
    return Roofline(
        device_kind=dev.kind,
        device_name=peaks.name if peaks is not None and dev.kind == "cpu" else dev.name,
        peaks=peaks,
        ops=rows_by_name(table, shape_rows, overhead_factor),
        op_shapes=shape_rows,
        overhead_factor=overhead_factor,
        notes=notes,
    )


def rows_by_name(table: OpTable, shapes: list[RooflineRow], factor: float) -> list[RooflineRow]:
    """Per op name: sums over its costed shape rows; bound from the summed roofline times."""
    groups: dict[str, list[RooflineRow]] = {}
    for s in shapes:
        groups.setdefault(s.name, []).append(s)
    out: list[RooflineRow] = []
    for r in table.rows:
        costed = [s for s in groups.get(r.name, []) if s.flops is not None]
        row = RooflineRow(
            name=r.name,
            input_dims=None,
            input_types=None,
            calls=r.calls,
            device_self_us=r.device_self_us,
            costed_us=sum(s.costed_us for s in costed),
            flops=sum(s.flops or 0.0 for s in costed) if costed else None,
            bytes=sum(s.bytes or 0.0 for s in costed) if costed else None,
            costed_calls=sum(s.costed_calls for s in costed),
        )
        if costed:
            formulas = {s.formula for s in costed}
            dtypes = {s.dtype for s in costed}
            row.formula = formulas.pop() if len(formulas) == 1 else "mixed"
            row.dtype = dtypes.pop() if len(dtypes) == 1 else None
            row.matrix = any(s.matrix for s in costed)
            placed = [s for s in costed if s.compute_us is not None and s.memory_us is not None]
            if placed and len(placed) == len(costed):
                row.compute_us = sum(s.compute_us or 0.0 for s in placed)
                row.memory_us = sum(s.memory_us or 0.0 for s in placed)
                roof = sum(max(s.compute_us or 0.0, s.memory_us or 0.0) for s in placed)
                if row.costed_us > 0:
                    row.bound = (
                        "overhead"
                        if row.costed_us > factor * roof
                        else ("compute" if row.compute_us >= row.memory_us else "memory")
                    )
        out.append(row)
    return out


def roofline(
    report: Analysed,
    peaks: DevicePeaks | None = None,
    *,
    find_peaks: bool = True,
    overrides: str | Path | dict[str, Any] | None = None,
) -> Roofline:
    """The roofline of a :class:`~opscope.analysis.report.Report` (its trace, op table and
    window)."""
    if report.trace is None:
        raise ValueError("the roofline needs the report's trace (a merged job report has none)")
    return roofline_of(
        report.trace,
        report.ops,
        report.window_steps,
        peaks,
        find_peaks=find_peaks,
        overrides=overrides,
    )


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def annotate(report_dict: dict[str, Any], rl: Roofline) -> None:
    """Add the roofline to a ``Report.to_dict()`` result in place: ``ops[].flops``,
    ``ops[].bytes``, ``ops[].bound``; ``op_shapes[].flops_per_call``, ``bytes_per_call``,
    ``intensity``, ``bound``; ``device.peaks`` (``{}`` when unknown)."""
    by_name = {r.name: r for r in rl.ops}
    for op in report_dict.get("ops", []):
        r = by_name.get(op.get("name", ""))
        op["flops"] = _finite(r.flops) if r else None
        op["bytes"] = _finite(r.bytes) if r else None
        op["bound"] = r.bound if r else None
    # per shape row: (flops per call, bytes per call, intensity, bound), finite or None
    by_shape: dict[tuple[str, str | None, str | None], tuple[Any, ...]] = {}
    for r in rl.op_shapes:
        per_call = _per_call(r.flops, r.bytes, r.costed_calls)
        by_shape[(r.name, r.input_dims, r.input_types)] = (*map(_finite, per_call), r.bound)
    none = (None, None, None, None)
    for op in report_dict.get("op_shapes", []):
        got = by_shape.get((op.get("name", ""), op.get("input_dims"), op.get("input_types")), none)
        op["flops_per_call"], op["bytes_per_call"], op["intensity"], op["bound"] = got
    device = report_dict.setdefault("device", {})
    device["peaks"] = rl.peaks.to_dict() if rl.peaks else {}


__all__ = [
    "OVERHEAD_FACTOR",
    "Roofline",
    "RooflineRow",
    "annotate",
    "classify",
    "roofline",
    "roofline_of",
    "rows_by_name",
]
