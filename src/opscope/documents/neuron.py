"""The Neuron engine view: which NeuronCore engine bounds each execution (the report's
``neuron`` section, on a Neuron trace with device profiles; see docs/neuron.md)."""

from opscope.documents._typing import TypedDict


class EngineTime(TypedDict):
    engine: str
    """``tensor``, ``vector``, ``scalar``, ``gpsimd`` or ``sync``."""
    busy_ns: int
    """Union of the engine's instructions in the execution, setup opcodes left out."""
    active_ns: int
    """The engine's ``ActiveTime`` in the execution (everything it did)."""
    instructions: int


class BusyShare(TypedDict):
    """Each engine's busy time over the execution's duration, 0..1."""

    tensor: float
    vector: float
    scalar: float
    gpsimd: float
    sync: float
    dma: float
    """Data transfers (instruction fetch left out)."""


class Execution(TypedDict):
    """One NEFF run on a core (an ``ExecutionInfo`` row)."""

    index: int
    neff: str | None
    device_profile: str | None
    start_ns: int | None
    """On the event table's clock, when aligned."""
    dur_ns: int
    engines: list[EngineTime]
    dma_ns: int
    """Union of all DMA packets."""
    dma_data_ns: int
    """The same without instruction-fetch queues."""
    dominant: str
    """The engine (or ``dma``) with the most busy time."""
    bound: str
    """The dominant engine, or ``overhead`` when even it is busy under a quarter of the
    execution."""
    op_id: int | None
    """The framework op that ran it."""
    op_name: str | None
    busy_share: BusyShare


class NeuronCorePeaks(TypedDict):
    """Peaks of one NeuronCore of the instance family; FLOP/s and bytes/s."""

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
    source: str


class NeuronSummary(TypedDict, total=False):
    """Neuron Explorer's whole-profile figures as written (percentages 0-100, times in
    seconds); only those the profile has."""

    total_time: float
    total_exec_time: float
    total_active_time_percent: float
    mfu_estimated_percent: float
    hfu_estimated_percent: float
    mbu_estimated_percent: float
    mm_arithmetic_intensity: float
    peak_flops_bandwidth_ratio: float
    tensor_engine_active_time_percent: float
    vector_engine_active_time_percent: float
    scalar_engine_active_time_percent: float
    gpsimd_engine_active_time_percent: float
    sync_engine_active_time_percent: float
    dma_active_time_percent: float
    hbm_read_bytes: int
    hbm_write_bytes: int
    model_flops: int
    hardware_flops: int


class NeuronEngines(TypedDict):
    executions: list[Execution]
    summary: NeuronSummary
    peaks: NeuronCorePeaks | None
    instance_type: str | None
    """E.g. ``trn2.48xlarge``."""


__all__ = [
    "BusyShare",
    "EngineTime",
    "Execution",
    "NeuronCorePeaks",
    "NeuronEngines",
    "NeuronSummary",
]
