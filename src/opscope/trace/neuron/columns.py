"""Raw event columns (Python lists), filled by the system, legacy and framework readers, and
their Arrow table in a stable time order (:func:`to_table`), with each row's flow component."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from opscope.trace.neuron.flows import flow_components
from opscope.trace.schema import KINDS, SOURCES


@dataclass
class Raw:
    """Raw event columns (Python lists), in the order :func:`to_table` turns them into Arrow."""

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
        """Row ``j`` of a Kineto trace's columns (:func:`~.framework.kineto_rows`), moved by
        ``shift`` ns."""
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


def json_obj(text: Any) -> dict[str, Any]:
    if not isinstance(text, str) or not text:
        return {}
    try:
        v = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return v if isinstance(v, dict) else {}


def dumps(obj: dict[str, Any]) -> str | None:
    if not obj:
        return None
    try:
        return orjson.dumps(obj).decode()
    except TypeError:  # integers beyond 64 bits
        import json

        return json.dumps(obj, default=str)


def to_table(raw: Raw) -> tuple[pa.Table, np.ndarray, np.ndarray]:
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
