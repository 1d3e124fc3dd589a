"""Neuron engine level: which NeuronCore engine bounds each execution, as data.

Contract: :func:`neuron_engines` reads a Neuron trace's device tables (``trace.neuron``:
``ExecutionInfo``, ``Instruction``, ``ActiveTime``, ``DmaPacket``, ``Summary``, ``Metadata``)
and returns a :class:`NeuronEngineReport`, or None when the trace has no device profile.

* Per execution (one ``ExecutionInfo`` row, i.e. one NEFF run on a core) and per engine
  (Tensor, Vector, Scalar, GpSimd, Sync; spellings PE/DVE/ACT/POOL/SP and any case mapped):
  ``busy_ns`` = union of the engine's instructions inside the execution window *without* the
  setup/teardown opcodes the schema excludes from ``total_exec_time`` (``NOP``, semaphores,
  ``DRAIN``, ``WRITE``, ``TENSOR_LOAD``...), so it is the engine's compute; ``active_ns`` =
  the engine's ``ActiveTime`` inside the window (everything it did).  DMA: ``dma_ns`` = union
  of all DMA packets, ``dma_data_ns`` the same without instruction-fetch queues.
* ``dominant``: the engine (or ``dma``, data transfers only) with the most busy time.
  ``bound``: ``tensor``, ``vector``, ``scalar``, ``gpsimd`` or ``dma`` = the dominant one,
  except ``overhead`` when even the dominant one is busy less than :data:`OVERHEAD_SHARE` of the
  execution: the execution's fixed costs (instruction fetch, semaphores, setup) outweigh its
  work - batch more work into one execution (fuse, compile a larger graph).
* The execution's framework op: its ``nc_exec_running`` (same host start, via the device
  table's ``host_start_ns``) and that event's ``op_id``.
* ``summary``: Neuron Explorer's whole-profile figures (MFU, HFU, MBU, per-engine active %),
  as written (percentages 0-100).  ``peaks``: per-NeuronCore peaks of the instance family
  (NEURON.md section 7, from the Neuron architecture pages), for a roofline.

Nothing here reads the hardware; all numbers come from the profile.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.analysis.intervals import union_ns

if TYPE_CHECKING:
    from opscope.trace.model import Trace

OVERHEAD_SHARE = 0.25
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")
_ALIASES = {
    "tensor": "tensor",
    "tensormatrix": "tensor",
    "pe": "tensor",
    "vector": "vector",
    "dve": "vector",
    "scalar": "scalar",
    "act": "scalar",
    "activation": "scalar",
    "gpsimd": "gpsimd",
    "pool": "gpsimd",
    "sync": "sync",
    "sp": "sync",
}
# Opcodes the schema leaves out of total_exec_time (SCH): bookkeeping, not an engine's work.
SETUP_OPCODES = frozenset(
    (
        "NOP",
        "SET_ORDERING_MODE",
        "EVENT_SEMAPHORE",
        "EVENT_SEMAPHORE_RANGE_CLEAR",
        "NOTIFY",
        "COMPARE_BRANCH",
        "DRAIN",
        "WRITE",
        "TENSOR_LOAD",
        "MODIFY_POOL_CONFIG",
    )
)
_SUMMARY_FIELDS = (
    "total_time",
    "total_exec_time",
    "total_active_time_percent",
    "mfu_estimated_percent",
    "hfu_estimated_percent",
    "mbu_estimated_percent",
    "mm_arithmetic_intensity",
    "peak_flops_bandwidth_ratio",
    "tensor_engine_active_time_percent",
    "vector_engine_active_time_percent",
    "scalar_engine_active_time_percent",
    "gpsimd_engine_active_time_percent",
    "sync_engine_active_time_percent",
    "dma_active_time_percent",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "model_flops",
    "hardware_flops",
)


@dataclass(frozen=True)
class NeuronCorePeaks:
    """Peaks of one NeuronCore (physical core) of an instance family; FLOP/s and bytes/s."""

    family: str
    core: str
    tensor_bf16_flops: float
    tensor_fp8_flops: float
    tensor_fp32_flops: float
    vector_fp32_flops: float
    scalar_fp32_flops: float
    hbm_bandwidth: float
    dma_bandwidth: float
    clocks_ghz: dict[str, float]
    source: str = "AWS Neuron architecture pages (about-neuron/arch, nki/guides/architecture)"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Per physical core: chip figures of NEURON.md section 7 divided by the cores per chip.
PEAKS: dict[str, NeuronCorePeaks] = {
    "trn1": NeuronCorePeaks(
        "Trainium", "NeuronCore-v2", 92e12, 92e12, 23e12, 2.3e12, 2.9e12, 820e9 / 2, 1e12 / 2,
        {"tensor": 2.8, "vector": 1.12, "scalar": 1.4, "gpsimd": 1.4},
    ),
    "inf2": NeuronCorePeaks(
        "Inferentia2", "NeuronCore-v2", 92e12, 92e12, 23e12, 2.3e12, 2.9e12, 820e9 / 2, 1e12 / 2,
        {"tensor": 2.8, "vector": 1.12, "scalar": 1.4, "gpsimd": 1.4},
    ),
    "trn2": NeuronCorePeaks(
        "Trainium2", "NeuronCore-v3", 79e12, 158e12, 20e12, 1.0e12, 1.2e12, 2.9e12 / 8,
        3.5e12 / 8, {"tensor": 2.4, "vector": 0.96, "scalar": 1.2, "gpsimd": 1.2},
    ),
    "trn3": NeuronCorePeaks(
        "Trainium3", "NeuronCore-v4", 79e12, 315e12, 20e12, 1.2e12, 1.2e12, 4.9e12 / 8,
        4.9e12 / 8, {"tensor": 2.4, "vector": 1.2, "scalar": 1.2, "gpsimd": 1.2},
    ),
}  # fmt: skip


def peaks_for(instance_type: str | None) -> NeuronCorePeaks | None:
    """Per-core peaks for an instance type (``trn2.48xlarge`` -> Trainium2), else None."""
    if not instance_type:
        return None
    low = instance_type.lower()
    for prefix, p in PEAKS.items():
        if low.startswith(prefix):
            return p
    return None


def engine_key(name: str) -> str:
    """Canonical engine name (``PE`` -> ``tensor``, ``Pool`` -> ``gpsimd``); unknown kept."""
    return _ALIASES.get(name.strip().lower(), name.strip().lower())


@dataclass
class EngineTime:
    engine: str
    busy_ns: int  # union of non-setup instructions in the window
    active_ns: int  # ActiveTime in the window
    instructions: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExecutionEngines:
    index: int
    neff: str | None
    device_profile: str | None
    start_ns: int | None  # on the event table's clock, when aligned
    dur_ns: int
    engines: list[EngineTime]
    dma_ns: int
    dma_data_ns: int
    dominant: str
    bound: str
    op_id: int | None = None
    op_name: str | None = None

    def busy_share(self, engine: str) -> float:
        if self.dur_ns <= 0:
            return 0.0
        if engine == "dma":
            return self.dma_data_ns / self.dur_ns
        for e in self.engines:
            if e.engine == engine:
                return e.busy_ns / self.dur_ns
        return 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["busy_share"] = {e: self.busy_share(e) for e in (*ENGINES, "dma")}
        return d


@dataclass
class NeuronEngineReport:
    executions: list[ExecutionEngines]
    summary: dict[str, Any] = field(default_factory=dict)
    peaks: NeuronCorePeaks | None = None
    instance_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "executions": [e.to_dict() for e in self.executions],
            "summary": self.summary,
            "peaks": self.peaks.to_dict() if self.peaks else None,
            "instance_type": self.instance_type,
        }


def _ints(t: pa.Table, col: str) -> np.ndarray:
    return np.asarray(t.column(col).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _strs(t: pa.Table, col: str) -> np.ndarray:
    c = t.column(col)
    if pa.types.is_dictionary(c.type):
        c = c.cast(pa.string())
    return np.asarray(c.fill_null("").to_numpy(zero_copy_only=False), dtype=object)


def _in_profile(t: pa.Table | None, prof: str | None) -> pa.Table | None:
    if t is None or prof is None or "device_profile" not in t.column_names:
        return t
    return t.filter(pc.equal(t.column("device_profile"), prof))


def neuron_engines(trace: Trace) -> NeuronEngineReport | None:
    """The engine view of a Neuron trace (see the module docstring); None without tables."""
    nt = trace.neuron
    if nt is None:
        return None
    ei = nt.get("ExecutionInfo")
    if ei is None or ei.num_rows == 0:
        return None
    md = nt.get("Metadata")
    instance_type = None
    if md is not None and "instance_type" in md.column_names and md.num_rows:
        instance_type = md.column("instance_type")[0].as_py()
    hw_start: dict[int, tuple[int, str]] = {}
    idx = trace.index
    rows = np.flatnonzero(idx.name.eq("nc_exec_running"))
    ops = idx.op[rows]  # the row of each execution's op (op_id), -1 none
    for s, o in zip(idx.start[rows].tolist(), ops.tolist(), strict=True):
        if o >= 0:
            hw_start[int(s)] = (int(idx.ids[o]), idx.name[o])
    out: list[ExecutionEngines] = []
    for row in ei.to_pylist():
        s, e = row.get("execution_start_ts"), row.get("execution_end_ts")
        if s is None or e is None:
            continue
        prof = row.get("device_profile")
        out.append(
            _execution(nt.get("Instruction"), nt.get("ActiveTime"), nt.get("DmaPacket"), row, prof)
        )
        host = row.get("host_start_ns")
        if host is not None:
            out[-1].start_ns = int(host)
            if int(host) in hw_start:
                out[-1].op_id, out[-1].op_name = hw_start[int(host)]
    summary: dict[str, Any] = {}
    sm = nt.get("Summary")
    if sm is not None and sm.num_rows:
        first = sm.slice(0, 1).to_pylist()[0]
        summary = {k: first[k] for k in _SUMMARY_FIELDS if first.get(k) is not None}
    return NeuronEngineReport(
        executions=out, summary=summary, peaks=peaks_for(instance_type), instance_type=instance_type
    )


def _execution(
    instr: pa.Table | None,
    active: pa.Table | None,
    dma: pa.Table | None,
    row: dict[str, Any],
    prof: str | None,
) -> ExecutionEngines:
    s, e = int(row["execution_start_ts"]), int(row["execution_end_ts"])
    engines: dict[str, EngineTime] = {k: EngineTime(k, 0, 0, 0) for k in ENGINES}
    instr = _in_profile(instr, prof)
    if instr is not None and instr.num_rows:
        st, en = _ints(instr, "start_ts"), _ints(instr, "end_ts")
        inside = (st >= s) & (st < e)
        eng = np.asarray([engine_key(x) for x in _strs(instr, "engine")], dtype=object)
        work = ~np.isin(_strs(instr, "opcode"), sorted(SETUP_OPCODES))
        for k in np.unique(eng[inside]).tolist():
            m = inside & (eng == k)
            w = m & work
            et = engines.setdefault(k, EngineTime(k, 0, 0, 0))
            et.instructions = int(m.sum())
            et.busy_ns = union_ns(st[w], np.minimum(en[w], e))
    active = _in_profile(active, prof)
    if active is not None and active.num_rows:
        st, en = _ints(active, "start_ts"), _ints(active, "end_ts")
        eng = np.asarray([engine_key(x) for x in _strs(active, "engine")], dtype=object)
        lo, hi = np.maximum(st, s), np.minimum(en, e)
        ok = hi > lo
        for k in np.unique(eng[ok]).tolist():
            m = ok & (eng == k)
            engines.setdefault(k, EngineTime(k, 0, 0, 0)).active_ns = union_ns(lo[m], hi[m])
    dma_ns = dma_data_ns = 0
    dma = _in_profile(dma, prof)
    if dma is not None and dma.num_rows:
        st, en = _ints(dma, "start_ts"), _ints(dma, "end_ts")
        lo, hi = np.maximum(st, s), np.minimum(en, e)
        ok = hi > lo
        dma_ns = union_ns(lo[ok], hi[ok])
        if "queue_type" in dma.column_names:
            data = ok & (_strs(dma, "queue_type") != "instruction")
            dma_data_ns = union_ns(lo[data], hi[data])
        else:
            dma_data_ns = dma_ns
    dur = e - s
    busy = {k: v.busy_ns for k, v in engines.items() if k != "sync"}
    busy["dma"] = dma_data_ns
    dominant = max(busy.items(), key=lambda kv: (kv[1], kv[0]))[0]
    bound = "overhead" if dur <= 0 or busy[dominant] < OVERHEAD_SHARE * dur else dominant
    return ExecutionEngines(
        index=int(row.get("execution_index") or 0),
        neff=row.get("neff_name"),
        device_profile=prof,
        start_ns=None,
        dur_ns=dur,
        engines=[engines[k] for k in sorted(engines, key=lambda k: (k not in ENGINES, k))],
        dma_ns=dma_ns,
        dma_data_ns=dma_data_ns,
        dominant=dominant,
        bound=bound,
    )
