"""Kineto / Chrome-trace events -> event-table columns (Arrow), one run of events at a time.

Contract: :class:`KinetoBuilder` is fed decoded runs of ``traceEvents`` (lists of dicts, see
:mod:`opscope.trace.jsonstream`) and returns, from :meth:`KinetoBuilder.finish`, a
:class:`KinetoParse`: the timed events as an Arrow table (``cat``, ``name``, ``pid``, ``tid``,
``source``, ``kind``, ``lane``, ``start_ns``, ``dur_ns``, ``correlation``, ``external_id``,
``args``), the flow endpoints, process/thread names and what was skipped, by reason.

* Timed events: ``ph`` X, and B/E pairs (matched per pid/tid, innermost first).
* Metadata events (``ph`` M) name processes and threads.
* Flow events (``ph`` s/f/t) are kept aside for linking (:mod:`opscope.trace.link`).
* Everything else is counted in ``skipped`` with the reason (instant events, counters, events
  without a usable ``ts``, negative durations, non-objects, ...).

Times: Kineto writes ``ts``/``dur`` in microseconds with up to three decimals, relative to
``baseTimeNanoseconds`` when that key is present (torch >= 2.0) and as Unix-epoch microseconds
before.  Nanoseconds are exact: integers are multiplied; below 2**43 µs (about 100 days) doubles
are closer than 1 ns, so the whole microseconds and the fraction, taken apart, give the written
three decimals back; larger values (Unix-epoch microseconds with a nanosecond part) are decoded
from the text as strings (the caller re-decodes a run with them quoted, see
:func:`has_long_float_ts`) and converted digit by digit.  Times are never rounded to µs.

Speed: the per-field work is done by Arrow/NumPy over whole runs; ``args`` are serialised with
one ``orjson.dumps`` call per run (see :func:`_dump_args`).  Any run that does not fit the fast
path (mixed types, huge integers, strings where numbers belong) falls back, per field, to exact
per-value Python code.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.schema import (
    CATEGORY_MAP,
    COMM_KERNEL_MARKERS,
    KINDS,
    SOURCES,
    SYNC_RUNTIME_MARKERS,
)

# Arguments lifted into their own columns (they also stay in ``args``).
_CORRELATION_KEYS = ("correlation", "correlation id", "correlationId")
_EXTERNAL_KEYS = ("External id", "external id", "external_id")
_FLOW_CATS = frozenset(("ac2g", "async_cpu_to_gpu", "async_gpu", "async"))
_UNTIMED = frozenset(("i", "I", "C", "b", "e", "n", "P", "O", "N", "D", "R", "(", ")"))
_INT64_MAX = 2**63 - 1
_US_LIMIT = 9_000_000_000_000_000  # |µs| * 1000 must stay inside int64
# Below 2**43 µs the doubles are less than 1 ns apart, so the double nearest to a value written
# with three decimals gives those decimals back exactly; above it the text must be read.
_LONG_FLOAT_US = float(2**43)
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError)


def to_ns(value: Any) -> int:
    """Microseconds (number or text, as Kineto writes them) -> integer nanoseconds, exactly."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a time")
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("not a finite time")
        # whole and fraction apart: both steps are exact, where ``round(value * 1000)`` can
        # miss by a nanosecond once value * 1000 passes 2**52
        floor = math.floor(value)
        return floor * 1000 + round((value - floor) * 1000)
    if isinstance(value, str):
        text = value.strip()
        neg = text.startswith("-")
        if neg:
            text = text[1:]
        whole, _, frac = text.partition(".")
        if not whole.isascii() or not frac.isascii():
            raise ValueError(f"not a time: {value!r}")
        if not (whole.isdigit() or (whole == "" and frac.isdigit())) or (
            frac and not frac.isdigit()
        ):
            return to_ns(float(value))  # exponent notation and the like
        frac3 = (frac + "000")[:3]
        ns = int(whole or "0") * 1000 + int(frac3)
        if len(frac) > 3 and frac[3] >= "5":
            ns += 1
        return -ns if neg else ns
    raise TypeError(f"not a time: {value!r}")


def as_int(value: Any) -> int | None:
    """An int64 from an integer, a digit string or an integral float; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(2**63) <= value <= _INT64_MAX else None
    if isinstance(value, str):
        t = value.strip()
        if t.lstrip("-").isdigit() and t.isascii():
            v = int(t)
            return v if -(2**63) <= v <= _INT64_MAX else None
        return None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return None


# -- per-field conversion: Arrow over the whole run, exact Python per value when that fails --


def _clean_str(v: Any, missing: str) -> str:
    if v is None:
        return missing
    s = v if type(v) is str else str(v)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from \ud800-style escapes
        s = s.encode("utf-8", "replace").decode("utf-8")
    return s


def _str_array(values: list[Any], missing: str = "") -> pa.Array:
    try:
        arr = pa.array(values, pa.string())
        return arr.fill_null(missing) if arr.null_count else arr
    except (*_ARROW_ERRORS, UnicodeEncodeError):
        return pa.array([_clean_str(v, missing) for v in values], pa.string())


def _id_str_array(values: list[Any]) -> pa.Array:
    """pid/tid as text (traces use integers and strings alike)."""
    arr = _infer(values)
    if arr is not None and (
        pa.types.is_integer(arr.type) or pa.types.is_string(arr.type) or pa.types.is_null(arr.type)
    ):
        arr = arr.cast(pa.string())
        return arr.fill_null("") if arr.null_count else arr
    return _str_array(values)


def _infer(values: list[Any]) -> pa.Array | None:
    try:
        return pa.array(values)
    except _ARROW_ERRORS:
        return None


def _to_np_int(arr: pa.Array) -> np.ndarray | None:
    """int64 values (nulls as 0), or None when they do not fit (uint64 beyond int64)."""
    if pa.types.is_null(arr.type):
        return np.zeros(len(arr), dtype=np.int64)
    if arr.type != pa.int64():
        try:
            arr = arr.cast(pa.int64())
        except _ARROW_ERRORS:
            return None
    return np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _null_mask(arr: pa.Array, missing_ok: bool) -> np.ndarray:
    if missing_ok or not arr.null_count:
        return np.zeros(len(arr), dtype=bool)
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)


class NeedsQuoting(Exception):
    """A run holds float timestamps a double cannot carry: decode it again, quoted."""


def _times_ns(
    values: list[Any], missing_ok: bool, strict: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(ns, bad) for µs values; ``bad`` marks missing (unless ``missing_ok``) or unreadable.

    ``strict``: raise :class:`NeedsQuoting` rather than convert a float at or above 2**43 µs.
    """
    n = len(values)
    # let Arrow infer the type: asked for int64 it would silently truncate floats
    arr = _infer(values)
    if arr is not None and (pa.types.is_integer(arr.type) or pa.types.is_null(arr.type)):
        a = _to_np_int(arr)
        if a is not None and np.abs(a).max(initial=0) < _US_LIMIT:
            return a * 1000, _null_mask(arr, missing_ok)
    elif arr is not None and pa.types.is_floating(arr.type):
        f = arr.fill_null(0.0).to_numpy(zero_copy_only=False)
        finite = np.isfinite(f)
        if finite.all() and np.abs(f).max(initial=0.0) < _LONG_FLOAT_US:
            whole = np.floor(f)
            ns = whole.astype(np.int64) * 1000 + np.rint((f - whole) * 1000.0).astype(np.int64)
            return ns, _null_mask(arr, missing_ok)
        if strict and finite.all():
            raise NeedsQuoting
    out = np.zeros(n, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            bad[i] = not missing_ok
            continue
        try:
            ns = to_ns(v)
        except (TypeError, ValueError, OverflowError):
            bad[i] = True
            continue
        if -_INT64_MAX <= ns <= _INT64_MAX:
            out[i] = ns
        else:
            bad[i] = True
    return out, bad


def _arg_ints(args: list[Any], keys: tuple[str, ...], blob: bytes) -> pa.Array:
    """The first of ``keys`` present in each ``args`` dict, as int64 (null when absent/bad).

    ``blob`` is the run's serialised args: a spelling that never occurs in it costs no pass.
    """
    out: pa.Array | None = None
    for i, k in enumerate(keys):
        if i and f'"{k}"'.encode() not in blob:
            continue
        vals = [a.get(k) if type(a) is dict else None for a in args]
        inferred = _infer(vals)
        ints = None
        if inferred is not None and (
            pa.types.is_integer(inferred.type) or pa.types.is_null(inferred.type)
        ):
            ints = _to_np_int(inferred)
        if ints is not None and inferred is not None:
            arr = pa.array(ints, pa.int64(), mask=_null_mask(inferred, False))
        else:
            arr = pa.array([as_int(v) for v in vals], pa.int64())
        if i:
            # a later spelling counts only where no earlier one is present at all
            present = pa.array([type(a) is dict and any(p in a for p in keys[:i]) for a in args])
            arr = pc.if_else(present, pa.scalar(None, pa.int64()), arr)
        out = arr if out is None else pc.coalesce(out, arr)
    assert out is not None
    return out


_SENTINEL = "\x00\x01opscope-args-split\x01\x00"
_SENTINEL_SEP = b',"\\u0000\\u0001opscope-args-split\\u0001\\u0000"'


def _dump_one(a: Any) -> str:
    try:
        return orjson.dumps(a).decode()
    except (TypeError, orjson.JSONEncodeError):
        # integers beyond 64 bits, lone surrogates: the standard library writes them
        return json.dumps(a, default=str, ensure_ascii=True)


def _dump_args(args: list[Any]) -> tuple[pa.Array, bytes]:
    """``args`` dicts as JSON text (null for absent or empty args), exactly as decoded.

    One ``orjson.dumps`` over the whole run, with a sentinel string between the items, then one
    split: the per-item call overhead is what dominated.  The sentinel holds control characters
    that orjson escapes; if a trace ever contains it, the piece count is off and we dump item
    by item instead.
    """
    n = len(args)
    keep = [type(a) is dict and len(a) > 0 for a in args]
    vals = [a if k else None for a, k in zip(args, keep, strict=True)]
    mask = np.fromiter(keep, dtype=bool, count=n)
    try:
        inter: list[Any] = [_SENTINEL] * (2 * n)
        inter[::2] = vals
        big = orjson.dumps(inter)
        del inter
        body = big[1:-1]
        del big
        # [a1,"S",a2,"S",...,an,"S"]: drop the last separator, split on the others
        parts = (
            body[: -len(_SENTINEL_SEP)].split(_SENTINEL_SEP + b",")
            if body.endswith(_SENTINEL_SEP)
            else []
        )
        del body
        if len(parts) == n:
            lengths = np.fromiter(map(len, parts), dtype=np.int64, count=n)
            lengths[~mask] = 0
            offsets = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            blob = b"".join(p for p, k in zip(parts, keep, strict=True) if k)
            validity = pa.array(mask).buffers()[1] if not mask.all() else None
            arr = pa.LargeStringArray.from_buffers(
                n,
                pa.py_buffer(offsets),
                pa.py_buffer(blob),
                validity,
                int(n - mask.sum()),
            ).cast(pa.string())
            return arr, blob
    except (TypeError, orjson.JSONEncodeError):
        pass
    texts = [_dump_one(a) if k else None for a, k in zip(args, keep, strict=True)]
    return pa.array(texts, pa.string()), "".join(t for t in texts if t).encode()


@dataclass
class KinetoParse:
    """What one Kineto document holds, ready for linking."""

    events: pa.Table  # see RAW_COLUMNS
    flows: pa.Table  # id, ph, cat, pid, tid, ts_ns
    meta: dict[str, Any]
    process_names: dict[str, str]
    thread_names: dict[tuple[str, str], str]
    skipped: Counter[str]

    def __len__(self) -> int:
        return int(self.events.num_rows)


RAW_COLUMNS = (
    "cat",
    "name",
    "pid",
    "tid",
    "start_ns",
    "dur_ns",
    "correlation",
    "external_id",
    "args",
)


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

        ``strict``: raise :class:`NeedsQuoting` (before changing any state) when the run's
        timestamps need decoding from text; the caller decodes the run again with them quoted.
        """
        if not events:
            return
        dropped = 0
        if not all(type(e) is dict for e in events):
            before = len(events)
            events = [e for e in events if type(e) is dict]
            dropped = before - len(events)
        n = len(events)
        ts_all, ts_bad = _times_ns([e.get("ts") for e in events], missing_ok=False, strict=strict)
        self.skipped["not an object"] += dropped
        if n == 0:
            return
        ph_arr = _str_array([e.get("ph") for e in events], "")
        is_x = np.asarray(pc.equal(ph_arr, "X").to_numpy(zero_copy_only=False), dtype=bool)
        if is_x.all():
            self._timed(events, ts_all, ts_bad, None)
            return
        x_rows = np.flatnonzero(is_x)
        if len(x_rows):
            self._timed([events[i] for i in x_rows.tolist()], ts_all[x_rows], ts_bad[x_rows], None)
        ph = ph_arr.to_pylist()
        flow_rows: list[int] = []
        merged: list[dict[str, Any]] = []
        merged_start: list[int] = []
        merged_dur: list[int] = []
        for i in np.flatnonzero(~is_x).tolist():
            ev = events[i]
            p = ph[i]
            if p in ("s", "f", "t"):
                flow_rows.append(i)
            elif p == "M":
                self._metadata(ev)
            elif p == "B":
                if ts_bad[i]:
                    self.skipped["begin without a usable ts"] += 1
                    continue
                key = (_clean_str(ev.get("pid"), ""), _clean_str(ev.get("tid"), ""))
                self.open_begins.setdefault(key, []).append((ev, int(ts_all[i])))
            elif p == "E":
                key = (_clean_str(ev.get("pid"), ""), _clean_str(ev.get("tid"), ""))
                stack = self.open_begins.get(key)
                if not stack:
                    self.skipped["end without begin"] += 1
                    continue
                if ts_bad[i]:
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
                merged_dur.append(max(0, int(ts_all[i]) - start))
            elif p in _UNTIMED:
                self.skipped[f"untimed event (ph {p})"] += 1
            else:
                self.skipped["unknown phase"] += 1
        if merged:
            self._timed(
                merged,
                np.asarray(merged_start, dtype=np.int64),
                np.zeros(len(merged), dtype=bool),
                np.asarray(merged_dur, dtype=np.int64),
            )
        if flow_rows:
            rows = np.asarray(flow_rows, dtype=np.int64)
            self._flows([events[i] for i in flow_rows], ts_all[rows], ts_bad[rows])

    def _metadata(self, ev: dict[str, Any]) -> None:
        name = ev.get("name")
        a = ev.get("args")
        label = a.get("name") if type(a) is dict else None
        if label is None:
            return
        pid = _clean_str(ev.get("pid"), "")
        if name == "process_name":
            self.process_names[pid] = _clean_str(label, "")
        elif name == "thread_name":
            self.thread_names[(pid, _clean_str(ev.get("tid"), ""))] = _clean_str(label, "")

    def _timed(
        self,
        events: list[dict[str, Any]],
        start: np.ndarray,
        bad_ts: np.ndarray,
        dur_override: np.ndarray | None,
    ) -> None:
        if dur_override is None:
            dur, bad_dur = _times_ns([e.get("dur") for e in events], missing_ok=True)
        else:
            dur, bad_dur = dur_override, np.zeros(len(events), dtype=bool)
        neg = (dur < 0) & ~bad_dur
        bad = bad_ts | bad_dur | neg
        args = [e.get("args") for e in events]
        args_text, blob = _dump_args(args)
        batch = pa.record_batch(
            [
                _str_array([e.get("cat") for e in events]),
                _str_array([e.get("name") for e in events]),
                _id_str_array([e.get("pid") for e in events]),
                _id_str_array([e.get("tid") for e in events]),
                pa.array(start, pa.int64()),
                pa.array(dur, pa.int64()),
                _arg_ints(args, _CORRELATION_KEYS, blob),
                _arg_ints(args, _EXTERNAL_KEYS, blob),
                args_text,
            ],
            names=list(RAW_COLUMNS),
        )
        if bad.any():
            missing = np.fromiter(("ts" not in e for e in events), dtype=bool, count=len(events))
            self.skipped["no ts"] += int((bad_ts & missing).sum())
            self.skipped["unreadable ts or dur"] += int(((bad_ts & ~missing) | bad_dur).sum())
            self.skipped["negative duration"] += int((neg & ~bad_ts).sum())
            batch = batch.filter(pa.array(~bad))
        self.chunks.append(batch)

    def _flows(self, flows: list[dict[str, Any]], ts: np.ndarray, bad: np.ndarray) -> None:
        cats = _str_array([e.get("cat") for e in flows])
        keep = np.asarray(
            pc.is_in(cats, pa.array(sorted(_FLOW_CATS))).to_numpy(zero_copy_only=False),
            dtype=bool,
        )
        if not keep.any():
            return
        flows = [f for f, k in zip(flows, keep.tolist(), strict=True) if k]
        ts, bad = ts[keep], bad[keep].copy()
        ids = []
        for e in flows:
            v = e.get("id")
            if v is None:
                v = e.get("bind_id")
            ids.append(as_int(v))
        ida = pa.array(ids, pa.int64())
        bad |= np.asarray(ida.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        batch = pa.record_batch(
            [
                ida,
                _str_array([e.get("ph") for e in flows]),
                _str_array([e.get("cat") for e in flows]),
                _id_str_array([e.get("pid") for e in flows]),
                _id_str_array([e.get("tid") for e in flows]),
                pa.array(ts, pa.int64()),
            ],
            names=["id", "ph", "cat", "pid", "tid", "ts_ns"],
        )
        if bad.any():
            self.skipped["flow without id or ts"] += int(bad.sum())
            batch = batch.filter(pa.array(~bad))
        self.flow_chunks.append(batch)

    def finish(self, meta: dict[str, Any]) -> KinetoParse:
        """Apply the document's base time, classify and lay out lanes."""
        for stack in self.open_begins.values():
            if stack:
                self.skipped["begin without end"] += len(stack)
        self.open_begins.clear()
        base = meta.get("baseTimeNanoseconds")
        base_ns = as_int(base) or 0
        # kept in runs: combining would hold the whole table twice at the peak
        table = pa.Table.from_batches(self.chunks, schema=_RAW_SCHEMA)
        self.chunks.clear()
        flows = pa.Table.from_batches(self.flow_chunks, schema=_FLOW_SCHEMA).combine_chunks()
        self.flow_chunks.clear()
        if base_ns:
            table = table.set_column(
                table.schema.get_field_index("start_ns"),
                "start_ns",
                pc.add(table.column("start_ns"), pa.scalar(base_ns, pa.int64())),
            )
            flows = flows.set_column(
                5, "ts_ns", pc.add(flows.column("ts_ns"), pa.scalar(base_ns, pa.int64()))
            )
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


_RAW_SCHEMA = pa.schema(
    [
        ("cat", pa.string()),
        ("name", pa.string()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("start_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("correlation", pa.int64()),
        ("external_id", pa.int64()),
        ("args", pa.string()),
    ]
)
_FLOW_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ph", pa.string()),
        ("cat", pa.string()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("ts_ns", pa.int64()),
    ]
)


def _dict_parts(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """(indices, dictionary values) of a string column."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    enc = col.dictionary_encode()
    idx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int32)
    return idx, enc.dictionary.to_pylist()


def _dictionary(idx: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), pa.array(values, pa.string()))


def classify_table(table: pa.Table) -> pa.Table:
    """Add ``source``, ``kind`` and ``lane`` (dictionary columns) from ``cat``/``name``/``tid``.

    The same rules as :func:`opscope.trace.schema.classify`, evaluated once per distinct
    category and name rather than once per event.
    """
    n = table.num_rows
    cat_idx, cats = _dict_parts(table.column("cat"))
    name_idx, names = _dict_parts(table.column("name"))
    tid_idx, tids = _dict_parts(table.column("tid"))
    src_ids = {s: i for i, s in enumerate(SOURCES)}
    kind_ids = {k: i for i, k in enumerate(KINDS)}
    cat_src = np.empty(len(cats), dtype=np.int32)
    cat_kind = np.empty(len(cats), dtype=np.int32)
    for i, c in enumerate(cats):
        s, k = CATEGORY_MAP.get(c.lower(), ("other", "other"))
        cat_src[i] = src_ids[s]
        cat_kind[i] = kind_ids[k]
    step_name = np.fromiter((nm.startswith("ProfilerStep#") for nm in names), bool, len(names))
    comm_name = np.fromiter(
        (any(m in nm.lower() for m in COMM_KERNEL_MARKERS) for nm in names), bool, len(names)
    )
    sync_name = np.fromiter(
        (any(m in nm for m in SYNC_RUNTIME_MARKERS) for nm in names), bool, len(names)
    )
    src = cat_src[cat_idx] if n else np.zeros(0, np.int32)
    kind = cat_kind[cat_idx] if n else np.zeros(0, np.int32)
    if n:
        fw, rt, dev = src_ids["framework"], src_ids["runtime"], src_ids["device"]
        kind[(src == fw) & (kind == kind_ids["annotation"]) & step_name[name_idx]] = kind_ids[
            "step"
        ]
        kind[(src == dev) & (kind == kind_ids["kernel"]) & comm_name[name_idx]] = kind_ids["comm"]
        kind[(src == rt) & sync_name[name_idx]] = kind_ids["sync"]
    # lanes: "thread <tid>" for host events, "stream <tid>" for device events, tid otherwise
    lane_values: dict[str, int] = {}
    group = np.where(src == src_ids["device"], 1, np.where(src == src_ids["other"], 2, 0))
    lut = np.empty((3, len(tids)), dtype=np.int32)
    for g, fmt in enumerate(("thread {}", "stream {}", "{}")):
        for j, t in enumerate(tids):
            lut[g, j] = lane_values.setdefault(fmt.format(t), len(lane_values))
    lane_idx = lut[group, tid_idx] if n else np.zeros(0, np.int32)
    return (
        table.append_column("source", _dictionary(src, list(SOURCES)))
        .append_column("kind", _dictionary(kind, list(KINDS)))
        .append_column("lane", _dictionary(lane_idx, list(lane_values)))
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
