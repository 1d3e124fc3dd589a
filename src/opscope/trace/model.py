"""The Trace: the event table (Arrow) plus the metadata the producer wrote, with SQL over it.

``Trace.events`` follows :data:`opscope.trace.schema.EVENT_SCHEMA`.  ``Trace.ops`` and
``Trace.kernels`` are the derived tables of :mod:`opscope.trace.derived`, computed on first use
and kept.  ``Trace.sql(query)`` runs DuckDB over the three tables (``events``, ``ops``,
``kernels``) and returns Arrow; ``Trace.query(query, limit=...)`` returns one page of rows
(:class:`~opscope.trace.sqlsafe.SqlResult`); ``Trace.sql_df`` returns pandas when pandas is
installed.  Both run in the sandbox of :mod:`opscope.trace.sqlsafe` (one read-only SELECT, no
file or network access) unless asked not to.

A Neuron profile (:mod:`opscope.trace.neuron`) also carries ``Trace.neuron``: the Neuron
Explorer tables as read (device tables such as ``Instruction``, ``ActiveTime``, ``Summary``),
queryable in SQL as ``neuron_<table in snake case>`` (``neuron_instruction``,
``neuron_active_time``, ``neuron_summary``, ...).
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from opscope.errors import OpscopeError
from opscope.trace.arrays import one_chunk
from opscope.trace.device import DeviceInfo, detect_device
from opscope.trace.mempool import release_ingest_pool
from opscope.trace.packed import PackedText
from opscope.trace.schema import EVENT_SCHEMA

if TYPE_CHECKING:
    from opscope.trace.graphs.records import GraphAttribution
    from opscope.trace.index import EventIndex
    from opscope.trace.sqlsafe import SqlResult, TableSource, TraceSql

#: one trace's SQL connections are made once, by whichever thread queries first
_SQL_LOCK = threading.Lock()


@dataclass
class TraceMeta:
    """What the trace says about itself, and what ingestion noticed."""

    paths: list[str] = field(default_factory=list)
    format: str = "kineto"
    ranks: list[int] = field(default_factory=list)
    # rank -> where it came from: distributedInfo | file name | order
    rank_origin: dict[int, str] = field(default_factory=dict)
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    distributed_info: dict[str, Any] | None = None
    base_time_ns: int | None = None
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[str, str] = field(default_factory=dict)  # "pid/tid" -> name
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    warnings: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # other top-level keys, as written
    cached: bool = False  # every file came from the cache
    # how several clocks were put on one (Neuron: framework trace and device tables onto the
    # system profile's CPU clock); empty when the trace has one clock
    alignment: dict[str, Any] = field(default_factory=dict)
    # files of a job that could not be read and were left out: {"path", "rank" (from the
    # file name, None when it does not say), "reason"}
    unreadable: list[dict[str, Any]] = field(default_factory=list)

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
            "alignment": self.alignment,
            "unreadable": self.unreadable,
        }

    def to_json_dict(self) -> dict[str, Any]:
        """Everything, ``extra`` included (the cache stores this)."""
        d = self.to_dict()
        d["extra"] = self.extra
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TraceMeta:
        return cls(
            paths=list(d.get("paths") or []),
            format=str(d.get("format") or "kineto"),
            ranks=[int(r) for r in d.get("ranks") or []],
            rank_origin={int(k): str(v) for k, v in (d.get("rank_origin") or {}).items()},
            device_properties=list(d.get("device_properties") or []),
            distributed_info=d.get("distributed_info"),
            base_time_ns=d.get("base_time_ns"),
            process_names=dict(d.get("process_names") or {}),
            thread_names=dict(d.get("thread_names") or {}),
            skipped={str(k): int(v) for k, v in (d.get("skipped") or {}).items()},
            warnings=[str(w) for w in d.get("warnings") or []],
            extra=dict(d.get("extra") or {}),
            alignment=dict(d.get("alignment") or {}),
            unreadable=[dict(u) for u in d.get("unreadable") or []],
        )


def snake_case(table: str) -> str:
    """``DmaPacketAggregated`` -> ``dma_packet_aggregated`` (SQL names of Neuron tables)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", table).lower()


@dataclass
class NeuronTables:
    """The Neuron Explorer tables of a profile, by table name (``Instruction``, ``Summary``...).

    Tables of several device profiles are stacked, with a ``device_profile`` column naming the
    profile of each row; device-clock tables gain ``host_start_ns`` (their ``start_ts`` moved
    onto the event table's clock) when the alignment is known.  ``profiles`` names the
    folders read; ``schema_version`` is ``Metadata.profile_schema_version`` when present.
    """

    tables: dict[str, pa.Table] = field(default_factory=dict)
    profiles: list[str] = field(default_factory=list)
    schema_version: str | None = None

    def get(self, table: str) -> pa.Table | None:
        return self.tables.get(table)

    def sql_names(self) -> dict[str, str]:
        """SQL name -> table name."""
        return {f"neuron_{snake_case(t)}": t for t in self.tables}


#: int64 columns without nulls that :class:`~opscope.trace.index.EventIndex` reads in place.
VIEWED_COLUMNS = ("id", "start_ns", "dur_ns")


class Trace:
    """An ingested trace: ``events`` (Arrow table, schema in :mod:`opscope.trace.schema`)."""

    def __init__(self, events: pa.Table, meta: TraceMeta) -> None:
        # the index reads these as views of the table's buffers, not copies (8 B/event each)
        self.events = one_chunk(events, VIEWED_COLUMNS)
        self.meta = meta
        self._device: DeviceInfo | None = None
        self._index: EventIndex | None = None
        self._ops: pa.Table | None = None
        self._kernels: pa.Table | None = None
        self._args_packed = False
        # made on the first query (the SQL sandbox's module is a reading command's only)
        self._sql_made: TraceSql | None = None
        # Neuron Explorer tables when the trace is a Neuron profile (see NeuronTables)
        self.neuron: NeuronTables | None = None
        # what the CUDA/HIP graph capture merge did, when this trace is its result
        # (opscope.trace.graphs.merge.attribute)
        self.graph_capture: GraphAttribution | None = None

    def __len__(self) -> int:
        return int(self.events.num_rows)

    def __repr__(self) -> str:
        return f"<Trace {len(self)} events from {', '.join(self.meta.paths) or '?'}>"

    @property
    def device(self) -> DeviceInfo:
        if self._device is None:
            self._device = detect_device(
                self.events,
                self.meta.device_properties,
                self.meta.extra,
                truncated=any("cut short" in w or "ends early" in w for w in self.meta.warnings),
            )
        return self._device

    @property
    def index(self) -> EventIndex:
        """The events as NumPy arrays (:class:`opscope.trace.index.EventIndex`), cached."""
        if self._index is None:
            from opscope.trace.index import EventIndex

            self._index = EventIndex(self.events)
        return self._index

    @property
    def ops(self) -> pa.Table:
        """One row per framework op/annotation/step (:func:`derived.build_ops`), cached."""
        if self._ops is None:
            from opscope.trace.derived import build_ops

            self._ops = build_ops(self.index)
        return self._ops

    @property
    def kernels(self) -> pa.Table:
        """One row per device execution (:func:`derived.build_kernels`), cached."""
        if self._kernels is None:
            from opscope.trace.derived import build_kernels

            self._kernels = build_kernels(self.index)
        return self._kernels

    def derived_built(self) -> tuple[str, ...]:
        """The derived tables (``ops``, ``kernels``) built so far."""
        return tuple(n for n in ("ops", "kernels") if getattr(self, f"_{n}") is not None)

    def drop_derived(self, keep: tuple[str, ...] = ()) -> None:
        """Forget the derived tables not named in ``keep`` (rebuilt when next read): one
        pass of work that reads them is done and the memory is wanted for another."""
        if "ops" not in keep:
            self._ops = None
        if "kernels" not in keep:
            self._kernels = None

    @property
    def args_packed(self) -> bool:
        """Whether ``args`` is kept packed, out of :attr:`events` (:meth:`pack_args`)."""
        return self._args_packed

    def pack_args(self) -> None:
        """Keep the ``args`` text compressed, out of :attr:`events`, for the rest of this
        trace's life (:mod:`opscope.trace.packed`): for a command that analyses the trace once.
        The index reads the column whole first (its shapes and layouts); after that the
        analysis reads ``args`` through the index (``args_text``, ``args_take``), and
        :attr:`events` has no ``args`` column (:meth:`events_with_args` rebuilds it).  At 10M
        events the column goes from about 1 GB to about 70 MB."""
        if self._args_packed or "args" not in self.events.column_names:
            return
        idx = self.index
        _ = idx.arg_values  # the one read of the whole column
        packed = PackedText(self.events.column("args"))
        self.events = self.events.drop_columns(["args"])
        idx.use_packed_args(packed, self.events)
        self._args_packed = True

    def share_codes(self) -> None:
        """Make the string columns of :attr:`events` of the index's codes, one copy where
        there were two (:meth:`EventIndex.share_codes`, about 27 bytes an event less): for a
        command that analyses the trace once.  Each row's strings stay the same; the
        dictionaries' order and chunks do not."""
        self.events = self.index.share_codes()

    def hold_links(self) -> None:
        """Drop the link columns (``parent_id``, ``op_id``, ``launch_id``) from :attr:`events`
        once the index holds them as rows (:meth:`EventIndex.hold_links`, 24 bytes an event
        less): for a command that analyses the trace once.  ``index.link_ids`` and
        :meth:`events_with_args` give the ids back."""
        self.events = self.index.hold_links()

    def compact(self) -> None:
        """The trace held as a command that analyses it once holds it: ``args`` packed
        (:meth:`pack_args`), the string columns of the index's codes (:meth:`share_codes`)
        and the link columns as the index's rows (:meth:`hold_links`).  Every read gives what
        it gave; at 10M events about 1.5 GB less."""
        self.pack_args()
        self.share_codes()
        self.hold_links()
        release_ingest_pool()  # the dropped columns' pages

    def events_with_args(self) -> pa.Table:
        """The event table with every column: ``args`` unpacked again when it is packed, and
        the link columns the index holds (:meth:`hold_links`) made again."""
        events = self.events
        held = set(self._index.held_links()) if self._index is not None else set()
        if self._args_packed:
            held.add("args")
        for at, spec in enumerate(EVENT_SCHEMA):  # in the schema's order: each at its place
            if spec.name not in held:
                continue
            col = (
                self.index.args_column() if spec.name == "args" else self.index.link_ids(spec.name)
            )
            events = events.add_column(at, spec, col)
        return events

    def column(self, name: str) -> list[Any]:
        """A column as a Python list (dictionary columns decoded)."""
        if name == "args" and self._args_packed:
            return list(self.index.args_column().to_pylist())
        if name not in self.events.column_names and name in self.index.held_links():
            return list(self.index.link_ids(name).to_pylist())
        col = self.events.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        return list(col.to_pylist())

    def _sql_sources(self) -> dict[str, TableSource]:
        """The tables SQL sees, by name, each as the function that builds it."""
        sources: dict[str, TableSource] = {
            "events": self.events_with_args,
            "ops": lambda: self.ops,
            "kernels": lambda: self.kernels,
        }
        if self.neuron is not None:
            tables = self.neuron.tables
            for sql_name, table in self.neuron.sql_names().items():
                sources[sql_name] = functools.partial(tables.__getitem__, table)
        return sources

    @property
    def sql_tables(self) -> list[str]:
        """The names SQL knows: ``events``, ``ops``, ``kernels`` and any ``neuron_*``."""
        return list(self._sql_sources())

    def sql_table(self, name: str) -> pa.Table:
        """The table SQL knows as ``name`` (one of :attr:`sql_tables`; built on first use)."""
        return self._sql_sources()[name]()

    def query(
        self,
        query: str,
        *,
        limit: int | None,
        offset: int = 0,
        timeout_s: float | None = None,
        allow_external: bool = False,
    ) -> SqlResult:
        """Run SQL (DuckDB) over the trace's tables in the sandbox of
        :mod:`opscope.trace.sqlsafe` and return one page of rows: at most ``limit`` rows
        (``None``: all) from row ``offset``, fetched without computing the rest.

        A query that is not one read-only SELECT, that DuckDB rejects, or that runs past
        ``timeout_s`` seconds raises :class:`~opscope.errors.OpscopeError` in one line.
        ``allow_external=True`` lifts the sandbox (a separate, unlocked connection, no
        statement checks): DuckDB's file functions, ``COPY ... TO`` and the rest work.
        """
        return self._sql().run(
            query,
            limit=limit,
            offset=offset,
            timeout_s=timeout_s,
            allow_external=allow_external,
        )

    def sql(
        self, query: str, *, allow_external: bool = False, timeout_s: float | None = None
    ) -> pa.Table:
        """Run SQL (DuckDB) over ``events``, ``ops`` and ``kernels`` (and the ``neuron_*``
        tables of a Neuron profile); returns all its rows as an Arrow table.

        Sandboxed like :meth:`query` (one read-only SELECT, no file or network access) unless
        ``allow_external``.  A refused query, or one DuckDB rejects, raises
        :class:`~opscope.errors.OpscopeError` with the reason.
        """
        return self.query(
            query, limit=None, timeout_s=timeout_s, allow_external=allow_external
        ).table

    def sql_df(self, query: str) -> Any:
        """Like :meth:`sql`, as a pandas DataFrame (needs pandas, which opscope does not)."""
        import importlib.util

        if importlib.util.find_spec("pandas") is None:
            raise OpscopeError(
                "Trace.sql_df needs pandas (pip install pandas); Trace.sql returns Arrow"
            )
        return self.sql(query).to_pandas()

    def close(self) -> None:
        """Release the SQL connections (the tables stay; a later query opens them again)."""
        if self._sql_made is not None:
            self._sql_made.close()

    def _sql(self) -> TraceSql:
        """The trace's SQL connections (:class:`~opscope.trace.sqlsafe.TraceSql`), made on the
        first query: they connect then, and a trace never queried imports none of it."""
        with _SQL_LOCK:
            if self._sql_made is None:
                from opscope.trace.sqlsafe import TraceSql

                self._sql_made = TraceSql(self._sql_sources)
            return self._sql_made
