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
before.  Nanoseconds are exact.  The typed decoder reads every ``ts`` from its text (plain
decimals through Arrow's exact ``decimal128(19, 3)`` cast, :func:`_decimal_text_ns`).  The dict
path multiplies integers; below 2**43 µs (about 100 days) doubles are closer than 1 ns, so
the whole microseconds and the fraction, taken apart, give the written three decimals back;
a run with larger values (Unix-epoch microseconds with a nanosecond part) raises
:class:`NeedsQuoting` and is decoded again with them quoted, converted digit by digit.
Times are never rounded to µs.

Decoding: a run is first decoded by the typed decoder (:func:`convert_typed`, msgspec structs
with only the fields the table reads, ``args`` as raw text; :mod:`opscope.trace.rows`); a run
it cannot read exactly goes through dicts (:func:`convert_run`).  The same conversion code
serves both (:func:`_convert`): per-field work by Arrow/NumPy over whole runs, exact
per-value Python code where a field does not fit (mixed types, huge integers, strings where
numbers belong).  A run converts without cross-run state, so :func:`parse_file` converts the
runs of a large file in worker processes and merges them in file order
(:meth:`KinetoBuilder.merge`).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.ma  # pyarrow imports it on its first array from NumPy: do it at import
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace import native
from opscope.trace.rows import (
    DictRows,
    NotTyped,
    StructRows,
    as_int,
    decode_structs,
    infer,
    int_array,
    null_mask,
    raw_value,
    texts_array,
    to_np_int,
)
from opscope.trace.schema import (
    CATEGORY_MAP,
    COMM_KERNEL_MARKERS,
    KINDS,
    SOURCES,
    SYNC_RUNTIME_MARKERS,
)

# Arguments lifted into their own columns (they also stay in ``args``).
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
    arr = infer(values)
    if arr is not None and (
        pa.types.is_integer(arr.type) or pa.types.is_string(arr.type) or pa.types.is_null(arr.type)
    ):
        arr = arr.cast(pa.string())
        return arr.fill_null("") if arr.null_count else arr
    return _str_array(values)


class NeedsQuoting(Exception):
    """A run holds float timestamps a double cannot carry: decode it again, quoted."""


def _times_ns(
    values: list[Any], missing_ok: bool, strict: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(ns, bad) for µs values; ``bad`` marks missing (unless ``missing_ok``) or unreadable.

    ``strict``: raise :class:`NeedsQuoting` rather than convert a float at or above 2**43 µs.
    """
    n = len(values)
    # typed by what the values are: cast to int64, floats would be truncated
    arr = infer(values)
    if arr is not None and (pa.types.is_integer(arr.type) or pa.types.is_null(arr.type)):
        a = to_np_int(arr)
        if a is not None and np.abs(a).max(initial=0) < _US_LIMIT:
            return a * 1000, null_mask(arr, missing_ok)
    elif arr is not None and pa.types.is_floating(arr.type):
        f = arr.fill_null(0.0).to_numpy(zero_copy_only=False)
        finite = np.isfinite(f)
        if finite.all() and np.abs(f).max(initial=0.0) < _LONG_FLOAT_US:
            whole = np.floor(f)
            ns = whole.astype(np.int64) * 1000 + np.rint((f - whole) * 1000.0).astype(np.int64)
            return ns, null_mask(arr, missing_ok)
        if strict and finite.all():
            raise NeedsQuoting
    elif arr is not None and pa.types.is_string(arr.type):
        got = _decimal_text_ns(arr)
        if got is not None:
            return got, null_mask(arr, missing_ok)
    out = np.zeros(n, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            bad[i] = not missing_ok
            continue
        if strict and type(v) is float and abs(v) >= _LONG_FLOAT_US and math.isfinite(v):
            raise NeedsQuoting
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


_DECIMAL = r"^(?P<w>\d{1,16})(?:\.(?P<f>\d+))?$"


def _decimal_text_ns(arr: pa.Array) -> np.ndarray | None:
    """Plain decimal µs written as text (``"1712195495519695.812"``) -> ns, the way
    :func:`to_ns` converts one (three decimals, half up on the fourth), over the whole array;
    None when any value is not that plain (spaces, more than 16 digits before the point:
    :func:`to_ns` then).  Nulls come out as 0."""
    got = _decimal3_ns(arr)
    if got is not None:
        return got
    parts = pc.extract_regex(arr.fill_null("0"), _DECIMAL)
    if parts.null_count:
        return None
    whole = np.asarray(
        parts.field("w").cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64
    )
    if whole.max(initial=0) >= _US_LIMIT:
        return None
    frac4 = pc.utf8_rpad(parts.field("f"), 4, "0")
    frac3 = pc.utf8_slice_codeunits(frac4, 0, 3).cast(pa.int64())
    up = pc.greater_equal(pc.utf8_slice_codeunits(frac4, 3, 4), "5")
    return (
        whole * 1000
        + np.asarray(frac3.to_numpy(zero_copy_only=False), dtype=np.int64)
        + np.asarray(up.to_numpy(zero_copy_only=False), dtype=np.int64)
    )


def _decimal3_ns(arr: pa.Array) -> np.ndarray | None:
    """Text with at most three decimals, through Arrow's exact cast to decimal128(19, 3),
    whose unscaled integers are the nanoseconds; None when the cast refuses (more decimals,
    not a number) or a value is beyond int64."""
    if sys.byteorder != "little":
        return None
    try:
        dec = arr.cast(pa.decimal128(19, 3))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    words = np.frombuffer(dec.buffers()[1], dtype=np.int64)
    lo = words[0::2][dec.offset : dec.offset + len(dec)]
    hi = words[1::2][dec.offset : dec.offset + len(dec)]
    valid = ~np.asarray(dec.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    fits = np.where(lo >= 0, hi == 0, hi == -1)
    if not fits[valid].all():
        return None
    return np.where(valid, lo, 0).astype(np.int64)


def _text_times_ns(raws: list[msgspec.Raw]) -> tuple[np.ndarray, np.ndarray]:
    """(ns, bad) for timestamps kept as their JSON text (empty: absent): plain decimals all at
    once; anything else (strings, null, signs, exponents) value by value, numbers from their
    text so that no digit is lost."""
    arr, _ = texts_array(raws, objects_only=False)
    got = _decimal_text_ns(arr)
    if got is not None:
        return got, np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return _times_ns([raw_value(bytes(r)) for r in raws], missing_ok=False)


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


Rows = DictRows | StructRows


def _timed_batch(
    events: Rows,
    start: np.ndarray,
    bad_ts: np.ndarray,
    dur_override: np.ndarray | None,
) -> tuple[pa.RecordBatch, list[tuple[str, int]]]:
    """Timed events -> their batch (bad rows dropped) and the skip counts, in counting order."""
    if dur_override is None:
        dur, bad_dur = _times_ns(events.field("dur"), missing_ok=True)
    else:
        dur, bad_dur = dur_override, np.zeros(len(events), dtype=bool)
    neg = (dur < 0) & ~bad_dur
    bad = bad_ts | bad_dur | neg
    args_text, correlation, external = events.args_columns()
    batch = pa.record_batch(
        [
            _str_array(events.field("cat")),
            _str_array(events.field("name")),
            _id_str_array(events.field("pid")),
            _id_str_array(events.field("tid")),
            pa.array(start, pa.int64()),
            pa.array(dur, pa.int64()),
            correlation,
            external,
            args_text,
        ],
        names=list(RAW_COLUMNS),
    )
    skips: list[tuple[str, int]] = []
    if bad.any():
        skips = _timed_skips(bad_ts, events.absent("ts"), bad_dur, neg)
        batch = batch.filter(pa.array(~bad))
    return batch, skips


def _timed_skips(
    bad_ts: np.ndarray, missing: np.ndarray, bad_dur: np.ndarray | None, neg: np.ndarray
) -> list[tuple[str, int]]:
    """Why timed events were dropped, counted in counting order: masks over the timed rows
    (``missing``: the ts is absent; ``bad_dur`` None when no duration was unreadable)."""
    unreadable = bad_ts & ~missing
    if bad_dur is not None:
        unreadable |= bad_dur
    return [
        ("no ts", int((bad_ts & missing).sum())),
        ("unreadable ts or dur", int(unreadable.sum())),
        ("negative duration", int((neg & ~bad_ts).sum())),
    ]


def _flow_batch(flows: Rows, ts: np.ndarray, bad: np.ndarray) -> tuple[pa.RecordBatch | None, int]:
    """Flow events -> their batch (None when no flow category is kept) and the rows dropped."""
    cats = _str_array(flows.field("cat"))
    keep = np.asarray(
        pc.is_in(cats, pa.array(sorted(_FLOW_CATS))).to_numpy(zero_copy_only=False),
        dtype=bool,
    )
    if not keep.any():
        return None, 0
    if not keep.all():
        flows = flows.take(np.flatnonzero(keep).tolist())
        cats = cats.filter(pa.array(keep))
    ts, bad = ts[keep], bad[keep].copy()
    ida = int_array(flows.ids())
    bad |= np.asarray(ida.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    batch = pa.record_batch(
        [
            ida,
            _str_array(flows.field("ph")),
            cats,
            _id_str_array(flows.field("pid")),
            _id_str_array(flows.field("tid")),
            pa.array(ts, pa.int64()),
        ],
        names=["id", "ph", "cat", "pid", "tid", "ts_ns"],
    )
    n_bad = int(bad.sum())
    if n_bad:
        batch = batch.filter(pa.array(~bad))
    return batch, n_bad


@dataclass
class RunParts:
    """One run of events converted without any cross-run state (a worker process can do it).

    :meth:`KinetoBuilder.merge` applies it: the stateful parts (B/E matching, names, the order
    in which skip reasons are first counted) are replayed there, in file order.
    """

    count: int  # events in the run, objects or not
    dropped: int  # not objects
    timed: pa.RecordBatch | None  # the X events
    timed_skips: list[tuple[str, int]]
    # M, B and E events in file order: (row, ph, event, ts_ns, ts_bad); and the untimed or
    # unknown phases: (first row, reason, count)
    others: list[tuple[int, str, dict[str, Any], int, bool]]
    reasons: list[tuple[int, str, int]]
    flows: pa.RecordBatch | None
    flows_bad: int


def convert_run(events: list[Any], strict: bool = False) -> RunParts:
    """Convert one run of decoded events (see :meth:`KinetoBuilder.add`)."""
    count = len(events)
    dropped = 0
    if not all(type(e) is dict for e in events):
        events = [e for e in events if type(e) is dict]
        dropped = count - len(events)
    return _convert(DictRows(events), count, dropped, strict)


def convert_typed(piece: bytes) -> RunParts:
    """Decode and convert one run (``piece``: events comma-separated, without brackets) with
    the typed decoder; :class:`~opscope.trace.rows.NotTyped` when the run does not fit it
    (or is not a run of events at all).  Timestamps are read from their text, so no digit is
    lost to a double (Unix-epoch microseconds with a nanosecond part)."""
    events = decode_structs(b"[" + piece + b"]")
    return _convert(StructRows(events), len(events), 0, False)


def convert_native(piece: bytes) -> RunParts:
    """Convert one run (as :func:`convert_typed`) from the C scanner's columns
    (:mod:`opscope.trace.native`); :class:`~opscope.trace.rows.NotTyped` when the scanner is
    not built or switched off, or does not read this run."""
    if not native.enabled():
        raise NotTyped
    cols = native.scan(piece)
    if cols is None:
        raise NotTyped
    return _convert_columns(cols, piece)


def convert_structured(piece: bytes) -> RunParts:
    """One run through the C scanner, else the typed decoder; :class:`NotTyped` when neither
    reads it."""
    try:
        return convert_native(piece)
    except NotTyped:
        return convert_typed(piece)


def convert_bytes(piece: bytes, quote: bool) -> tuple[RunParts, bool] | None:
    """One run of events from its bytes: the C scanner or the typed decoder first
    (:func:`convert_structured`), dicts where they do not fit.

    Returns the parts and whether timestamps were decoded as text (``quote``, or turned on
    here because a double could not hold them); None when ``piece`` is not a run of events.
    """
    from opscope.trace.jsonstream import decode_piece

    try:
        return convert_structured(piece), quote
    except NotTyped:
        pass
    events = decode_piece(piece, quote)
    if events is None:
        return None
    try:
        return convert_run(events, strict=not quote), quote
    except NeedsQuoting:
        # a double cannot hold this run's timestamps: decode them as text
        again = decode_piece(piece, True)
        return convert_run(again if again is not None else events), True


def _convert(events: Rows, count: int, dropped: int, strict: bool) -> RunParts:
    n = len(events)
    if isinstance(events, StructRows):
        ts_all, ts_bad = _text_times_ns(events.field("ts"))
    else:
        ts_all, ts_bad = _times_ns(events.field("ts"), missing_ok=False, strict=strict)
    parts = RunParts(count, dropped, None, [], [], [], None, 0)
    if n == 0:
        return parts
    ph_arr = _str_array(events.field("ph"), "")
    is_x = np.asarray(pc.equal(ph_arr, "X").to_numpy(zero_copy_only=False), dtype=bool)
    if is_x.all():
        parts.timed, parts.timed_skips = _timed_batch(events, ts_all, ts_bad, None)
        return parts
    x_rows = np.flatnonzero(is_x)
    if len(x_rows):
        parts.timed, parts.timed_skips = _timed_batch(
            events.take(x_rows.tolist()), ts_all[x_rows], ts_bad[x_rows], None
        )
    rows = np.flatnonzero(~is_x)
    ph = ph_arr.take(pa.array(rows))
    is_flow = np.asarray(pc.is_in(ph, _FLOW_PHASES).to_numpy(zero_copy_only=False), dtype=bool)
    is_other = np.asarray(pc.is_in(ph, _STATE_PHASES).to_numpy(zero_copy_only=False), dtype=bool)
    rest = ~(is_flow | is_other)
    if is_other.any():
        o_rows = rows[is_other].tolist()
        o_ph = ph.filter(pa.array(is_other)).to_pylist()
        parts.others = [
            (i, p, events.event(i), int(ts_all[i]), bool(ts_bad[i]))
            for i, p in zip(o_rows, o_ph, strict=True)
        ]
    if rest.any():
        parts.reasons = _phase_reasons(rows[rest], ph.filter(pa.array(rest)))
    if is_flow.any():
        f_rows = rows[is_flow]
        parts.flows, parts.flows_bad = _flow_batch(
            events.take(f_rows.tolist()), ts_all[f_rows], ts_bad[f_rows]
        )
    return parts


_FLOW_PHASES = pa.array(["f", "s", "t"])
_STATE_PHASES = pa.array(["B", "E", "M"])


def _phase_reasons(rows: np.ndarray, ph: pa.Array) -> list[tuple[int, str, int]]:
    """(first row, reason, count) for the events of a run that are neither timed, state nor
    flow events, in row order."""
    first: dict[str, tuple[int, int]] = {}
    for i, p in zip(rows.tolist(), ph.to_pylist(), strict=True):
        reason = f"untimed event (ph {p})" if p in _UNTIMED else "unknown phase"
        seen = first.get(reason)
        first[reason] = (i, 1) if seen is None else (seen[0], seen[1] + 1)
    return sorted((i, reason, c) for reason, (i, c) in first.items())


def _as_bools(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)


def _convert_columns(cols: native.Columns, piece: bytes) -> RunParts:
    """:func:`_convert` over the C scanner's columns: the same parts, from whole columns."""
    n = cols.n
    parts = RunParts(n, 0, None, [], [], [], None, 0)
    if n == 0:
        return parts
    ts, ts_bad = cols.ts_ns, cols.ts_flag != 0
    is_x = _as_bools(pc.equal(cols.ph, "X"))
    if is_x.any():
        dur = cols.dur_ns
        neg = dur < 0
        bad = ts_bad | neg
        batch = pa.record_batch(
            [
                cols.cat,
                cols.name,
                cols.pid,
                cols.tid,
                pa.array(ts, pa.int64()),
                pa.array(dur, pa.int64()),
                cols.correlation,
                cols.external_id,
                cols.args,
            ],
            names=list(RAW_COLUMNS),
        )
        keep = is_x & ~bad
        if not keep.all():
            batch = batch.filter(pa.array(keep))
        parts.timed = batch
        if (bad & is_x).any():  # the scanner reads every duration it accepts
            parts.timed_skips = _timed_skips(ts_bad & is_x, cols.ts_flag == 1, None, neg & is_x)
    if is_x.all():
        return parts
    rows = np.flatnonzero(~is_x)
    ph = cols.ph.take(pa.array(rows))
    is_flow = _as_bools(pc.is_in(ph, _FLOW_PHASES))
    is_other = _as_bools(pc.is_in(ph, _STATE_PHASES))
    rest = ~(is_flow | is_other)
    if is_other.any():
        o_rows = rows[is_other]
        spans = zip(cols.starts[o_rows].tolist(), cols.ends[o_rows].tolist(), strict=True)
        events = StructRows(decode_structs(b"[" + b",".join(piece[a:b] for a, b in spans) + b"]"))
        o_ph = ph.filter(pa.array(is_other)).to_pylist()
        parts.others = [
            (i, p, events.event(j), int(ts[i]), bool(ts_bad[i]))
            for j, (i, p) in enumerate(zip(o_rows.tolist(), o_ph, strict=True))
        ]
    if rest.any():
        parts.reasons = _phase_reasons(rows[rest], ph.filter(pa.array(rest)))
    if is_flow.any():
        f_rows = rows[is_flow]
        take = pa.array(f_rows)
        cats = cols.cat.take(take)
        keep = _as_bools(pc.is_in(cats, pa.array(sorted(_FLOW_CATS))))
        if keep.any():
            f_rows = f_rows[keep]
            take = pa.array(f_rows)
            ida = cols.flow_id.take(take)
            fbad = ts_bad[f_rows] | _as_bools(ida.is_null())
            batch = pa.record_batch(
                [
                    ida,
                    cols.ph.take(take),
                    cols.cat.take(take),
                    cols.pid.take(take),
                    cols.tid.take(take),
                    pa.array(ts[f_rows], pa.int64()),
                ],
                names=["id", "ph", "cat", "pid", "tid", "ts_ns"],
            )
            parts.flows_bad = int(fbad.sum())
            parts.flows = batch.filter(pa.array(~fbad)) if parts.flows_bad else batch
    return parts


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
                key = (_clean_str(ev.get("pid"), ""), _clean_str(ev.get("tid"), ""))
                self.open_begins.setdefault(key, []).append((ev, ts))
            else:  # "E"
                key = (_clean_str(ev.get("pid"), ""), _clean_str(ev.get("tid"), ""))
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
            batch, skips = _timed_batch(
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


def _encoded(col: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray:
    """A string column as one dictionary array (as it is when it already is one)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col if pa.types.is_dictionary(col.type) else col.dictionary_encode()


def _dict_parts(enc: pa.DictionaryArray) -> tuple[np.ndarray, list[str]]:
    """(indices, dictionary values) of a dictionary array."""
    idx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int32)
    return idx, enc.dictionary.to_pylist()


def _dictionary(idx: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), pa.array(values, pa.string()))


def classify_table(table: pa.Table) -> pa.Table:
    """Add ``source``, ``kind`` and ``lane`` (dictionary columns) from ``cat``/``name``/``tid``,
    and turn ``cat``, ``name``, ``pid`` and ``tid`` into dictionary columns (encoded once here;
    linking and the event table use them as they are).

    The same rules as :func:`opscope.trace.schema.classify`, evaluated once per distinct
    category and name rather than once per event.
    """
    n = table.num_rows
    for col in ("cat", "name", "pid", "tid"):
        i = table.schema.get_field_index(col)
        table = table.set_column(i, col, _encoded(table.column(col)))
    cat_idx, cats = _dict_parts(table.column("cat").chunk(0))
    name_idx, names = _dict_parts(table.column("name").chunk(0))
    tid_idx, tids = _dict_parts(table.column("tid").chunk(0))
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


# -- one file, its runs converted in worker processes -----------------------------------------

# below this many bytes of events, starting processes costs more than it saves
PARALLEL_MIN_BYTES = 4 << 20
_MAX_WORKERS = 4


def _batch_bytes(batch: pa.RecordBatch | None) -> bytes | None:
    if batch is None:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


def _batch_from(data: Any) -> pa.RecordBatch | None:
    if not isinstance(data, bytes):
        return data  # None, or a batch converted in this process
    with pa.ipc.open_stream(pa.py_buffer(data)) as reader:
        return reader.read_next_batch()


def _portable(parts: RunParts) -> RunParts:
    """``parts`` with its batches as IPC bytes (cheaper to send between processes)."""
    return RunParts(
        parts.count,
        parts.dropped,
        _batch_bytes(parts.timed),
        parts.timed_skips,
        parts.others,
        parts.reasons,
        _batch_bytes(parts.flows),
        parts.flows_bad,
    )


def _restored(parts: RunParts) -> RunParts:
    parts.timed = _batch_from(parts.timed)
    parts.flows = _batch_from(parts.flows)
    return parts


def _convert_piece(piece: bytes, quote: bool, portable: bool) -> tuple[RunParts, bool] | None:
    """Decode and convert one guessed run; None when the guess was wrong (not an array).

    Returns the parts and whether the run was decoded with long timestamps quoted.
    """
    got = convert_bytes(piece, quote)
    if got is None:
        return None
    parts, quoted = got
    return (_portable(parts) if portable else parts), quoted


def _typed_tail(
    rest: bytes, form: str, quote: bool
) -> tuple[RunParts, int, dict[str, Any], bool] | None:
    """The tail through the typed decoder: ``(parts, events, keys after the array, quoted)``,
    or None when it does not fit (cut short, unusual values): :func:`decode_tail` decides."""
    from opscope.trace.jsonstream import loads

    meta: dict[str, Any] = {}
    if form == "object":
        try:
            doc = msgspec.json.decode(b'{"traceEvents":[' + rest, type=dict[str, msgspec.Raw])
        except (msgspec.DecodeError, RecursionError, ValueError):
            return None
        raw = doc.pop("traceEvents", None)
        if raw is None:
            return None
        body = bytes(raw).strip()
        if not (body.startswith(b"[") and body.endswith(b"]")):
            return None
        piece = body[1:-1]
        try:
            meta = {k: loads(bytes(v)) for k, v in doc.items()}
        except ValueError:
            return None
    elif form == "array":
        body = rest.rstrip()
        if not body.endswith(b"]"):
            return None
        piece = body[:-1]
    else:
        return None
    try:
        parts = convert_structured(piece)
    except NotTyped:
        return None
    return parts, parts.count, meta, quote


def _convert_tail(
    rest: bytes, form: str, quote: bool, portable: bool
) -> tuple[RunParts | None, int, dict[str, Any], bool, bool, list[tuple[int, int, bytes]]]:
    """The tail (see :func:`~opscope.trace.jsonstream.decode_tail`), converted."""
    from opscope.trace.jsonstream import decode_tail

    typed = _typed_tail(rest, form, quote)
    if typed is not None:
        tparts, n_events, meta, quoted = typed
        return (_portable(tparts) if portable else tparts), n_events, meta, False, quoted, []
    events, meta, cut, quoted, skipped = decode_tail(rest, form, quote)
    if events is None or (cut and not events):
        return None, 0, meta, cut, quoted, skipped
    parts = convert_run(events) if events else RunParts(0, 0, None, [], [], [], None, 0)
    return (_portable(parts) if portable else parts), len(events), meta, cut, quoted, skipped


def _workers(workers: int | None) -> int:
    """Worker processes for one file: 0 where they cannot be forked or are nested."""
    import multiprocessing
    import os

    if workers is None:
        workers = min(os.cpu_count() or 1, _MAX_WORKERS)
    if (
        workers < 2
        or not sys.platform.startswith("linux")
        or multiprocessing.parent_process() is not None  # already a worker: no nesting
    ):
        return 0
    return workers


def parse_file(
    path: Path, *, max_bytes: int | None = None, workers: int | None = None
) -> tuple[KinetoParse, list[str]]:
    """Stream and convert one Kineto file (not linked): its columns and the reader's warnings.

    Runs are decoded and converted in ``workers`` forked processes (default: the CPU count, at
    most 4) when the file holds more than :data:`PARALLEL_MIN_BYTES` of events; the parent
    decompresses, cuts runs and merges the results in file order, so the outcome is the one
    the sequential path gives.  A guessed cut that does not decode (the bytes of ``},{``
    inside a string) makes the file go through the sequential path instead.
    """
    import gc

    from opscope.trace.jsonstream import EventStream
    from opscope.trace.readers import ByteStream

    # the decoded events are acyclic: the cyclic collector only costs time while they live
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        data = ByteStream(path, max_bytes)
        stream = EventStream(data, str(path))
        got = _parse_pooled(stream, _workers(workers))
        if got is not None:
            return got, _warnings(path, data, stream)
        # a guessed cut fell inside an event: guess again, run by run
        data = ByteStream(path, max_bytes)
        stream = EventStream(data, str(path))
        builder = KinetoBuilder()
        for events, piece in stream:
            try:
                builder.add(events, strict=piece is not None)
            except NeedsQuoting:
                # a double cannot hold this trace's timestamps: decode them as text from here on
                stream.quote = True
                assert piece is not None
                again = stream.decode_piece(piece)
                builder.add(again if again is not None else events)
            del events, piece
        return _finish(builder, stream), _warnings(path, data, stream)
    finally:
        if gc_was_enabled:
            gc.enable()


NOT_JSON = "not JSON (skipped to the next event)"


def _finish(builder: KinetoBuilder, stream: Any) -> KinetoParse:
    if stream.invalid:
        builder.skipped[NOT_JSON] += len(stream.invalid)
    return builder.finish(stream.meta)


def _warnings(path: Path, data: Any, stream: Any) -> list[str]:
    warnings = []
    if data.cut:
        warnings.append(f"{path}: {data.cut}")
    if stream.warning:
        warnings.append(stream.warning)
    if stream.invalid:
        at, head = stream.invalid[0]
        n = len(stream.invalid)
        text = head.decode("utf-8", "replace").strip()
        warnings.append(
            f"{path}: {n} event{'s' if n > 1 else ''} that {'are' if n > 1 else 'is'} not "
            f"JSON skipped, every other event kept (the first at byte {at} of the JSON, "
            f"near ...{text!r}...; a name holding an unescaped quote, which torch's trace "
            "export does not escape, is one cause)"
        )
    return warnings


def _parse_pooled(stream: Any, n_workers: int) -> KinetoParse | None:
    """:func:`parse_file` over guessed runs, in ``n_workers`` processes (0: in this one).

    None: a guessed cut was wrong; redo with :class:`~opscope.trace.jsonstream.EventStream`'s
    own iteration, which guesses again run by run."""
    from collections import deque
    from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context

    from opscope.trace.jsonstream import LONG_TS

    builder = KinetoBuilder()
    pool: Executor | None = None
    # the C scanner releases the GIL: threads share the runs out with no copy between
    # processes; the Python decoders hold it, so without the scanner the runs go to processes
    portable = not native.enabled()
    # (piece, quoted when submitted, its future); results are merged strictly in file order
    pending: deque[tuple[bytes, bool, Future[Any]]] = deque()
    held: list[bytes] = []  # runs read before deciding whether a pool pays
    held_bytes = 0
    quote = False

    def merge(piece: bytes, asked: bool, result: tuple[RunParts, bool] | None) -> bool:
        nonlocal quote
        if result is None:
            return False
        parts, quoted = result
        if quote and not quoted and not asked and LONG_TS.search(piece):
            # an earlier run (still in flight when this one left) turned quoting on
            redo = _convert_piece(piece, True, False)
            if redo is None:
                return False
            parts, quoted = redo
        quote = quote or quoted
        stream.events_seen += parts.count
        builder.merge(_restored(parts))
        return True

    def drain(limit: int) -> bool:
        while len(pending) > limit:
            piece, asked, fut = pending.popleft()
            try:
                result = fut.result()
            except BrokenProcessPool:  # a worker died (killed for memory?): redo in-process
                return False
            if not merge(piece, asked, result):
                return False
        return True

    try:
        for kind, item in stream.split():
            if kind == "events":  # decoded whole: nothing to share out
                builder.add(item)
                continue
            if kind == "piece":
                if not n_workers:
                    if not merge(item, quote, _convert_piece(item, quote, False)):
                        return None
                    continue
                if pool is None:
                    held.append(item)
                    held_bytes += len(item)
                    if held_bytes < PARALLEL_MIN_BYTES:
                        continue
                    pool = (
                        ProcessPoolExecutor(n_workers, mp_context=get_context("fork"))
                        if portable
                        else ThreadPoolExecutor(n_workers)
                    )
                    for p in held:
                        fut = pool.submit(_convert_piece, p, quote, portable)
                        pending.append((p, quote, fut))
                    held = []
                else:
                    fut = pool.submit(_convert_piece, item, quote, portable)
                    pending.append((item, quote, fut))
                if not drain(2 * n_workers):
                    return None
                continue
            # the tail
            for p in held:
                if not merge(p, quote, _convert_piece(p, quote, False)):
                    return None
            held = []
            tail: Any
            if pool is not None:
                tail = pool.submit(_convert_tail, item, stream.form, quote, portable)
                if not drain(0):
                    return None
                tail = tail.result()
            else:
                tail = _convert_tail(item, stream.form, quote, False)
            parts, n_events, meta, cut, _, skipped = tail
            stream.end(n_events, meta, cut, skipped)
            if parts is not None:
                builder.merge(_restored(parts))
    finally:
        if pool is not None:
            for _, _, fut in pending:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
    return _finish(builder, stream)
