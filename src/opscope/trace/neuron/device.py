"""Neuron device profiles: their clock put onto the host's (``host_start_ns``), several
profiles stacked, and the device's name."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.neuron.columns import json_obj
from opscope.trace.neuron.schema import HW_EXEC


def device_offset(tables: dict[str, pa.Table], events: pa.Table) -> tuple[int | None, int]:
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
        model = str(json_obj(a).get("model_name") or "")
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


def add_host_time(tables: dict[str, pa.Table], offset: int) -> None:
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


def stack_profiles(per_profile: list[tuple[str, dict[str, pa.Table]]]) -> dict[str, pa.Table]:
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
