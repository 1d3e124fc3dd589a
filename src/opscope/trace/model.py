"""The Trace: the event table (Arrow) plus the metadata the producer wrote, with SQL over it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass
class TraceMeta:
    """What the trace says about itself, and what ingestion noticed."""

    paths: list[str] = field(default_factory=list)
    format: str = "kineto"
    ranks: list[int] = field(default_factory=list)
    rank_origin: dict[int, str] = field(
        default_factory=dict
    )  # rank -> distributedInfo|file name|order
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    distributed_info: dict[str, Any] | None = None
    base_time_ns: int | None = None
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[str, str] = field(default_factory=dict)  # "pid/tid" -> name
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # other top-level keys, as written

    def to_dict(self) -> dict[str, Any]:
        return {
            "paths": self.paths,
            "format": self.format,
            "ranks": self.ranks,
            "rank_origin": {str(k): v for k, v in self.rank_origin.items()},
            "device_properties": self.device_properties,
            "distributed_info": self.distributed_info,
            "base_time_ns": self.base_time_ns,
            "process_names": self.process_names,
            "thread_names": self.thread_names,
            "skipped": self.skipped,
            "warnings": self.warnings,
        }


@dataclass
class DeviceInfo:
    """Which device the trace's device work ran on, as far as the trace tells."""

    kind: str  # cpu | cuda | rocm | xpu | mtia | neuron | privateuse1
    name: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "count": self.count}


class Trace:
    """An ingested trace: ``events`` (Arrow table, schema in :mod:`opscope.trace.schema`)."""

    def __init__(self, events: pa.Table, meta: TraceMeta) -> None:
        self.events = events
        self.meta = meta
        self._device: DeviceInfo | None = None

    def __len__(self) -> int:
        return int(self.events.num_rows)

    def __repr__(self) -> str:
        return f"<Trace {len(self)} events from {', '.join(self.meta.paths) or '?'}>"

    @property
    def device(self) -> DeviceInfo:
        if self._device is None:
            from opscope.trace.device import detect_device

            self._device = detect_device(self)
        return self._device

    def column(self, name: str) -> list[Any]:
        """A column as a Python list (dictionary columns decoded)."""
        col = self.events.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        return list(col.to_pylist())

    def sql(self, query: str) -> pa.Table:
        """Run SQL (DuckDB) over ``events``; returns an Arrow table."""
        import duckdb

        con = duckdb.connect()
        try:
            con.register("events", self.events)
            result = con.sql(query).to_arrow_table()
        finally:
            con.close()
        return result
