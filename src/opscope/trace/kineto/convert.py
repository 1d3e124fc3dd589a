"""One run of events -> its columns (:class:`RunParts`), without any cross-run state.

Decoding: a run is first read by the C scanner (:func:`convert_native`,
:mod:`opscope.trace.native`), else the typed decoder (:func:`convert_typed`, msgspec structs
with only the fields the table reads, ``args`` as raw text; :mod:`opscope.trace.rows`); a run
neither reads exactly goes through dicts (:func:`convert_run`).  The same conversion code
serves the decoders (:func:`_convert`): per-field work by Arrow/NumPy over whole runs, exact
per-value Python code where a field does not fit (mixed types, huge integers, strings where
numbers belong).  A run converts without cross-run state, so
:func:`~opscope.trace.kineto.file.parse_file` converts the runs of a large file in worker
processes and merges them in file order
(:meth:`~opscope.trace.kineto.builder.KinetoBuilder.merge`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace import native
from opscope.trace.arrays import take
from opscope.trace.jsondecode import decode_piece
from opscope.trace.kineto.columns import RAW_COLUMNS, Rows, id_str_array, str_array
from opscope.trace.kineto.times import NeedsQuoting, text_times_ns, times_ns
from opscope.trace.rows import DictRows, NotTyped, StructRows, decode_structs, int_array

# Arguments lifted into their own columns (they also stay in ``args``).
_FLOW_CATS = frozenset(("ac2g", "async_cpu_to_gpu", "async_gpu", "async"))
_FLOW_CAT_VALUES = pa.array(sorted(_FLOW_CATS), pa.string())
# the metadata events (ph M) the builder reads (KinetoBuilder._metadata); others change nothing
NAMED_METADATA = frozenset(("process_name", "thread_name"))
_UNTIMED = frozenset(("i", "I", "C", "b", "e", "n", "P", "O", "N", "D", "R", "(", ")"))


def timed_batch(
    events: Rows,
    start: np.ndarray,
    bad_ts: np.ndarray,
    dur_override: np.ndarray | None,
) -> tuple[pa.RecordBatch, list[tuple[str, int]]]:
    """Timed events -> their batch (bad rows dropped) and the skip counts, in counting order."""
    if dur_override is None:
        dur, bad_dur = times_ns(events.field("dur"), missing_ok=True)
    else:
        dur, bad_dur = dur_override, np.zeros(len(events), dtype=bool)
    neg = (dur < 0) & ~bad_dur
    bad = bad_ts | bad_dur | neg
    args_text, correlation, external = events.args_columns()
    batch = pa.record_batch(
        [
            str_array(events.field("cat")),
            str_array(events.field("name")),
            id_str_array(events.field("pid")),
            id_str_array(events.field("tid")),
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
    cats = str_array(flows.field("cat"))
    keep = np.asarray(
        pc.is_in(cats, _FLOW_CAT_VALUES).to_numpy(zero_copy_only=False),
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
            str_array(flows.field("ph")),
            cats,
            id_str_array(flows.field("pid")),
            id_str_array(flows.field("tid")),
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

    :meth:`~.builder.KinetoBuilder.merge` applies it: the stateful parts (B/E matching, names,
    the order in which skip reasons are first counted) are replayed there, in file order.
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
    """Convert one run of decoded events (see :meth:`~.builder.KinetoBuilder.add`)."""
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
        ts_all, ts_bad = text_times_ns(events.field("ts"))
    else:
        ts_all, ts_bad = times_ns(events.field("ts"), missing_ok=False, strict=strict)
    parts = RunParts(count, dropped, None, [], [], [], None, 0)
    if n == 0:
        return parts
    ph_arr = str_array(events.field("ph"), "")
    is_x = np.asarray(pc.equal(ph_arr, "X").to_numpy(zero_copy_only=False), dtype=bool)
    if is_x.all():
        parts.timed, parts.timed_skips = timed_batch(events, ts_all, ts_bad, None)
        return parts
    x_rows = np.flatnonzero(is_x)
    if len(x_rows):
        parts.timed, parts.timed_skips = timed_batch(
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


def _phase_bytes(ph: pa.Array) -> np.ndarray:
    """Each event's ``ph`` as its byte when it is one character, else 0: read from the string
    array's buffers (the scanner's ``ph`` has no nulls), no Arrow kernel per phase test."""
    n = len(ph)
    buffers = ph.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=4 * ph.offset)
    data = buffers[2]
    out = np.zeros(n, dtype=np.uint8)
    one = np.diff(offsets) == 1
    if data is not None and one.any():
        out[one] = np.frombuffer(data, dtype=np.uint8)[offsets[:-1][one]]
    return out


def _text_in(texts: pa.Array, values: frozenset[str]) -> np.ndarray:
    """Whether each string of a string array without nulls (a scanner column, or rows taken
    from one) is one of ``values``: its bytes compared from the array's buffers."""
    n = len(texts)
    buffers = texts.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=4 * texts.offset)
    data = np.frombuffer(buffers[2] or b"", dtype=np.uint8)
    starts, lengths = offsets[:-1], np.diff(offsets)
    out = np.zeros(n, dtype=bool)
    for value in values:
        want = np.frombuffer(value.encode(), dtype=np.uint8)
        rows = np.flatnonzero(lengths == len(want))
        if len(rows) and len(want):
            got = data[starts[rows, None] + np.arange(len(want))]
            rows = rows[(got == want).all(axis=1)]
        out[rows] = True
    return out


def _byte_table(chars: str) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[[ord(c) for c in chars]] = True
    return table


_X_BYTE = ord("X")
_FLOW_BYTES = _byte_table("fst")
_STATE_BYTES = _byte_table("BEM")


def _convert_columns(cols: native.Columns, piece: bytes) -> RunParts:
    """:func:`_convert` over the C scanner's columns: the same parts, from whole columns."""
    n = cols.n
    parts = RunParts(n, 0, None, [], [], [], None, 0)
    if n == 0:
        return parts
    ts, ts_bad = cols.ts_ns, cols.ts_flag != 0
    phase = _phase_bytes(cols.ph)
    is_x = phase == _X_BYTE
    if is_x.any():
        dur = cols.dur_ns
        neg = dur < 0
        bad = ts_bad | neg
        keep = is_x & ~bad
        columns: list[pa.Array | np.ndarray] = [
            *(cols.cat, cols.name, cols.pid, cols.tid, ts, dur),
            *(cols.correlation, cols.external_id, cols.args),
        ]
        if not keep.all():  # the timed rows alone
            kept = np.flatnonzero(keep)
            columns = [c[kept] if isinstance(c, np.ndarray) else take(c, kept) for c in columns]
        batch = pa.record_batch(
            [pa.array(c, pa.int64()) if isinstance(c, np.ndarray) else c for c in columns],
            names=list(RAW_COLUMNS),
        )
        parts.timed = batch
        if (bad & is_x).any():  # the scanner reads every duration it accepts
            parts.timed_skips = _timed_skips(ts_bad & is_x, cols.ts_flag == 1, None, neg & is_x)
    if is_x.all():
        return parts
    rows = np.flatnonzero(~is_x)
    phase = phase[rows]
    is_flow = _FLOW_BYTES[phase]
    is_other = _STATE_BYTES[phase]
    rest = ~(is_flow | is_other)
    if is_other.any():
        o_rows = rows[is_other]
        spans = zip(cols.starts[o_rows].tolist(), cols.ends[o_rows].tolist(), strict=True)
        events = StructRows(decode_structs(b"[" + b",".join(piece[a:b] for a, b in spans) + b"]"))
        o_ph = list(map(chr, phase[is_other].tolist()))
        # metadata the builder does not read becomes no dict (it changes no state there)
        names = [e.name for e in events.events]
        read = [j for j, p in enumerate(o_ph) if p != "M" or names[j] in NAMED_METADATA]
        o_list = o_rows.tolist()
        parts.others = [
            (o_list[j], o_ph[j], ev, int(ts[o_list[j]]), bool(ts_bad[o_list[j]]))
            for j, ev in zip(read, events.dicts(read), strict=True)
        ]
    if rest.any():
        r_rows = rows[rest]
        parts.reasons = _phase_reasons(r_rows, take(cols.ph, r_rows))
    if is_flow.any():
        f_rows = rows[is_flow]
        cats = take(cols.cat, f_rows)
        keep = _text_in(cats, _FLOW_CATS)
        if keep.any():
            f_rows = f_rows[keep]
            ida = take(cols.flow_id, f_rows)
            fbad = ts_bad[f_rows] | (_as_bools(ida.is_null()) if ida.null_count else False)
            batch = pa.record_batch(
                [
                    ida,
                    take(cols.ph, f_rows),
                    take(cols.cat, f_rows),
                    take(cols.pid, f_rows),
                    take(cols.tid, f_rows),
                    pa.array(ts[f_rows], pa.int64()),
                ],
                names=["id", "ph", "cat", "pid", "tid", "ts_ns"],
            )
            parts.flows_bad = int(fbad.sum())
            parts.flows = batch.filter(pa.array(~fbad)) if parts.flows_bad else batch
    return parts
