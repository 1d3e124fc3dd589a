"""AWS Neuron (Trainium / Inferentia) profiles -> the event table, plus the Neuron tables.

Inputs (``docs/neuron.md`` has the user's view; ``../shared/NEURON.md`` the sources):

* **Neuron Explorer Parquet** (``neuron-explorer view``, profile schema 7.4.0): a folder per
  processed profile, one ``<Table>.parquet`` per table or ``<Table>_0.parquet``,
  ``<Table>_1.parquet``... for big ones.  A *system profile* folder holds
  ``SystemProfileEvents`` (framework, ``neuron_rt`` and ``neuron_hw`` events on the CPU clock)
  and ``SystemProfileMetadata``; a *device profile* folder holds ``Metadata``, ``Instruction``,
  ``ActiveTime``, ``Summary``, ``ExecutionInfo``, ``Warning``... on the device's clock.
* **A raw capture folder** (``<instance>_pid_<pid>/<timestamp>/``: ``trace.json``,
  ``ntrace.pb``, ``trace_info.pb``, ``*.neff``, ``*.ntff``): NEFF and NTFF files are paired by
  their numeric id; ``trace.json`` (the Kineto framework trace) is read; when
  ``neuron-explorer`` is on PATH its ``view`` is run (with a timeout) to produce the Parquet
  tables, else a warning gives the exact command.
* **Legacy JSON** (``--output-format json``): ``system_profile.json`` (events) and
  ``device_profile_model_<id>.json`` (old device summary and instructions, kept as tables).
* A folder holding any of these (``explorer/``, ``capture/``), or a run folder with ``neuron/``.

Mapping of ``SystemProfileEvents`` onto :data:`~opscope.trace.schema.EVENT_SCHEMA`:

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
* ``correlation``: the connected component of the ``flow_id`` graph (events sharing a flow id
  are linked; the chain framework op -> dispatch -> driver event -> ``nrta_execute_schedule`` ->
  ``nc_exec_running`` may use one id per hop), as the smallest flow id of the component.
* ``launch_id`` of a hardware execution: the runtime execute call of its component
  (``nrta_execute_schedule``, ``nrt_execute``...), else matched on ``nrt_sequence_id``.
* ``op_id``: a runtime call's innermost enclosing framework op on its thread, else the op of
  its component's framework events; a hardware execution takes its launch's op, else its
  component's.  ``external_id``: the Kineto ``External id`` of framework events.
* ``args``: the Kineto args of framework events (``extra_attributes_json`` without ``cat``),
  the runtime/hardware attributes otherwise, plus ``"neuron"``: the Neuron event id as text
  (ids exceed 2**53), ``flow_id``, ``nc_idx``, ``pcore_idx``, ``worker_gid``, ``instance_id``,
  ``framework_stream_id`` where set.
* ``rank``: the order of the (instance, process) pairs, unless the framework trace of the
  process names its rank (``distributedInfo``).

Clocks: the system profile's CPU clock (Unix ns) is the reference; Neuron already moved hardware
timestamps onto it.  A framework ``trace.json`` is matched to the system profile's framework
events (same name, thread and duration) and shifted by the most common start difference; its
events already in the system profile are dropped (no double counting), the others added.
Device tables get ``host_start_ns`` by matching ``ExecutionInfo`` windows to
``nc_exec_running``.  Offsets are in ``TraceMeta.alignment``.

Bad input: a table without a column the schema requires -> :class:`~opscope.errors.TraceError`
naming the table and the columns; columns the schema does not know are ignored by the mapping
(kept in the SQL tables) and listed in ``TraceMeta.warnings``.  Warnings about the profile
itself start with :data:`WARNING_PREFIX`; structured problems (Neuron's ``Warning`` table,
unpaired NEFF/NTFF files, protobuf-only captures) are in ``TraceMeta.extra["neuron"]`` for the
profile-quality rule.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from opscope.errors import TraceError
from opscope.trace.events import event_table
from opscope.trace.kineto import file as kineto_file
from opscope.trace.kineto.columns import FLOW_SCHEMA, KinetoParse
from opscope.trace.link import link
from opscope.trace.model import NeuronTables, Trace, TraceMeta
from opscope.trace.rows import as_int
from opscope.trace.schema import EVENT_SCHEMA, KINDS, SOURCES, classify

SCHEMA_VERSION = "7.4.0"
WARNING_PREFIX = "neuron: "
EXPLORER_ENV = "OPSCOPE_NEURON_EXPLORER"  # path of the neuron-explorer binary (default: PATH)
EXPLORER_TIMEOUT_S = 600.0

# Columns of the 7.4.0 schema for the tables opscope reads (``*`` = required).  Source:
# aws-neuron-sdk tools/neuron-explorer/profile-schema-reference.rst.
_SCHEMA_TEXT: dict[str, str] = {
    "SystemProfileEvents": """id* name* start_ts* end_ts* duration_ns* trace_event_source*
        instance_id* process_id* thread_id* nc_idx pcore_idx worker_gid flow_id
        framework_stream_id extra_attributes_json""",
    "SystemProfileMetadata": """first_ts* last_ts* first_ts_ns* last_ts_ns* ntff_version*
        hbm_capacity_bytes*""",
    "DeviceProfileList": "device_profile_name* instance_id* process_id* nc_id* session_id model_id",
    "Metadata": """profile_schema_version* ntff_version* num_physical_cores* vnc_enabled*
        first_hw_timestamp* last_hw_timestamp* first_ts* last_ts* dma_ddr_bandwidth*
        num_dma_engines_per_neuroncore* hbm_ddr_bandwidth* tensor_engine_num_rows*
        tensor_engine_num_cols* tensor_engine_clock_freq* vector_engine_clock_freq*
        vector_engine_num_channels* scalar_engine_clock_freq* scalar_engine_num_channels*
        gpsimd_engine_clock_freq* gpsimd_engine_num_channels* neuroncore_clock_freq*
        ticks_per_nanosec* instance_type runtime_version collectives_version driver_version
        explorer_version compiler_version neuroncore_idx neuron_device_idx ultraserver_id
        ultraserver_type ultraserver_size ultraserver_instance_index s3_bucket_path
        profile_name explorer_build_time is_simulation""",
    "ExecutionInfo": """execution_index* neff_name execution_start_ts execution_end_ts
        num_subgraphs row_count""",
    "ActiveTime": "start_ts* end_ts* engine* pcore_idx* duration_ns*",
    "Warning": "message* category*",
    "Instruction": """start_ts* end_ts* duration_ns* engine* timeline_track pcore_idx opcode*
        operands* compiler_opcode compiler_operands id* pc* compiler_pc penguin_id raw_penguin_id
        bir_id* raw_bir_id bir_instruction_name kernel_instruction_name crc_in crc_out
        evt_wait_time_ns hlo_attrs hlo_name raw_hlo_id raw_framework_id layer stack_frame_ids
        nki_source_location bir_debug_info_source_location dma_trigger_start_ts
        dma_trigger_end_ts dma_wait_time_ns instruction_chain hbm_read_bytes hbm_write_bytes
        sbuf_read_bytes sbuf_write_bytes spill_save_bytes spill_reload_bytes psum_read_bytes
        psum_write_bytes psum_read_sbuf_write_bytes input_queue_bytes output_queue_bytes
        weight_queue_bytes performance_mode tensor_instruction_type tensor_elements raw_flops
        adjusted_flops tensor_elements_transpose flops_transpose adjusted_flops_transpose
        scalar_activation_fn""",
    "DmaPacket": """start_ts* end_ts* duration_ns* pcore_idx id* packet_idx*
        packet_aggregation_id* engine_idx read_bytes* write_bytes* transfer_bytes* throughput*
        queue_type* variable queue_name queue_idx crc*""",
    "OpcodeSummary": """engine* opcode* instruction_count* instruction_time_ns* active_time_ns*
        active_time_percent*""",
    "NeffHeader": """network_name uuid hash enabled_features header_size data_size major_version
        minor_version package_version build_version cc_participant_count neuroncore_count
        logical_neuroncore_count pcore_count_per_lnc""",
}


def _parse_schema(text: str) -> tuple[frozenset[str], frozenset[str]]:
    names = text.split()
    required = frozenset(n.rstrip("*") for n in names if n.endswith("*"))
    return required, frozenset(n.rstrip("*") for n in names)


SCHEMA: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    t: _parse_schema(x) for t, x in _SCHEMA_TEXT.items()
}
# Tables recognising a folder as a device profile.
DEVICE_TABLES = ("Metadata", "Instruction", "ActiveTime", "Summary", "ExecutionInfo")
SYSTEM_TABLE = "SystemProfileEvents"

# Hardware event names (NEURON.md section 5).
HW_EXEC = "nc_exec_running"
HW_COMM = ("cc_running",)
# Runtime execute calls, most specific first: the launch of a hardware execution.
RT_EXECUTE = ("nrta_execute_schedule", "nrt_execute", "runtime_execute", "device_exec")

_TABLE_FILE = re.compile(r"^([A-Za-z][A-Za-z0-9]*?)(?:_(\d+))?\.parquet$")
_NEFF = re.compile(r"^neff_(\d+)(?:_vnc_\d+)?\.neff$")
_NTFF_MODEL = re.compile(r"^(\d+)_instid_\d+_vnc_\d+\.ntff$")
_PID_FOLDER = re.compile(r"^(?P<instance>.+)_pid_(?P<pid>\d+)$")
_RAW_MARKERS = ("ntrace.pb", "trace_info.pb")
_LEGACY_SYSTEM = "system_profile.json"
_LEGACY_DEVICE = re.compile(r"^device_profile_model_(\d+)\.json$")
_FRAMEWORK_TRACES = re.compile(r"^(trace\.json(\.gz)?|neuron_framework_trace_rank_\d+\.json)$")
_MAX_DEPTH = 6


# -- finding the pieces ------------------------------------------------------------------------


@dataclass
class Layout:
    """What a path holds: Parquet profile folders, raw capture folders, framework traces."""

    system: list[Path] = field(default_factory=list)  # folders with SystemProfileEvents
    device: list[Path] = field(default_factory=list)  # folders with device tables
    captures: list[Path] = field(default_factory=list)  # folders with .neff/.ntff/.pb files
    framework: list[Path] = field(default_factory=list)  # Kineto trace.json files
    legacy_system: list[Path] = field(default_factory=list)
    legacy_device: list[Path] = field(default_factory=list)

    @property
    def has_profile(self) -> bool:
        return bool(self.system or self.legacy_system)

    @property
    def empty(self) -> bool:
        return not (
            self.system
            or self.device
            or self.captures
            or self.framework
            or self.legacy_system
            or self.legacy_device
        )


def _table_names(folder: Path) -> set[str]:
    out = set()
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            m = _TABLE_FILE.match(p.name)
            if m and p.is_file():
                out.add(m.group(1))
    return out


def _walk(root: Path) -> list[Path]:
    """Folders under root (itself included), breadth first, at most _MAX_DEPTH deep."""
    out: list[Path] = []
    level = [root]
    for _ in range(_MAX_DEPTH):
        nxt: list[Path] = []
        for d in level:
            out.append(d)
            with contextlib.suppress(OSError):
                nxt.extend(sorted(p for p in d.iterdir() if p.is_dir() and not p.is_symlink()))
        level = nxt
        if not level:
            break
    return out


def find_layout(path: Path) -> Layout:
    """Scan ``path`` (a file or folder) for the Neuron pieces it holds."""
    lay = Layout()
    if path.is_file():
        if _TABLE_FILE.match(path.name):
            path = path.parent
        elif path.name == _LEGACY_SYSTEM:
            lay.legacy_system.append(path)
            return lay
        else:
            return lay
    for d in _walk(path):
        names = _table_names(d)
        if SYSTEM_TABLE in names:
            lay.system.append(d)
        if names & set(DEVICE_TABLES):
            lay.device.append(d)
        try:
            files = sorted(p for p in d.iterdir() if p.is_file())
        except OSError:
            continue
        fnames = {p.name for p in files}
        if any(n.endswith((".neff", ".ntff")) for n in fnames) or fnames & set(_RAW_MARKERS):
            lay.captures.append(d)
        for p in files:
            if _FRAMEWORK_TRACES.match(p.name):
                lay.framework.append(p)
            elif p.name == _LEGACY_SYSTEM:
                lay.legacy_system.append(p)
            elif _LEGACY_DEVICE.match(p.name):
                lay.legacy_device.append(p)
    if (path / "run.json").is_file():
        # a run folder: its own trace.json.gz is the framework trace; the capture's copy in
        # neuron/<instance>_pid_<pid>/<timestamp>/ is the same file
        top = [p for p in (path / "trace.json.gz", path / "trace.json") if p.is_file()]
        if top:
            lay.framework = top[:1]
    return lay


def is_neuron_path(path: Path) -> bool:
    """Whether :func:`opscope.trace.load` should read ``path`` as a Neuron profile.

    A Kineto file or a folder of Kineto traces is not; a folder is when it (or a folder under
    it, a few levels deep) holds Neuron Explorer Parquet tables, NEFF/NTFF/``ntrace.pb`` files
    or legacy ``system_profile.json``.  A run folder is when its ``neuron/`` folder holds any.
    """
    if not path.exists():
        return False
    if path.is_file():
        return bool(_TABLE_FILE.match(path.name)) or path.name == _LEGACY_SYSTEM
    if (path / "run.json").is_file():
        sub = path / "neuron"
        if not sub.is_dir():
            return False
        lay = find_layout(sub)
        return bool(lay.system or lay.device or lay.captures or lay.legacy_system)
    lay = find_layout(path)
    return bool(lay.system or lay.device or lay.captures or lay.legacy_system)


# -- reading tables ----------------------------------------------------------------------------


def table_files(folder: Path, table: str) -> list[Path]:
    """``<table>.parquet`` and ``<table>_<n>.parquet`` in ``folder``, in numeric order."""
    found: list[tuple[int, Path]] = []
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            m = _TABLE_FILE.match(p.name)
            if m and m.group(1) == table and p.is_file():
                found.append((int(m.group(2)) if m.group(2) else -1, p))
    return [p for _, p in sorted(found)]


def _to_float64(t: pa.Table) -> pa.Table:
    """``number (float)`` columns are stored as 32-bit floats: widen them (exact)."""
    for i, f in enumerate(t.schema):
        if pa.types.is_float32(f.type) or pa.types.is_float16(f.type):
            t = t.set_column(i, f.name, t.column(i).cast(pa.float64()))
    return t


def read_table(folder: Path, table: str, warnings: list[str]) -> pa.Table | None:
    """One Neuron table of a profile folder (parts stacked), or None when absent.

    Known tables are checked against schema 7.4.0: missing required columns raise
    :class:`TraceError`; unknown columns are appended to ``warnings`` (and kept).
    """
    files = table_files(folder, table)
    if not files:
        return None
    parts = []
    for f in files:
        try:
            parts.append(pq.read_table(f))
        except (OSError, pa.ArrowException) as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise TraceError(f"{f}: not a readable Parquet file ({msg})") from None
    try:
        t = parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="default")
    except pa.ArrowException as exc:
        raise TraceError(f"{folder / table}: parts do not stack ({exc})") from None
    t = _to_float64(t)
    if table in SCHEMA:
        required, known = SCHEMA[table]
        missing = sorted(required - set(t.column_names))
        if missing:
            raise TraceError(
                f"{folder}/{table}: missing required column{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} (Neuron profile schema {SCHEMA_VERSION})"
            )
        unknown = [c for c in t.column_names if c not in known]
        if unknown:
            warnings.append(
                f"{WARNING_PREFIX}{folder.name}/{table}: columns not in schema {SCHEMA_VERSION} "
                f"ignored: {', '.join(unknown)}"
            )
    return t


def read_folder(folder: Path, warnings: list[str]) -> dict[str, pa.Table]:
    """Every table of a profile folder."""
    out: dict[str, pa.Table] = {}
    for name in sorted(_table_names(folder)):
        t = read_table(folder, name, warnings)
        if t is not None:
            out[name] = t
    return out


# -- raw capture: NEFF/NTFF pairing and neuron-explorer ----------------------------------------


@dataclass
class CaptureCheck:
    """What a raw capture folder holds and what is wrong with it."""

    folder: Path
    neffs: list[str] = field(default_factory=list)
    ntffs: list[str] = field(default_factory=list)
    protobufs: list[str] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)


def check_capture(folder: Path) -> CaptureCheck:
    """Pair NEFF and NTFF files by their numeric id (both naming schemes of NEURON.md).

    Model mode: ``neff_<id>[_vnc_<v>].neff`` <-> ``<id>_instid_<i>_vnc_<v>.ntff``.  Session mode
    (``profile_nc_<n>_session_<s>.ntff`` and other ``profile*.ntff``) has one NTFF per core for
    many NEFFs, so only model-mode NTFFs need a NEFF of their id.  Problems (each a dict with
    ``code``, ``message`` and the ``files``): a model-mode NTFF without its NEFF or a NEFF
    without an NTFF (``ERROR_PROCESS_INCOMPLETE``, Neuron's name for an incomplete pair), an
    empty NTFF (nothing executed), NTFFs without any NEFF, protobuf files only.
    """
    c = CaptureCheck(folder=folder)
    try:
        files = sorted(p for p in folder.iterdir() if p.is_file())
    except OSError:
        return c
    neff_ids: dict[str, str] = {}
    model_ntff: dict[str, str] = {}
    session_ntff: list[str] = []
    for p in files:
        if p.name.endswith(".neff"):
            c.neffs.append(p.name)
            m = _NEFF.match(p.name)
            if m:
                neff_ids[m.group(1)] = p.name
        elif p.name.endswith(".ntff"):
            c.ntffs.append(p.name)
            m = _NTFF_MODEL.match(p.name)
            if m:
                model_ntff[m.group(1)] = p.name
            else:
                session_ntff.append(p.name)
            with contextlib.suppress(OSError):
                if p.stat().st_size == 0:
                    c.problems.append(
                        {
                            "code": "EMPTY_NTFF",
                            "message": f"{p.name} is empty: nothing executed on that core, or "
                            "the process owned cores it never used",
                            "files": [p.name],
                        }
                    )
        elif p.name.endswith(".pb"):
            c.protobufs.append(p.name)
    orphan_ntff = sorted(v for k, v in model_ntff.items() if k not in neff_ids)
    if orphan_ntff and neff_ids:
        c.problems.append(
            {
                "code": "ERROR_PROCESS_INCOMPLETE",
                "message": f"{len(orphan_ntff)} NTFF file(s) without the NEFF of the same id "
                f"({', '.join(orphan_ntff[:3])}): the device trace cannot be decoded",
                "files": orphan_ntff,
            }
        )
    elif c.ntffs and not c.neffs:
        c.problems.append(
            {
                "code": "NO_NEFF",
                "message": "NTFF files but no .neff: the compiled graphs were not copied "
                "(set NeuronConfig(neff_cache_dir=...) or TORCH_NEURONX_NEFF_CACHE_DIR)",
                "files": c.ntffs[:20],
            }
        )
    if not session_ntff:
        orphan_neff = sorted(v for k, v in neff_ids.items() if k not in model_ntff)
        if orphan_neff:
            c.problems.append(
                {
                    "code": "ERROR_PROCESS_INCOMPLETE",
                    "message": f"{len(orphan_neff)} NEFF file(s) without an NTFF "
                    f"({', '.join(orphan_neff[:3])}): no device profile for them (capture with "
                    "ProfileMode.DEVICE, and synchronize before the profiler stops)",
                    "files": orphan_neff,
                }
            )
    if c.protobufs and not c.ntffs and not c.neffs:
        c.problems.append(
            {
                "code": "SYSTEM_ONLY",
                "message": "only runtime protobuf files (ntrace.pb/trace_info.pb): a system "
                "profile without device profiles; neuron-explorer view turns it into tables",
                "files": c.protobufs,
            }
        )
    return c


def explorer_command(capture: Path, out: Path) -> list[str]:
    """The ``neuron-explorer view`` command that turns a capture folder into Parquet tables."""
    exe = os.environ.get(EXPLORER_ENV) or "neuron-explorer"
    return [exe, "view", "-d", str(capture), "--ingest-only", "--data-path", str(out)]


def _capture_root(folder: Path) -> Path:
    """The ``<instance>_pid_<pid>`` folder above a session folder, else the folder itself:
    neuron-explorer finds the framework trace next to the runtime files there."""
    return folder.parent if _PID_FOLDER.match(folder.parent.name) else folder


def run_explorer(capture: Path, out: Path, timeout_s: float = EXPLORER_TIMEOUT_S) -> str | None:
    """Run ``neuron-explorer view`` on a capture folder; None on success, else why not."""
    cmd = explorer_command(capture, out)
    if shutil.which(cmd[0]) is None:
        return "not found"
    try:
        out.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout_s, check=False, stdin=None
        )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout_s:.0f} s"
    except OSError as exc:
        return f"could not run ({exc})"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()
        return f"exit code {proc.returncode}" + (f": {tail[-1][:200]}" if tail else "")
    return None


def _shell(cmd: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(c) for c in cmd)


# -- system events -> raw event columns --------------------------------------------------------


@dataclass
class _Raw:
    """Raw event columns (Python lists), in the order :func:`_finish` turns them into Arrow."""

    cat: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    pid: list[str] = field(default_factory=list)
    tid: list[str] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    dur: list[int] = field(default_factory=list)
    correlation: list[int | None] = field(default_factory=list)
    external_id: list[int | None] = field(default_factory=list)
    args: list[str | None] = field(default_factory=list)
    source: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    lane: list[str] = field(default_factory=list)
    # for linking, not in the event table
    flows: list[list[str]] = field(default_factory=list)
    rank_key: list[tuple[str, str]] = field(default_factory=list)
    origin: list[str] = field(default_factory=list)  # neuron_rt | neuron_hw | framework | kineto

    def __len__(self) -> int:
        return len(self.name)

    def add_kineto(
        self, k: dict[str, list[Any]], j: int, *, shift: int, lane: str, instance: str
    ) -> None:
        """Row ``j`` of a Kineto trace's columns (:func:`_kineto_rows`), moved by ``shift`` ns."""
        self.cat.append(k["cat"][j])
        self.name.append(k["name"][j])
        self.pid.append(k["pid"][j])
        self.tid.append(k["tid"][j])
        self.start.append(int(k["start"][j]) + shift)
        self.dur.append(int(k["dur"][j]))
        self.correlation.append(k["correlation"][j])
        self.external_id.append(k["external_id"][j])
        self.args.append(k["args"][j])
        self.source.append(k["source"][j])
        self.kind.append(k["kind"][j])
        self.lane.append(lane)
        self.flows.append([])
        self.rank_key.append((instance, k["pid"][j]))
        self.origin.append("kineto")


def _json_obj(text: Any) -> dict[str, Any]:
    if not isinstance(text, str) or not text:
        return {}
    try:
        v = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return v if isinstance(v, dict) else {}


def _dumps(obj: dict[str, Any]) -> str | None:
    if not obj:
        return None
    try:
        return orjson.dumps(obj).decode()
    except TypeError:  # integers beyond 64 bits
        import json

        return json.dumps(obj, default=str)


def hw_lane(instance: str, pid: str, nc: Any, pcore: Any) -> str:
    """Neuron Explorer's hardware track label (``<a>:<b>`` = logical : physical core)."""
    nc_s = "?" if nc is None else str(nc)
    pc_s = "?" if pcore is None else str(pcore)
    return f"{instance}/PID:{pid}/neuron_hw/NC{nc_s}:{pc_s}"


def _system_rows(spe: pa.Table, raw: _Raw, skipped: Counter[str]) -> None:
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
        extra = _json_obj(extras[i])
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
        raw.args.append(_dumps(args))
        raw.source.append(source)
        raw.kind.append(kind)
        raw.lane.append(lane)
        raw.flows.append(fl)
        raw.rank_key.append((instance, pid))
        raw.origin.append(src)


# -- legacy JSON -------------------------------------------------------------------------------

_LEGACY_HW = frozenset((HW_EXEC, *HW_COMM, "cc_exec_barrier", "nrt_model_switch", "nc_model_switch",
                        "timestamp_sync_point", "hw_notify", "numerical_err"))  # fmt: skip


def _legacy_system(
    path: Path, raw: _Raw, skipped: Counter[str], tables: dict[str, pa.Table]
) -> None:
    """``system_profile.json`` (``--output-format json``): ``trace_events`` -> events;
    ``mem_usage`` / ``cpu_util`` -> tables ``LegacyMemUsage`` / ``LegacyCpuUtil``."""
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TraceError(f"{path}: not a readable JSON system profile ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("trace_events"), list):
        raise TraceError(f"{path}: no 'trace_events' list (not a Neuron system_profile.json)")
    for key, tname in (("mem_usage", "LegacyMemUsage"), ("cpu_util", "LegacyCpuUtil")):
        rows = doc.get(key)
        if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
            with contextlib.suppress(pa.ArrowException):
                tables[tname] = pa.Table.from_pylist(rows)
    for ev in doc["trace_events"]:
        if not isinstance(ev, dict):
            skipped["not an object"] += 1
            continue
        start, dur = as_int(ev.get("timestamp")), as_int(ev.get("duration"))
        if start is None or dur is None or dur < 0:
            skipped["legacy event without timestamp or duration"] += 1
            continue
        name = str(ev.get("name") or "")
        pid = "" if ev.get("process_id") is None else str(ev.get("process_id"))
        tid = "" if ev.get("thread_id") is None else str(ev.get("thread_id"))
        instance = str(ev.get("instance_id") or "")
        group = str(ev.get("group") or "")
        framework = ev.get("type") == 99999 or group.startswith("framework")
        if framework:
            cat = "user_annotation" if name.startswith("ProfilerStep#") else "cpu_op"
            if not name.startswith(("aten::", "ProfilerStep#")):
                cat = "user_annotation"
            source, kind = classify(cat, name)
            origin = "framework"
        elif name in _LEGACY_HW:
            cat, source = "neuron_hw", "device"
            kind = "exec" if name == HW_EXEC else "comm" if name in HW_COMM else "annotation"
            origin = "neuron_hw"
        else:
            cat, source, kind, origin = "neuron_rt", "runtime", "runtime", "neuron_rt"
        # the legacy row label, as Neuron Explorer's JSON/Perfetto output draws it
        lane = f"{group}-{instance}" if group and instance else group or f"thread {tid}"
        args = {
            k: v
            for k, v in ev.items()
            if k not in ("timestamp", "duration", "name", "process_id", "thread_id")
        }
        raw.cat.append(cat)
        raw.name.append(name)
        raw.pid.append(pid)
        raw.tid.append(tid)
        raw.start.append(start)
        raw.dur.append(dur)
        raw.correlation.append(None)
        raw.external_id.append(None)
        raw.args.append(_dumps(args))
        raw.source.append(source)
        raw.kind.append(kind)
        raw.lane.append(lane)
        raw.flows.append([])
        raw.rank_key.append((instance, pid))
        raw.origin.append(origin)


def _legacy_device(path: Path, tables: dict[str, list[pa.Table]], warnings: list[str]) -> None:
    """Old device JSON: ``summary`` and ``instruction`` lists -> tables, as written."""
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TraceError(f"{path}: not a readable JSON device profile ({exc})") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: not a Neuron device profile (expected an object)")
    model = _LEGACY_DEVICE.match(path.name)
    for key, tname in (("summary", "LegacySummary"), ("instruction", "LegacyInstruction")):
        rows = doc.get(key)
        if not isinstance(rows, list) or not rows:
            continue
        try:
            t = pa.Table.from_pylist([r for r in rows if isinstance(r, dict)])
        except pa.ArrowException as exc:
            warnings.append(f"{WARNING_PREFIX}{path.name}: {key} not tabular ({exc})")
            continue
        t = t.append_column(
            "model_id", pa.array([model.group(1) if model else None] * t.num_rows, pa.string())
        )
        tables.setdefault(tname, []).append(t)


# -- framework trace merge ---------------------------------------------------------------------


def _kineto_rows(parsed: KinetoParse) -> dict[str, Any]:
    ev = parsed.events

    def strs(name: str) -> list[str]:
        c = ev.column(name)
        if pa.types.is_dictionary(c.type):
            c = c.cast(pa.string())
        return [str(x) if x is not None else "" for x in c.to_pylist()]

    return {
        "cat": strs("cat"),
        "name": strs("name"),
        "pid": strs("pid"),
        "tid": strs("tid"),
        "start": ev.column("start_ns").to_pylist(),
        "dur": ev.column("dur_ns").to_pylist(),
        "correlation": ev.column("correlation").to_pylist(),
        "external_id": ev.column("external_id").to_pylist(),
        "args": ev.column("args").to_pylist(),
        "source": strs("source"),
        "kind": strs("kind"),
        "lane": strs("lane"),
    }


def _framework_offset(
    raw: _Raw, k: dict[str, Any], pid: str
) -> tuple[int | None, int, set[int], set[int]]:
    """Clock offset (system profile minus framework trace) from framework events found in both
    (same name, thread and duration, paired in start order), the number of matched pairs, and
    the matched rows on each side (Kineto rows, system-profile rows)."""
    sys_groups: dict[tuple[str, str, int], list[int]] = {}
    for i in range(len(raw)):
        if raw.origin[i] == "framework" and raw.pid[i] == pid:
            sys_groups.setdefault((raw.name[i], raw.tid[i], raw.dur[i]), []).append(i)
    k_groups: dict[tuple[str, str, int], list[int]] = {}
    for j in range(len(k["name"])):
        if k["source"][j] in ("framework", "runtime") and k["pid"][j] == pid:
            k_groups.setdefault((k["name"][j], k["tid"][j], k["dur"][j]), []).append(j)
    diffs: Counter[int] = Counter()
    for key, group in sys_groups.items():
        krows = k_groups.get(key)
        if not krows or len(krows) != len(group):
            continue  # ambiguous group: not used to find the offset
        srows = sorted(group, key=lambda r: raw.start[r])
        krows = sorted(krows, key=lambda r: k["start"][r])
        for a, b in zip(srows, krows, strict=True):
            diffs[raw.start[a] - k["start"][b]] += 1
    if not diffs:
        return None, 0, set(), set()
    offset, _ = max(diffs.items(), key=lambda kv: (kv[1], -abs(kv[0])))
    # with the offset known, every Kineto event with a twin in the system profile is a duplicate
    sys_keys: dict[tuple[str, str, int, int], int] = {}
    for key, srows in sys_groups.items():
        for r in srows:
            sys_keys[(key[0], key[1], key[2], raw.start[r])] = r
    k_matched: set[int] = set()
    s_matched: set[int] = set()
    for key, krows in k_groups.items():
        for j in krows:
            twin = sys_keys.get((key[0], key[1], key[2], k["start"][j] + offset))
            if twin is not None and twin not in s_matched:
                k_matched.add(j)
                s_matched.add(twin)
    return offset, len(s_matched), k_matched, s_matched


def _merge_framework(
    raw: _Raw,
    parsed: KinetoParse,
    origin: str,
    pid_instance: dict[str, str],
    alignment: dict[str, Any],
) -> None:
    k = _kineto_rows(parsed)
    pids = sorted({p for p, s in zip(k["pid"], k["source"], strict=True) if s == "framework"})
    offsets: dict[str, int] = {}
    matched: set[int] = set()
    n_matched = 0
    for pid in pids:
        if pid not in pid_instance:
            continue
        off, n, km, _ = _framework_offset(raw, k, pid)
        if off is not None:
            offsets[pid] = off
            matched |= km
            n_matched += n
    offset = Counter(offsets.values()).most_common(1)[0][0] if offsets else 0
    alignment.setdefault("framework_traces", []).append(
        {
            "path": origin,
            "offset_ns": offset,
            "offsets_by_pid": offsets,
            "matched_events": n_matched,
            "method": "framework events in both (same name, thread, duration): most common "
            "start difference"
            if offsets
            else "no framework event in both: not shifted",
        }
    )
    for j in range(len(k["name"])):
        if j in matched:
            continue
        pid = k["pid"][j]
        off = offsets.get(pid, offset)
        lane = k["lane"][j]
        instance = pid_instance.get(pid)
        if instance is not None and k["source"][j] in ("framework", "runtime"):
            lane = f"{instance}/PID:{pid}/framework/TID:{k['tid'][j]}"
        raw.add_kineto(k, j, shift=off, lane=lane, instance=instance or "")


# -- linking -----------------------------------------------------------------------------------


def flow_components(flows: list[list[str]]) -> np.ndarray:
    """Connected components of events linked by shared flow ids: for each row, the smallest
    flow id (as int64) of its component; -1 for rows without flows (or ids beyond int64)."""
    n = len(flows)
    rows: list[int] = []
    keys: list[str] = []
    for i, fl in enumerate(flows):
        for f in fl:
            rows.append(i)
            keys.append(f)
    comp = np.full(n, -1, dtype=np.int64)
    if not rows:
        return comp
    r = np.asarray(rows, dtype=np.int64)
    uniq, fidx = np.unique(np.asarray(keys, dtype=object), return_inverse=True)
    fidx = np.asarray(fidx, dtype=np.int64).reshape(-1)
    # label propagation: rows and flow ids take the smallest label they touch, until stable
    label = np.arange(n, dtype=np.int64)
    for _ in range(n + 1):
        fmin = np.full(len(uniq), n, dtype=np.int64)
        np.minimum.at(fmin, fidx, label[r])
        new = label.copy()
        np.minimum.at(new, r, fmin[fidx])
        if np.array_equal(new, label):
            break
        label = new
    values = []
    for u in uniq.tolist():
        v = as_int(u)
        values.append(v if v is not None and v >= 0 else -1)
    fval = np.asarray(values, dtype=np.int64)
    # the component's smallest flow id: min over its flow ids, via the member rows
    big = np.iinfo(np.int64).max
    fv = np.where(fval >= 0, fval, big)
    best = np.full(n, big, dtype=np.int64)
    np.minimum.at(best, label[r], fv[fidx])
    has = np.zeros(n, dtype=bool)
    has[r] = True
    out = np.where(has, best[label], -1)
    out[out == big] = -1
    return np.asarray(out, dtype=np.int64)


def _finish(raw: _Raw) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Arrow columns in a stable time order, plus flow components and origins in that order."""
    n = len(raw)
    start = np.asarray(raw.start, dtype=np.int64)
    dur = np.asarray(raw.dur, dtype=np.int64)
    src_rank = {"framework": 0, "runtime": 1, "device": 2, "other": 3}
    srank = np.asarray([src_rank.get(s, 3) for s in raw.source], dtype=np.int64)
    order = np.lexsort((np.arange(n), srank, -dur, start)) if n else np.zeros(0, np.int64)
    comp = flow_components(raw.flows)[order] if n else np.zeros(0, np.int64)
    corr = [raw.correlation[i] for i in order.tolist()]
    for i in range(n):
        if comp[i] >= 0:
            corr[i] = int(comp[i])

    def take(values: list[Any]) -> list[Any]:
        return [values[i] for i in order.tolist()]

    def dict_col(values: list[str], vocab: tuple[str, ...] | None = None) -> pa.DictionaryArray:
        if vocab is not None:
            ids = {v: i for i, v in enumerate(vocab)}
            idx = np.asarray([ids[v] for v in values], dtype=np.int32)
            return pa.DictionaryArray.from_arrays(
                pa.array(idx, pa.int32()), pa.array(list(vocab), pa.string())
            )
        arr = pa.array(values, pa.string()).dictionary_encode()
        return pa.DictionaryArray.from_arrays(arr.indices.cast(pa.int32()), arr.dictionary)

    table = pa.table(
        {
            "cat": pa.array(take(raw.cat), pa.string()),
            "name": pa.array(take(raw.name), pa.string()),
            "pid": pa.array(take(raw.pid), pa.string()),
            "tid": pa.array(take(raw.tid), pa.string()),
            "start_ns": pa.array(start[order], pa.int64()),
            "dur_ns": pa.array(dur[order], pa.int64()),
            "correlation": pa.array(corr, pa.int64()),
            "external_id": pa.array(take(raw.external_id), pa.int64()),
            "args": pa.array(take(raw.args), pa.string()),
            "source": dict_col(take(raw.source), SOURCES),
            "kind": dict_col(take(raw.kind), KINDS),
            "lane": dict_col(take(raw.lane)),
        }
    )
    origin = np.asarray(take(raw.origin), dtype=object)
    return table, comp, origin


def _seq_ids(args: list[str | None], rows: np.ndarray) -> dict[int, int | None]:
    out: dict[int, int | None] = {}
    for r in rows.tolist():
        a = args[r]
        if a and "nrt_sequence_id" in a:
            out[r] = as_int(_json_obj(a).get("nrt_sequence_id"))
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


# -- device tables -----------------------------------------------------------------------------


def _device_offset(tables: dict[str, pa.Table], events: pa.Table) -> tuple[int | None, int]:
    """Offset (host clock minus device clock) of one device profile: ``ExecutionInfo`` windows
    matched to ``nc_exec_running`` of the same NEFF and duration; the most common difference."""
    ei = tables.get("ExecutionInfo")
    if ei is None or ei.num_rows == 0 or "execution_start_ts" not in ei.column_names:
        return None, 0
    ev = events.filter(pc.equal(events.column("name").cast(pa.string()), HW_EXEC))
    if ev.num_rows == 0:
        return None, 0
    hw: dict[tuple[str, int], list[int]] = {}
    for a, s, d in zip(
        ev.column("args").to_pylist(),
        ev.column("start_ns").to_pylist(),
        ev.column("dur_ns").to_pylist(),
        strict=True,
    ):
        model = str(_json_obj(a).get("model_name") or "")
        hw.setdefault((model, d), []).append(s)
    diffs: Counter[int] = Counter()
    neffs = (
        ei.column("neff_name").to_pylist() if "neff_name" in ei.column_names else [None] * len(ei)
    )
    for neff, s, e in zip(
        neffs,
        ei.column("execution_start_ts").to_pylist(),
        ei.column("execution_end_ts").to_pylist()
        if "execution_end_ts" in ei.column_names
        else [None] * len(ei),
        strict=True,
    ):
        if s is None or e is None:
            continue
        for hs in hw.get((str(neff or ""), e - s), []):
            diffs[hs - s] += 1
    if not diffs:
        return None, 0
    off, count = diffs.most_common(1)[0]
    return off, count


_CLOCKED = ("Instruction", "ActiveTime", "DmaPacket", "DmaPacketAggregated")


def _add_host_time(tables: dict[str, pa.Table], offset: int) -> None:
    for name in _CLOCKED:
        t = tables.get(name)
        if t is not None and "start_ts" in t.column_names and "host_start_ns" not in t.column_names:
            tables[name] = t.append_column(
                "host_start_ns", pc.add(t.column("start_ts"), pa.scalar(offset, pa.int64()))
            )
    ei = tables.get("ExecutionInfo")
    if ei is not None and "execution_start_ts" in ei.column_names:
        tables["ExecutionInfo"] = ei.append_column(
            "host_start_ns",
            pc.add(ei.column("execution_start_ts"), pa.scalar(offset, pa.int64())),
        )


def _stack(per_profile: list[tuple[str, dict[str, pa.Table]]]) -> dict[str, pa.Table]:
    by_table: dict[str, list[pa.Table]] = {}
    for prof, tables in per_profile:
        for name, t in tables.items():
            t2 = t.append_column("device_profile", pa.array([prof] * t.num_rows, pa.string()))
            by_table.setdefault(name, []).append(t2)
    out: dict[str, pa.Table] = {}
    for name, parts in by_table.items():
        try:
            out[name] = (
                parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="default")
            )
        except pa.ArrowException:
            out[name] = parts[0]
    return out


# -- device name -------------------------------------------------------------------------------

_FAMILIES = (
    ("trn3", "AWS Trainium3"),
    ("trn2", "AWS Trainium2"),
    ("trn1", "AWS Trainium"),
    ("inf2", "AWS Inferentia2"),
    ("inf1", "AWS Inferentia"),
)


def device_name(instance_type: str | None) -> str:
    """``trn2.48xlarge`` -> ``AWS Trainium2 (trn2.48xlarge)``; unknown -> ``AWS Neuron``."""
    if not instance_type:
        return "AWS Neuron"
    low = instance_type.lower()
    for prefix, label in _FAMILIES:
        if low.startswith(prefix):
            return f"{label} ({instance_type})"
    return f"AWS Neuron ({instance_type})"


def _first(t: pa.Table | None, col: str) -> Any:
    if t is None or col not in t.column_names or t.num_rows == 0:
        return None
    for v in t.column(col).to_pylist():
        if v is not None:
            return v
    return None


# -- the loader --------------------------------------------------------------------------------


def load_neuron(
    path: Path,
    *,
    max_bytes: int | None = None,
    run_neuron_explorer: bool = True,
    timeout_s: float = EXPLORER_TIMEOUT_S,
) -> Trace:
    """Read a Neuron profile (see the module docstring) into a :class:`Trace` with
    ``trace.neuron`` holding the Neuron tables.

    ``run_neuron_explorer``: for a raw capture without Parquet tables, run ``neuron-explorer
    view`` when it is installed (``$OPSCOPE_NEURON_EXPLORER`` names the binary).
    """
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder")
    root = path / "neuron" if (path / "run.json").is_file() else path
    lay = find_layout(root)
    if (path / "run.json").is_file():
        lay.framework = find_layout(path).framework
    warnings: list[str] = []
    skipped: Counter[str] = Counter()
    neuron_info: dict[str, Any] = {
        "warnings": [],
        "capture_problems": [],
        "system_profiles": [],
        "device_profiles": [],
    }
    # raw captures: pairing, then neuron-explorer when there are no tables yet
    for cap in lay.captures:
        chk = check_capture(cap)
        for prob in chk.problems:
            neuron_info["capture_problems"].append({**prob, "folder": str(cap)})
    if lay.captures and not lay.has_profile:
        explorer_out = _explorer_target(lay.captures[0])
        roots = sorted({_capture_root(c) for c in lay.captures})
        ran: list[str] = []
        for cap_root in roots:
            cmd = explorer_command(cap_root, explorer_out)
            why = run_explorer(cap_root, explorer_out, timeout_s) if run_neuron_explorer else "off"
            if why is None:
                ran.append(_shell(cmd))
                continue
            reason = (
                "neuron-explorer is not on PATH"
                if why == "not found"
                else "not run"
                if why == "off"
                else f"neuron-explorer view failed ({why})"
            )
            msg = (
                f"{WARNING_PREFIX}{cap_root}: raw Neuron capture without processed tables; "
                f"{reason}. Run: {_shell(cmd)} - then opscope report {explorer_out}"
            )
            warnings.append(msg)
            neuron_info["capture_problems"].append(
                {
                    "code": "NOT_PROCESSED",
                    "message": msg[len(WARNING_PREFIX) :],
                    "files": [],
                    "folder": str(cap_root),
                    "command": _shell(cmd),
                }
            )
        if ran:
            neuron_info["neuron_explorer"] = ran
            again = find_layout(explorer_out)
            lay.system, lay.device = again.system, again.device
    if not lay.has_profile and not lay.framework:
        if lay.captures:
            command = _shell(
                explorer_command(_capture_root(lay.captures[0]), _explorer_target(lay.captures[0]))
            )
            raise TraceError(
                f"{path}: Neuron capture with protobuf/NTFF files only and no framework "
                f"trace; neuron-explorer view is needed to read it: {command}"
            )
        if lay.device or lay.legacy_device:
            pass  # device tables alone: an event table without events, the tables for SQL
        else:
            raise TraceError(f"{path}: no Neuron profile tables, capture files or traces found")

    raw = _Raw()
    tables: dict[str, pa.Table] = {}
    sys_meta: list[pa.Table] = []
    profile_list: list[pa.Table] = []
    for folder in lay.system:
        tabs = read_folder(folder, warnings)
        spe = tabs.pop(SYSTEM_TABLE)
        _system_rows(spe, raw, skipped)
        neuron_info["system_profiles"].append(str(folder))
        if "SystemProfileMetadata" in tabs:
            sys_meta.append(tabs.pop("SystemProfileMetadata"))
        if "DeviceProfileList" in tabs:
            profile_list.append(tabs.pop("DeviceProfileList"))
        for name, t in tabs.items():
            tables.setdefault(name, t)
        tables.setdefault("SystemProfileEvents", spe)
    legacy_tables: dict[str, list[pa.Table]] = {}
    for f in lay.legacy_system:
        _legacy_system(f, raw, skipped, tables)
        neuron_info["system_profiles"].append(str(f))
    for f in lay.legacy_device:
        _legacy_device(f, legacy_tables, warnings)
    for name, parts in legacy_tables.items():
        tables[name] = pa.concat_tables(parts, promote_options="default")
    if sys_meta:
        tables["SystemProfileMetadata"] = pa.concat_tables(sys_meta, promote_options="default")
    if profile_list:
        tables["DeviceProfileList"] = pa.concat_tables(profile_list, promote_options="default")

    pid_instance = {p: i for (i, p) in raw.rank_key if i}
    alignment: dict[str, Any] = {
        "reference": "system profile CPU clock (Unix ns)" if lay.has_profile else None
    }
    kineto_meta: dict[str, Any] = {}
    process_names: dict[str, str] = {}
    thread_names: dict[str, str] = {}
    dist_rank: dict[str, int] = {}
    kineto_flows: list[pa.Table] = []
    for f in lay.framework:
        parsed, w = kineto_file.parse_file(f, max_bytes=max_bytes)
        warnings.extend(w)
        skipped.update(parsed.skipped)
        if lay.has_profile:
            _merge_framework(raw, parsed, str(f), pid_instance, alignment)
        else:
            kineto_flows.append(parsed.flows)
            k = _kineto_rows(parsed)
            for j in range(len(k["name"])):
                raw.add_kineto(k, j, shift=0, lane=k["lane"][j], instance="")
        for key, v in parsed.meta.items():
            kineto_meta.setdefault(key, v)
        process_names.update(parsed.process_names)
        thread_names.update({f"{p}/{t}": v for (p, t), v in parsed.thread_names.items()})
        di = parsed.meta.get("distributedInfo")
        if isinstance(di, dict) and isinstance(di.get("rank"), int):
            for p in {p for p in _kineto_rows(parsed)["pid"] if p.isdigit()}:
                dist_rank[p] = int(di["rank"])

    table, comp, _origin = _finish(raw)
    stats: dict[str, int] = {}
    if lay.has_profile:
        events, stats = link_neuron(table, comp)
    else:
        # a framework trace alone: Kineto linking, its ac2g flows included (the system
        # profile's flow ids are what links a merged profile)
        flows = pa.concat_tables(kineto_flows) if kineto_flows else FLOW_SCHEMA.empty_table()
        events = event_table(table, link(table, flows))

    # ranks: one per (instance, process), unless the framework trace names it
    events, ranks, rank_origin = _ranks(events, dist_rank)

    # device profiles
    per_profile: list[tuple[str, dict[str, pa.Table]]] = []
    offsets: dict[str, Any] = {}
    for folder in lay.device:
        tabs = read_folder(folder, warnings)
        if folder in lay.system:
            tabs = {k: v for k, v in tabs.items() if k not in tables and k != SYSTEM_TABLE}
        prof = folder.name.removesuffix("@latest")
        off, matched = _device_offset(tabs, events)
        if off is not None:
            _add_host_time(tabs, off)
        offsets[prof] = {
            "offset_ns": off,
            "matched_executions": matched,
            "method": "ExecutionInfo.execution_start_ts <-> nc_exec_running.start_ts "
            "(same NEFF and duration)"
            if off is not None
            else "no execution matched: device tables stay on the device clock",
        }
        per_profile.append((prof, tabs))
        neuron_info["device_profiles"].append(str(folder))
        wt = tabs.get("Warning")
        if wt is not None:
            for m, c in zip(
                wt.column("message").to_pylist(), wt.column("category").to_pylist(), strict=True
            ):
                neuron_info["warnings"].append(
                    {"profile": prof, "message": str(m), "category": str(c)}
                )
    tables.update(_stack(per_profile))
    if offsets:
        alignment["device_profiles"] = offsets

    md = tables.get("Metadata")
    nh = tables.get("NeffHeader")
    instance_type = _first(md, "instance_type")
    schema_version = _first(md, "profile_schema_version")
    if (
        isinstance(schema_version, str)
        and schema_version.split(".", 1)[0] != SCHEMA_VERSION.split(".", 1)[0]
    ):
        warnings.append(
            f"{WARNING_PREFIX}profile schema {schema_version}: opscope reads "
            f"{SCHEMA_VERSION} (a different major version may change meanings)"
        )
    props: dict[str, Any] = {"name": device_name(instance_type)}
    for key in (
        "instance_type",
        "num_physical_cores",
        "neuroncore_clock_freq",
        "tensor_engine_clock_freq",
        "vector_engine_clock_freq",
        "scalar_engine_clock_freq",
        "gpsimd_engine_clock_freq",
        "tensor_engine_num_rows",
        "tensor_engine_num_cols",
        "hbm_ddr_bandwidth",
        "dma_ddr_bandwidth",
        "runtime_version",
        "compiler_version",
        "profile_schema_version",
    ):
        v = _first(md, key)
        if v is not None:
            props[key] = v
    hbm = _first(tables.get("SystemProfileMetadata"), "hbm_capacity_bytes")
    if hbm is not None:
        props["hbm_capacity_bytes_per_nc"] = hbm

    meta = TraceMeta(
        paths=[str(path)],
        format="neuron",
        warnings=warnings,
        skipped=dict(skipped),
        alignment=alignment if lay.has_profile else {},
    )
    meta.ranks = ranks
    meta.rank_origin = rank_origin
    meta.device_properties = [props]
    if isinstance(kineto_meta.get("distributedInfo"), dict):
        meta.distributed_info = kineto_meta["distributedInfo"]
    meta.base_time_ns = as_int(kineto_meta.get("baseTimeNanoseconds"))
    first_ns = _first(tables.get("SystemProfileMetadata"), "first_ts_ns")
    if meta.base_time_ns is None and first_ns is not None:
        meta.base_time_ns = as_int(first_ns)
    meta.process_names = process_names
    meta.thread_names = thread_names
    meta.extra = {
        k: v
        for k, v in kineto_meta.items()
        if k not in ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "traceEvents")
    }
    meta.extra["device_kind"] = "neuron"
    lnc = _first(nh, "pcore_count_per_lnc")
    if isinstance(lnc, int) and lnc > 0:
        meta.extra["neuron_lnc"] = lnc
    neuron_info["links"] = stats
    sm = tables.get("SystemProfileMetadata")
    if sm is not None:
        neuron_info["system_metadata"] = sm.slice(0, 1).to_pylist()[0]
    meta.extra["neuron"] = neuron_info
    trace = Trace(events, meta)
    trace.neuron = NeuronTables(
        tables=tables,
        profiles=neuron_info["system_profiles"] + neuron_info["device_profiles"],
        schema_version=schema_version if isinstance(schema_version, str) else None,
    )
    return trace


def _explorer_target(capture: Path) -> Path:
    """Where ``neuron-explorer view`` writes for a capture: ``explorer/`` beside the
    ``<instance>_pid_<pid>`` folders (``$OPSCOPE_CACHE_DIR`` when that is not writable)."""
    root = _capture_root(capture)
    target = root.parent / "explorer"
    if os.access(root.parent, os.W_OK):
        return target
    from opscope.trace.cache import cache_dir

    return cache_dir().parent / "neuron" / root.name / "explorer"


def _ranks(
    events: pa.Table, dist_rank: dict[str, int]
) -> tuple[pa.Table, list[int], dict[int, str]]:
    """One rank per (instance, pid) in the order of their process ids, unless named."""
    n = events.num_rows
    if n == 0:
        return events, [0], {0: "order"}
    pids = events.column("pid").cast(pa.string()).to_pylist()
    known = sorted({p for p in pids if p and p.isdigit()}, key=int)
    rank_of: dict[str, int] = {}
    origin: dict[int, str] = {}
    used: set[int] = set()
    for p in known:
        if p in dist_rank and dist_rank[p] not in used:
            rank_of[p] = dist_rank[p]
            used.add(dist_rank[p])
            origin[dist_rank[p]] = "distributedInfo"
    nxt = 0
    for p in known:
        if p in rank_of:
            continue
        while nxt in used:
            nxt += 1
        rank_of[p] = nxt
        used.add(nxt)
        origin[nxt] = "order (process id)"
    if len(rank_of) <= 1 and not any(rank_of.values()):
        return events, [0], {0: next(iter(origin.values()), "order")}
    col = pa.array([rank_of.get(p or "", 0) for p in pids], pa.int32())
    events = events.set_column(1, "rank", col)
    events = pa.Table.from_arrays(events.columns, schema=EVENT_SCHEMA)
    return events, sorted(set(rank_of.values())), origin


__all__ = [
    "SCHEMA_VERSION",
    "WARNING_PREFIX",
    "CaptureCheck",
    "Layout",
    "check_capture",
    "device_name",
    "explorer_command",
    "find_layout",
    "flow_components",
    "is_neuron_path",
    "load_neuron",
    "read_table",
    "table_files",
]
