"""Converted runs merged in file order, then classified: a :class:`KinetoBuilder` and
:func:`parse_kineto` for an already decoded document."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.kineto.classify import classify_table
from opscope.trace.kineto.columns import FLOW_SCHEMA, RAW_SCHEMA, KinetoParse, clean_str
from opscope.trace.kineto.convert import RunParts, convert_run, timed_batch
from opscope.trace.rows import DictRows, as_int


def _shifted(col: pa.ChunkedArray, by: int) -> pa.ChunkedArray:
    """An int64 column plus ``by`` as Arrow's ``add`` gives it (one chunk, wrapping on
    overflow); in NumPy where no value is null."""
    if col.null_count:
        return pc.add(col, pa.scalar(by, pa.int64()))
    values = np.asarray(col.to_numpy(), dtype=np.int64) + np.int64(by)
    return pa.chunked_array([pa.array(values, pa.int64())] if len(values) else [], pa.int64())


@dataclass
class KinetoBuilder:
    """Accumulates runs of events; :meth:`finish` returns the :class:`KinetoParse`."""

    chunks: list[pa.RecordBatch] = field(default_factory=list)
    flow_chunks: list[pa.RecordBatch] = field(default_factory=list)
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    open_begins: dict[tuple[str, str], list[tuple[dict[str, Any], int]]] = field(
        default_factory=dict
    )

    def add(self, events: list[Any], strict: bool = False) -> None:
        """Convert one run of decoded events.

        ``strict``: raise :class:`~.times.NeedsQuoting` (before changing any state) when the run's
        timestamps need decoding from text; the caller decodes the run again with them quoted.
        """
        if events:
            self.merge(convert_run(events, strict))

    def merge(self, parts: RunParts) -> None:
        """Apply one converted run, in file order."""
        if not parts.count:
            return
        self.skipped["not an object"] += parts.dropped
        if parts.timed is not None:
            for reason, c in parts.timed_skips:
                self.skipped[reason] += c
            self.chunks.append(parts.timed)
        merged: list[dict[str, Any]] = []
        merged_start: list[int] = []
        merged_dur: list[int] = []
        reasons = iter(parts.reasons)
        nxt = next(reasons, None)
        for i, p, ev, ts, ts_bad in parts.others:
            while nxt is not None and nxt[0] < i:
                self.skipped[nxt[1]] += nxt[2]
                nxt = next(reasons, None)
            if p == "M":
                self._metadata(ev)
            elif p == "B":
                if ts_bad:
                    self.skipped["begin without a usable ts"] += 1
                    continue
                key = (clean_str(ev.get("pid"), ""), clean_str(ev.get("tid"), ""))
                self.open_begins.setdefault(key, []).append((ev, ts))
            else:  # "E"
                key = (clean_str(ev.get("pid"), ""), clean_str(ev.get("tid"), ""))
                stack = self.open_begins.get(key)
                if not stack:
                    self.skipped["end without begin"] += 1
                    continue
                if ts_bad:
                    self.skipped["end without a usable ts"] += 1
                    continue
                begin, start = stack.pop()
                m = dict(begin)
                eargs = ev.get("args")
                if type(eargs) is dict and eargs:
                    bargs = begin.get("args")
                    m["args"] = {**(bargs if type(bargs) is dict else {}), **eargs}
                merged.append(m)
                merged_start.append(start)
                merged_dur.append(max(0, ts - start))
        while nxt is not None:
            self.skipped[nxt[1]] += nxt[2]
            nxt = next(reasons, None)
        if merged:
            batch, skips = timed_batch(
                DictRows(merged),
                np.asarray(merged_start, dtype=np.int64),
                np.zeros(len(merged), dtype=bool),
                np.asarray(merged_dur, dtype=np.int64),
            )
            for reason, c in skips:
                self.skipped[reason] += c
            self.chunks.append(batch)
        if parts.flows is not None:
            if parts.flows_bad:
                self.skipped["flow without id or ts"] += parts.flows_bad
            self.flow_chunks.append(parts.flows)

    def _metadata(self, ev: dict[str, Any]) -> None:
        name = ev.get("name")  # one of convert.NAMED_METADATA, else nothing to keep
        a = ev.get("args")
        label = a.get("name") if type(a) is dict else None
        if label is None:
            return
        pid = clean_str(ev.get("pid"), "")
        if name == "process_name":
            self.process_names[pid] = clean_str(label, "")
        elif name == "thread_name":
            self.thread_names[(pid, clean_str(ev.get("tid"), ""))] = clean_str(label, "")

    def finish(self, meta: dict[str, Any]) -> KinetoParse:
        """Apply the document's base time, classify and lay out lanes."""
        for stack in self.open_begins.values():
            if stack:
                self.skipped["begin without end"] += len(stack)
        self.open_begins.clear()
        base = meta.get("baseTimeNanoseconds")
        base_ns = as_int(base) or 0
        # kept in runs: combining would hold the whole table twice at the peak
        table = pa.Table.from_batches(self.chunks, schema=RAW_SCHEMA)
        self.chunks.clear()
        flows = pa.Table.from_batches(self.flow_chunks, schema=FLOW_SCHEMA).combine_chunks()
        self.flow_chunks.clear()
        if base_ns:
            table = table.set_column(
                table.schema.get_field_index("start_ns"),
                "start_ns",
                _shifted(table.column("start_ns"), base_ns),
            )
            flows = flows.set_column(5, "ts_ns", _shifted(flows.column("ts_ns"), base_ns))
        table = classify_table(table)
        skipped = Counter({k: v for k, v in self.skipped.items() if v})
        return KinetoParse(
            events=table,
            flows=flows,
            meta=meta,
            process_names=self.process_names,
            thread_names=self.thread_names,
            skipped=skipped,
        )


def parse_kineto(doc: Any) -> KinetoParse:
    """Parse an already decoded Kineto document (object form or bare array form)."""
    if isinstance(doc, dict):
        events = doc.get("traceEvents")
        if events is None:
            events = []
        meta = {k: v for k, v in doc.items() if k != "traceEvents"}
    elif isinstance(doc, list):
        events, meta = doc, {}
    else:
        raise ValueError("the JSON is neither a trace object nor an array of events")
    if not isinstance(events, list):
        raise ValueError("'traceEvents' is not a list")
    builder = KinetoBuilder()
    builder.add(events)
    return builder.finish(meta)
