"""Legacy Neuron JSON (``--output-format json``): ``system_profile.json`` -> raw event columns
and tables; ``device_profile_model_<id>.json`` -> tables."""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

import orjson
import pyarrow as pa

from opscope.errors import TraceError
from opscope.trace.neuron.columns import Raw, dumps
from opscope.trace.neuron.layout import LEGACY_DEVICE
from opscope.trace.neuron.schema import HW_COMM, HW_EXEC, WARNING_PREFIX
from opscope.trace.rows import as_int
from opscope.trace.schema import classify

_LEGACY_HW = frozenset((HW_EXEC, *HW_COMM, "cc_exec_barrier", "nrt_model_switch", "nc_model_switch",
                        "timestamp_sync_point", "hw_notify", "numerical_err"))  # fmt: skip


def legacy_system(path: Path, raw: Raw, skipped: Counter[str], tables: dict[str, pa.Table]) -> None:
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
        raw.args.append(dumps(args))
        raw.source.append(source)
        raw.kind.append(kind)
        raw.lane.append(lane)
        raw.flows.append([])
        raw.rank_key.append((instance, pid))
        raw.origin.append(origin)


def legacy_device(path: Path, tables: dict[str, list[pa.Table]], warnings: list[str]) -> None:
    """Old device JSON: ``summary`` and ``instruction`` lists -> tables, as written."""
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TraceError(f"{path}: not a readable JSON device profile ({exc})") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: not a Neuron device profile (expected an object)")
    model = LEGACY_DEVICE.match(path.name)
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
