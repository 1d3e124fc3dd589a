"""A Neuron profile (every piece :func:`~.layout.find_layout` finds under a path) -> a
:class:`~opscope.trace.model.Trace` with ``trace.neuron`` holding the Neuron tables."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from opscope.errors import TraceError
from opscope.trace.events import event_table
from opscope.trace.kineto import file as kineto_file
from opscope.trace.kineto.columns import FLOW_SCHEMA
from opscope.trace.link import link
from opscope.trace.model import NeuronTables, Trace, TraceMeta
from opscope.trace.neuron.capture import (
    capture_root,
    capture_roots,
    check_capture,
    converted,
    explorer_command,
    explorer_on_path,
    explorer_target,
    shell_text,
)
from opscope.trace.neuron.columns import Raw, to_table
from opscope.trace.neuron.device import add_host_time, device_name, device_offset, stack_profiles
from opscope.trace.neuron.framework import kineto_rows, merge_framework
from opscope.trace.neuron.layout import Layout, find_layout
from opscope.trace.neuron.legacy import legacy_device, legacy_system
from opscope.trace.neuron.link import link_neuron
from opscope.trace.neuron.schema import SCHEMA_VERSION, SYSTEM_TABLE, WARNING_PREFIX
from opscope.trace.neuron.system import system_rows
from opscope.trace.neuron.tables import read_folder
from opscope.trace.rows import as_int
from opscope.trace.schema import EVENT_SCHEMA


def _first(t: pa.Table | None, col: str) -> Any:
    if t is None or col not in t.column_names or t.num_rows == 0:
        return None
    for v in t.column(col).to_pylist():
        if v is not None:
            return v
    return None


def load_neuron(path: Path, *, max_bytes: int | None = None) -> Trace:
    """Read a Neuron profile (see :mod:`opscope.trace.neuron`) into a :class:`Trace` with
    ``trace.neuron`` holding the Neuron tables.

    A raw capture's Parquet tables are read where ``neuron-explorer view`` writes them
    (:func:`~.capture.explorer_target`); without them the framework side is read and a
    warning gives the command, or, with no framework trace either, :class:`TraceError` does.
    Nothing is run and nothing written.
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
    # raw captures: pairing, then the tables neuron-explorer view wrote for them, if any
    for cap in lay.captures:
        chk = check_capture(cap)
        for prob in chk.problems:
            neuron_info["capture_problems"].append({**prob, "folder": str(cap)})
    if lay.captures and not lay.has_profile:
        _converted_or_command(lay, warnings, neuron_info)
    if not lay.has_profile and not lay.framework:
        if lay.captures:
            target = explorer_target(lay.captures[0])
            command = shell_text(explorer_command(capture_root(lay.captures[0]), target))
            raise TraceError(
                f"{path}: Neuron capture with protobuf/NTFF files only and no framework "
                f"trace; neuron-explorer view is needed to read it: {command}"
            )
        if lay.device or lay.legacy_device:
            pass  # device tables alone: an event table without events, the tables for SQL
        else:
            raise TraceError(f"{path}: no Neuron profile tables, capture files or traces found")

    raw = Raw()
    tables: dict[str, pa.Table] = {}
    sys_meta: list[pa.Table] = []
    profile_list: list[pa.Table] = []
    for folder in lay.system:
        tabs = read_folder(folder, warnings)
        spe = tabs.pop(SYSTEM_TABLE)
        system_rows(spe, raw, skipped)
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
        legacy_system(f, raw, skipped, tables)
        neuron_info["system_profiles"].append(str(f))
    for f in lay.legacy_device:
        legacy_device(f, legacy_tables, warnings)
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
            merge_framework(raw, parsed, str(f), pid_instance, alignment)
        else:
            kineto_flows.append(parsed.flows)
            k = kineto_rows(parsed)
            for j in range(len(k["name"])):
                raw.add_kineto(k, j, shift=0, lane=k["lane"][j], instance="")
        for key, v in parsed.meta.items():
            kineto_meta.setdefault(key, v)
        process_names.update(parsed.process_names)
        thread_names.update({f"{p}/{t}": v for (p, t), v in parsed.thread_names.items()})
        di = parsed.meta.get("distributedInfo")
        if isinstance(di, dict) and isinstance(di.get("rank"), int):
            for p in {p for p in kineto_rows(parsed)["pid"] if p.isdigit()}:
                dist_rank[p] = int(di["rank"])

    table, comp, _origin = to_table(raw)
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
        off, matched = device_offset(tabs, events)
        if off is not None:
            add_host_time(tabs, off)
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
    tables.update(stack_profiles(per_profile))
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


def _converted_or_command(lay: Layout, warnings: list[str], info: dict[str, Any]) -> None:
    """A raw capture without tables under the path: take the ones ``neuron-explorer view``
    wrote where it writes them, else warn (and record for the profile-quality rule) with the
    command to run for each capture root."""
    target = explorer_target(lay.captures[0])
    roots = capture_roots(lay)
    done = converted(target)
    if done is not None:
        info["neuron_explorer"] = [shell_text(explorer_command(r, target)) for r in roots]
        lay.system, lay.device = done.system, done.device
        return
    reason = (
        "neuron-explorer view has not written them (loading never runs it)"
        if explorer_on_path()
        else "neuron-explorer is not on PATH"
    )
    for cap_root in roots:
        cmd = shell_text(explorer_command(cap_root, target))
        msg = (
            f"{WARNING_PREFIX}{cap_root}: raw Neuron capture without processed tables; "
            f"{reason}. Run: {cmd} - then opscope report {target}"
        )
        warnings.append(msg)
        info["capture_problems"].append(
            {
                "code": "NOT_PROCESSED",
                "message": msg[len(WARNING_PREFIX) :],
                "files": [],
                "folder": str(cap_root),
                "command": cmd,
            }
        )


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
