"""Kineto / Chrome-trace JSON -> event-table columns.

One pass over ``traceEvents``.  Timed events (``ph`` X, and B/E pairs) become rows; metadata
events (``ph`` M) name processes and threads; flow events (``ph`` s/f/t: ``ac2g``,
``async_cpu_to_gpu``) are kept aside to link runtime calls to device work when a device event
carries no ``correlation`` argument.  Everything that is skipped is counted by reason.

Times: Kineto writes ``ts``/``dur`` in microseconds with up to three decimals, relative to
``baseTimeNanoseconds`` when that key is present (torch >= 2.0) and as Unix-epoch microseconds
before.  Nanoseconds are recovered exactly: ``round(ts * 1000)`` is exact while ``ts`` has at
most 15 significant digits; longer values (epoch microseconds with a nanosecond part) are read
from the text by :mod:`opscope.trace.readers` before the JSON parser can round them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from opscope.trace.schema import classify

# Arguments lifted into their own columns; the rest stays in ``args`` as JSON text.
_CORRELATION_KEYS = ("correlation", "correlation id", "correlationId")
_EXTERNAL_KEYS = ("External id", "external id", "external_id")


@dataclass
class Flow:
    """One end of a flow arrow (``ph`` s or f)."""

    id: int
    cat: str
    phase: str
    pid: str
    tid: str
    ts_ns: int
    binding_enclosing: bool


@dataclass
class RawColumns:
    """Columns of timed events before linking (plain lists, one entry per row)."""

    source: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    cat: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    pid: list[str] = field(default_factory=list)
    tid: list[str] = field(default_factory=list)
    lane: list[str] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)
    dur_ns: list[int] = field(default_factory=list)
    correlation: list[int | None] = field(default_factory=list)
    external_id: list[int | None] = field(default_factory=list)
    args: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass
class KinetoParse:
    """What one Kineto document holds, ready for linking."""

    columns: RawColumns
    flows: list[Flow]
    meta: dict[str, Any]
    process_names: dict[str, str]
    thread_names: dict[tuple[str, str], str]
    skipped: Counter[str]


def _to_ns(value: Any) -> int:
    """Microseconds (number or text, as Kineto writes them) -> integer nanoseconds, exactly."""
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):
        return round(value * 1000)
    if isinstance(value, str):
        text = value.strip()
        neg = text.startswith("-")
        if neg:
            text = text[1:]
        whole, _, frac = text.partition(".")
        if not (whole.isdigit() or (whole == "" and frac.isdigit())) or (
            frac and not frac.isdigit()
        ):
            return round(float(value) * 1000)  # exponent notation and the like
        frac3 = (frac + "000")[:3]
        ns = int(whole or "0") * 1000 + int(frac3)
        if len(frac) > 3 and frac[3] >= "5":
            ns += 1
        return -ns if neg else ns
    raise TypeError(f"not a time: {value!r}")


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        v = int(value)
        return v if -(2**63) <= v < 2**63 else None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _dumps_args(args: dict[str, Any]) -> str:
    try:
        return orjson.dumps(args).decode()
    except TypeError:
        # integers beyond 64 bits (seen in real traces): keep them as text
        return orjson.dumps(args, default=str).decode()
    except orjson.JSONEncodeError:
        import json

        return json.dumps(args, default=str)


def parse_kineto(doc: Any) -> KinetoParse:
    """Parse a decoded Kineto document (object form or bare array form)."""
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

    base_ns = _as_int(meta.get("baseTimeNanoseconds")) or 0
    cols = RawColumns()
    flows: list[Flow] = []
    process_names: dict[str, str] = {}
    thread_names: dict[tuple[str, str], str] = {}
    skipped: Counter[str] = Counter()
    open_begins: dict[tuple[str, str], list[dict[str, Any]]] = {}

    c_source, c_kind, c_cat, c_name = cols.source, cols.kind, cols.cat, cols.name
    c_pid, c_tid, c_lane = cols.pid, cols.tid, cols.lane
    c_start, c_dur, c_corr, c_ext, c_args = (
        cols.start_ns,
        cols.dur_ns,
        cols.correlation,
        cols.external_id,
        cols.args,
    )
    class_cache: dict[tuple[str, str], tuple[str, str]] = {}

    def add(ev: dict[str, Any], ts_ns: int, dur_ns: int) -> None:
        cat = ev.get("cat")
        cat = cat if isinstance(cat, str) else ""
        name = ev.get("name")
        name = name if isinstance(name, str) else str(name)
        key = (cat, name)
        cls = class_cache.get(key)
        if cls is None:
            cls = classify(cat, name)
            class_cache[key] = cls
        source, kind = cls
        pid = str(ev.get("pid", ""))
        tid = str(ev.get("tid", ""))
        args = ev.get("args")
        corr: int | None = None
        ext: int | None = None
        if isinstance(args, dict) and args:
            for k in _CORRELATION_KEYS:
                if k in args:
                    corr = _as_int(args[k])
                    break
            for k in _EXTERNAL_KEYS:
                if k in args:
                    ext = _as_int(args[k])
                    break
            args_text: str | None = _dumps_args(args)
        else:
            args_text = None
        if source == "device":
            lane = f"stream {tid}"
        elif source == "other":
            lane = tid
        else:
            lane = f"thread {tid}"
        c_source.append(source)
        c_kind.append(kind)
        c_cat.append(cat)
        c_name.append(name)
        c_pid.append(pid)
        c_tid.append(tid)
        c_lane.append(lane)
        c_start.append(base_ns + ts_ns)
        c_dur.append(dur_ns)
        c_corr.append(corr)
        c_ext.append(ext)
        c_args.append(args_text)

    for ev in events:
        if not isinstance(ev, dict):
            skipped["not an object"] += 1
            continue
        ph = ev.get("ph")
        try:
            if ph == "X":
                if "ts" not in ev:
                    skipped["no ts"] += 1
                    continue
                dur = ev.get("dur", 0)
                dur_ns = _to_ns(dur) if dur is not None else 0
                if dur_ns < 0:
                    skipped["negative duration"] += 1
                    continue
                add(ev, _to_ns(ev["ts"]), dur_ns)
            elif ph == "M":
                name = ev.get("name")
                a = ev.get("args") or {}
                label = a.get("name") if isinstance(a, dict) else None
                if name == "process_name" and label is not None:
                    process_names[str(ev.get("pid", ""))] = str(label)
                elif name == "thread_name" and label is not None:
                    thread_names[(str(ev.get("pid", "")), str(ev.get("tid", "")))] = str(label)
            elif ph in ("s", "f", "t"):
                fid = _as_int(ev.get("id"))
                if fid is None or "ts" not in ev:
                    skipped["flow without id or ts"] += 1
                    continue
                flows.append(
                    Flow(
                        id=fid,
                        cat=str(ev.get("cat", "")),
                        phase=str(ph),
                        pid=str(ev.get("pid", "")),
                        tid=str(ev.get("tid", "")),
                        ts_ns=base_ns + _to_ns(ev["ts"]),
                        binding_enclosing=ev.get("bp") == "e",
                    )
                )
            elif ph == "B":
                open_begins.setdefault((str(ev.get("pid")), str(ev.get("tid"))), []).append(ev)
            elif ph == "E":
                stack = open_begins.get((str(ev.get("pid")), str(ev.get("tid"))))
                if not stack:
                    skipped["end without begin"] += 1
                    continue
                begin = stack.pop()
                start = _to_ns(begin["ts"])
                merged = dict(begin)
                if isinstance(ev.get("args"), dict) and ev["args"]:
                    merged["args"] = {**(begin.get("args") or {}), **ev["args"]}
                add(merged, start, max(0, _to_ns(ev["ts"]) - start))
            elif ph in ("i", "I", "C", "b", "e", "n", "P", "O", "N", "D"):
                skipped[f"untimed event (ph {ph})"] += 1
            else:
                skipped["unknown phase"] += 1
        except (TypeError, ValueError, KeyError, OverflowError):
            skipped["malformed fields"] += 1
    for stack in open_begins.values():
        if stack:
            skipped["begin without end"] += len(stack)

    return KinetoParse(
        columns=cols,
        flows=flows,
        meta=meta,
        process_names=process_names,
        thread_names=thread_names,
        skipped=skipped,
    )
