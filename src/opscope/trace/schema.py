"""The event table: one row per timed event, whatever produced the trace.

This module is the contract between the trace readers (Kineto JSON, Neuron outputs) and every
analysis.  Columns (see docs/architecture.md for the full description):

``id``           int64, unique in the table (the row's position at ingest)
``rank``         int32, from ``distributedInfo``, the file name, or 0
``source``       framework | runtime | device | other
``kind``         finer class: op, annotation, python, step, runtime, kernel, memcpy, memset,
                 comm, sync, exec (Neuron hardware execution), other
``cat``/``name`` as recorded
``pid``/``tid``  as recorded, as text (traces use integers and strings alike)
``lane``         the lane the event is drawn on: ``thread <tid>``, ``stream <n>``, ...
``start_ns``     int64 ns on one clock (Kineto ``baseTimeNanoseconds`` + ``ts``), full precision
``dur_ns``       int64 ns
``correlation``  runtime call <-> device event link (null when absent)
``external_id``  device event <-> framework op link (null when absent)
``parent_id``    enclosing event on the same thread (call nesting), null at top level
``op_id``        runtime/device events: the innermost framework event that issued them;
                 framework events: themselves
``step``         ProfilerStep index the event belongs to, or null
``args``         the event's ``args`` object as JSON text (shapes, dtypes, strides, collective
                 args), exactly as decoded; null when absent or empty
``launch_id``    device events: the runtime call that launched them (``correlation``, else an
                 ``ac2g`` flow); null otherwise.  Added in schema version 2.

Version 4: a device kernel is kind ``comm`` when :func:`opscope.trace.commnames.is_comm_kernel`
says so (the table of communication libraries' kernel names), no longer by substrings.
Version 5: runtime sync calls are kind ``sync`` whatever the case of their name
(``cudaDeviceSynchronize``), as :func:`classify` says; ingest missed the capitalised ones.

The schema carries a version: bump ``EVENT_SCHEMA_VERSION`` on any change so caches rebuild.
"""

from __future__ import annotations

import pyarrow as pa

from opscope.trace.commnames import is_comm_kernel

EVENT_SCHEMA_VERSION = 5

SOURCES = ("framework", "runtime", "device", "other")
KINDS = (
    "op",
    "annotation",
    "python",
    "step",
    "runtime",
    "kernel",
    "memcpy",
    "memset",
    "comm",
    "sync",
    "exec",
    "other",
)

EVENT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("source", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("kind", pa.dictionary(pa.int32(), pa.string()), nullable=False),
        pa.field("cat", pa.dictionary(pa.int32(), pa.string())),
        pa.field("name", pa.dictionary(pa.int32(), pa.string())),
        pa.field("pid", pa.dictionary(pa.int32(), pa.string())),
        pa.field("tid", pa.dictionary(pa.int32(), pa.string())),
        pa.field("lane", pa.dictionary(pa.int32(), pa.string())),
        pa.field("start_ns", pa.int64(), nullable=False),
        pa.field("dur_ns", pa.int64(), nullable=False),
        pa.field("correlation", pa.int64()),
        pa.field("external_id", pa.int64()),
        pa.field("parent_id", pa.int64()),
        pa.field("op_id", pa.int64()),
        pa.field("step", pa.int32()),
        pa.field("args", pa.string()),
        pa.field("launch_id", pa.int64()),
    ],
    metadata={"opscope.event_schema_version": str(EVENT_SCHEMA_VERSION)},
)

# Kineto category (lower-cased) -> (source, kind).  Older Kineto eras used capitalised names
# ("Operator", "Kernel", "Runtime"); the lookup is case-insensitive.
CATEGORY_MAP: dict[str, tuple[str, str]] = {
    "cpu_op": ("framework", "op"),
    "operator": ("framework", "op"),
    "user_annotation": ("framework", "annotation"),
    "python_function": ("framework", "python"),
    "python": ("framework", "python"),
    "cuda_runtime": ("runtime", "runtime"),
    "cuda_driver": ("runtime", "runtime"),
    "runtime": ("runtime", "runtime"),
    "driver": ("runtime", "runtime"),
    "xpu_runtime": ("runtime", "runtime"),
    "xpu_driver": ("runtime", "runtime"),
    "mtia_runtime": ("runtime", "runtime"),
    "mtia_driver": ("runtime", "runtime"),
    "privateuse1_runtime": ("runtime", "runtime"),
    "privateuse1_driver": ("runtime", "runtime"),
    "neuron_rt": ("runtime", "runtime"),
    "kernel": ("device", "kernel"),
    "mtia_ccp_events": ("device", "kernel"),
    "gpu_memcpy": ("device", "memcpy"),
    "memcpy": ("device", "memcpy"),
    "gpu_memset": ("device", "memset"),
    "memset": ("device", "memset"),
    "gpu_user_annotation": ("device", "annotation"),
    # CUDA event/stream waits drawn on a device stream (Kineto >= 2.1): device time, not work
    "cuda_sync": ("device", "sync"),
    # CUPTI range-profiler mode records each kernel as a range carrying its counters
    "cuda_profiler_range": ("device", "kernel"),
    "neuron_hw": ("device", "exec"),
    # IBM AIU traces (trace.formats.aiu names their events' categories)
    "aiu_compute": ("device", "kernel"),
    "aiu_rdma": ("device", "kernel"),
    "aiu_dma": ("device", "memcpy"),
    "aiu_prep": ("runtime", "runtime"),
}

# Device events that are work (an op's device time): kernels, copies, sets, collectives,
# Neuron executions.  Device annotations (spans over other work) and waits are not.
DEVICE_WORK_KINDS = ("kernel", "memcpy", "memset", "comm", "exec")

# Runtime calls that block the host until the device (or a stream/event) is done.
# (matched case-insensitively: cudaDeviceSynchronize, hipStreamSynchronize, neuron_synchronize)
SYNC_RUNTIME_MARKERS = (
    "synchronize",
    "streamwaitevent",
)


def classify(cat: str, name: str) -> tuple[str, str]:
    """Return ``(source, kind)`` for a Kineto category and event name."""
    source, kind = CATEGORY_MAP.get(cat.lower(), ("other", "other"))
    if source == "framework" and name.startswith("ProfilerStep#"):
        # user_annotation today; older Kineto eras recorded the step as an "Operator"
        return "framework", "step"
    if source == "device" and kind == "kernel":
        # collectives (opscope.trace.commnames): device work, classed as communication
        if is_comm_kernel(name):
            return "device", "comm"
    elif source == "runtime" and any(m in name.lower() for m in SYNC_RUNTIME_MARKERS):
        return "runtime", "sync"
    return source, kind
