"""The kernel table: one row per device execution name (kernels, copies, sets, collectives,
Neuron executions), with calls, device time and the ops that launched it; after them, one row
per CUDA/HIP graph whose replays no capture attributed (:mod:`opscope.analysis.graph_replays`:
the replays as a unit, its kernels grouped by name within the replay)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from opscope.analysis.graph_replays import replay_units
from opscope.analysis.optable import select_window
from opscope.trace.args import decode_args
from opscope.trace.arrays import Codes, valid
from opscope.trace.groupby import grouped

if TYPE_CHECKING:
    from opscope.trace.model import Trace


@dataclass
class KernelRow:
    """One device kernel (execution) name: calls, device time, the ops that launched it."""

    name: str
    calls: int
    device_us: float
    mean_us: float
    min_us: float
    max_us: float
    ops: list[str]
    # a graph's replays as one unit (opscope.analysis.graph_replays); None for a kernel
    graph: dict[str, Any] | None = None
    replays: list[dict[str, Any]] | None = None
    kernels: list[dict[str, Any]] | None = None
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "calls": self.calls,
            "device_us": self.device_us,
            "mean_us": self.mean_us,
            "min_us": self.min_us,
            "max_us": self.max_us,
            "op": self.ops[0] if self.ops else None,
            "ops": self.ops,
        }
        if self.graph is not None:
            d["graph"] = self.graph
            d["replays"] = self.replays or []
            d["kernels"] = self.kernels or []
            d["hint"] = self.hint
        return d


def _neff_names(trace: Trace, k: pa.Table) -> list[str]:
    """On Neuron every execution is ``nc_exec_running``: name it by the NEFF it ran."""
    rows = pa.array(trace.index.rows_of(k.column("id")), pa.int64())
    out: list[str] = []
    for name, args in zip(
        k.column("name").cast(pa.string()).to_pylist(),
        trace.index.args_take(rows).to_pylist(),
        strict=True,
    ):
        model = decode_args(args).get("model_name")
        out.append(f"{name} [{model}]" if model else str(name))
    return out


def kernel_table(trace: Trace, steps: tuple[int, int] | None = None) -> list[KernelRow]:
    """The kernel rows by device time, then the graph replay units (see the module)."""
    rows = _kernel_rows(trace, steps)
    if trace.device.kind != "neuron":
        rows += [KernelRow(**unit) for unit in replay_units(trace, steps)]
    return rows


def _kernel_rows(trace: Trace, steps: tuple[int, int] | None) -> list[KernelRow]:
    k = select_window(trace.kernels, steps)
    kind = k.column("kind")
    # compared on the column's codes; a null kind is left out (as Arrow's not_equal has it)
    k = k.filter(pa.array(~Codes.of(kind).eq("annotation") & valid(kind)))
    if k.num_rows == 0:
        return []
    # the group-by reads dictionary keys as their text: no string column made per row
    names: pa.ChunkedArray = k.column("name")
    if trace.device.kind == "neuron":
        names = pa.chunked_array([_neff_names(trace, k)], pa.string())
    t = pa.table({"name": names, "dur_ns": k.column("dur_ns"), "op_name": k.column("op_name")})
    g = grouped(
        t,
        ["name"],
        [
            ("dur_ns", "count"),
            ("dur_ns", "sum"),
            ("dur_ns", "min"),
            ("dur_ns", "max"),
            ("op_name", "distinct"),
        ],
    )
    rows = [
        KernelRow(
            name=r["name"],
            calls=r["dur_ns_count"],
            device_us=r["dur_ns_sum"] / 1e3,
            mean_us=r["dur_ns_sum"] / r["dur_ns_count"] / 1e3,
            min_us=r["dur_ns_min"] / 1e3,
            max_us=r["dur_ns_max"] / 1e3,
            ops=sorted(o for o in r["op_name_distinct"] if o is not None),
        )
        for r in g
    ]
    rows.sort(key=lambda r: (-r.device_us, r.name))
    return rows
