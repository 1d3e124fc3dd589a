"""Two ways to read the fields of a run of decoded events: dicts and typed structs.

Contract: :mod:`opscope.trace.kineto` converts a run of events through the small interface
below (a field as a list, a subset of rows, one event as a dict, the ``args`` columns), so
the same conversion code serves both decoders:

* :class:`DictRows`: events decoded by ``orjson`` (or the standard library) into dicts.  Handles
  anything JSON can say; the reference.
* :class:`StructRows`: events decoded by ``msgspec`` straight into typed structs with only the
  fields the table needs, ``args`` kept as raw JSON slices (:func:`decode_structs`).  No dict
  is built per event or per ``args``, which is where a generic decoder spends its time on
  Kineto traces (3-5x faster than ``orjson.loads`` on the shared traces).  Anything outside
  its types (a boolean timestamp, ``args`` that are not objects, a lone surrogate, NaN) makes
  :func:`decode_structs` or :meth:`StructRows.args_columns` give up (:class:`NotTyped`), and
  the caller converts the run through :class:`DictRows` instead.  Both give the same table,
  except that the typed path's ``args`` text is the trace's own text with whitespace removed
  rather than a re-serialisation (numbers and escapes as written), and that it reads every
  ``ts`` from its text (:class:`Event`), so a timestamp written with more than three
  decimals rounds half up from the text where the dict path rounds the double nearest to it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any, cast

import msgspec
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.jsondecode import loads

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError)
_INT64_MAX = 2**63 - 1

# Arguments lifted into their own columns (they also stay in ``args``); the first spelling
# present in an event's args wins.
CORRELATION_KEYS = ("correlation", "correlation id", "correlationId")
EXTERNAL_KEYS = ("External id", "external id", "external_id")


class NotTyped(Exception):
    """The run does not fit the typed decoder: convert it from dicts instead."""


def as_int(value: Any) -> int | None:
    """An int64 from an integer, a digit string or an integral float; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if -(2**63) <= value <= _INT64_MAX else None
    if isinstance(value, str):
        t = value.strip()
        if t.removeprefix("-").isdigit() and t.isascii():  # "--5": int() refuses it
            v = int(t)
            return v if -(2**63) <= v <= _INT64_MAX else None
        return None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return None


_NONE = type(None)


def infer(values: list[Any]) -> pa.Array | None:
    """``values`` as one Arrow array typed by what they hold (integers, floats, integers and
    floats as floats, text, booleans, nothing but nulls), or None when they do not make one
    (mixed kinds, integers beyond int64).

    The type is read off the values' Python types rather than left to ``pa.array``: its own
    inference looks for ``dateutil`` on every call, a failed import (a search of sys.path)
    where dateutil is not installed, which cost 7% of ingest.
    """
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if not kinds:
        return pa.nulls(len(values))
    if kinds == {int}:
        typ = pa.int64()
    elif kinds in ({float}, {int, float}):
        typ = pa.float64()
    elif kinds == {str}:
        typ = pa.string()
    elif kinds == {bool}:
        typ = pa.bool_()
    else:
        return None
    try:
        return pa.array(values, typ)
    except _ARROW_ERRORS:
        return None


def to_np_int(arr: pa.Array) -> np.ndarray | None:
    """int64 values (nulls as 0), or None when they do not fit (uint64 beyond int64)."""
    if pa.types.is_null(arr.type):
        return np.zeros(len(arr), dtype=np.int64)
    if arr.type != pa.int64():
        try:
            arr = arr.cast(pa.int64())
        except _ARROW_ERRORS:
            return None
    return np.asarray(arr.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def null_mask(arr: pa.Array, missing_ok: bool) -> np.ndarray:
    if missing_ok or not arr.null_count:
        return np.zeros(len(arr), dtype=bool)
    return np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def int_array(values: list[Any]) -> pa.Array:
    """``values`` as int64 (:func:`as_int` per value; null where absent or not an int64)."""
    inferred = infer(values)
    if inferred is not None and (
        pa.types.is_integer(inferred.type) or pa.types.is_null(inferred.type)
    ):
        ints = to_np_int(inferred)
        if ints is not None:
            return pa.array(ints, pa.int64(), mask=null_mask(inferred, False))
    return pa.array([as_int(v) for v in values], pa.int64())


def texts_array(
    parts: Sequence[bytes | msgspec.Raw], objects_only: bool = True
) -> tuple[pa.Array, bytes]:
    """JSON texts -> a string array with nulls where a text is not a non-empty object
    (``objects_only``) or is empty (otherwise)."""
    n = len(parts)
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    blob = b"".join(parts)
    text = np.frombuffer(blob, dtype=np.uint8)
    starts = np.minimum(offsets[:-1], max(len(text) - 1, 0))
    if not objects_only:
        mask = lengths > 0
    elif len(text):
        mask = (lengths > 2) & (text[starts] == ord("{"))
    else:
        mask = lengths > 2
    validity = pa.array(mask).buffers()[1] if not mask.all() else None
    arr = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(blob), validity, int(n - mask.sum())
    ).cast(pa.string())
    return arr, blob


# -- dicts -------------------------------------------------------------------------------------

_SENTINEL = "\x00\x01opscope-args-split\x01\x00"
_SENTINEL_SEP = b',"\\u0000\\u0001opscope-args-split\\u0001\\u0000"'


def _dump_one(a: Any) -> str:
    try:
        return orjson.dumps(a).decode()
    except (TypeError, orjson.JSONEncodeError):
        # integers beyond 64 bits, lone surrogates: the standard library writes them
        return json.dumps(a, default=str, ensure_ascii=True)


def dump_args(args: list[Any]) -> tuple[pa.Array, bytes]:
    """``args`` dicts as JSON text (null for absent or empty args), exactly as decoded.

    One ``orjson.dumps`` over the whole run, with a sentinel string between the items, then one
    split: the per-item call overhead is what dominated.  The sentinel holds control characters
    that orjson escapes; if a trace ever contains it, the piece count is off and we dump item
    by item instead.  Which items are non-empty dicts is read off the text (a dict's starts
    with ``{``, an empty one is ``{}``); the text of the null items stays under their null
    slots, which Arrow allows and nothing reads.
    """
    n = len(args)
    try:
        inter: list[Any] = [_SENTINEL] * (2 * n)
        inter[::2] = args
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
            return texts_array(parts)
    except (TypeError, orjson.JSONEncodeError):
        pass
    keep = [type(a) is dict and len(a) > 0 for a in args]
    texts = [_dump_one(a) if k else None for a, k in zip(args, keep, strict=True)]
    return pa.array(texts, pa.string()), "".join(t for t in texts if t).encode()


def _dict_arg_ints(args: list[dict[str, Any]], keys: tuple[str, ...], blob: bytes) -> pa.Array:
    """The first of ``keys`` present in each ``args`` dict, as int64 (null when absent/bad).

    ``args`` are dicts (``{}`` where an event has none).  ``blob`` is the run's serialised
    args: a spelling that never occurs in it costs no pass.
    """
    out: pa.Array | None = None
    for i, k in enumerate(keys):
        if i and f'"{k}"'.encode() not in blob:
            continue
        arr = int_array(list(map(dict.get, args, repeat(k))))
        if i:
            # a later spelling counts only where no earlier one is present at all
            present = pa.array([any(p in a for p in keys[:i]) for a in args])
            arr = pc.if_else(present, pa.scalar(None, pa.int64()), arr)
        out = arr if out is None else pc.coalesce(out, arr)
    assert out is not None
    return out


_NO_ARGS: dict[str, Any] = {}


class DictRows:
    """A run of events decoded into dicts (every event is a dict)."""

    __slots__ = ("events",)

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def __len__(self) -> int:
        return len(self.events)

    def field(self, key: str) -> list[Any]:
        """``[e.get(key) for e in events]`` without a Python-level loop."""
        return list(map(dict.get, self.events, repeat(key)))

    def absent(self, key: str) -> np.ndarray:
        return np.fromiter((key not in e for e in self.events), dtype=bool, count=len(self))

    def take(self, rows: list[int]) -> DictRows:
        ev = self.events
        return DictRows([ev[i] for i in rows])

    def event(self, i: int) -> dict[str, Any]:
        return self.events[i]

    def ids(self) -> list[Any]:
        """Flow ids: ``id``, else ``bind_id``."""
        out = []
        for e in self.events:
            v = e.get("id")
            out.append(e.get("bind_id") if v is None else v)
        return out

    def args_columns(self) -> tuple[pa.Array, pa.Array, pa.Array]:
        """(args as JSON text, correlation, External id)."""
        args = self.field("args")
        text, blob = dump_args(args)
        dict_args = [a if type(a) is dict else _NO_ARGS for a in args]
        return (
            text,
            _dict_arg_ints(dict_args, CORRELATION_KEYS, blob),
            _dict_arg_ints(dict_args, EXTERNAL_KEYS, blob),
        )


# -- typed structs -----------------------------------------------------------------------------

_Number = int | float | str | None


class Event(msgspec.Struct, gc=False):
    """The fields of a trace event the table reads; every other key is skipped undecoded.

    ``ts`` stays its raw JSON text (empty when absent): no digit is lost to a double
    (Unix-epoch microseconds with a nanosecond part), and three-decimal text converts to
    nanoseconds in one exact Arrow cast."""

    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    ts: msgspec.Raw = msgspec.Raw(b"")
    dur: _Number = None
    pid: int | str | None = None
    tid: int | str | None = None
    id: int | str | None = None
    bind_id: int | str | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


_Id = _Number | msgspec.UnsetType


class _ArgIds(msgspec.Struct, gc=False):
    """The id keys of ``args`` (see :data:`CORRELATION_KEYS`, :data:`EXTERNAL_KEYS`)."""

    c0: _Id = msgspec.field(default=msgspec.UNSET, name=CORRELATION_KEYS[0])
    c1: _Id = msgspec.field(default=msgspec.UNSET, name=CORRELATION_KEYS[1])
    c2: _Id = msgspec.field(default=msgspec.UNSET, name=CORRELATION_KEYS[2])
    e0: _Id = msgspec.field(default=msgspec.UNSET, name=EXTERNAL_KEYS[0])
    e1: _Id = msgspec.field(default=msgspec.UNSET, name=EXTERNAL_KEYS[1])
    e2: _Id = msgspec.field(default=msgspec.UNSET, name=EXTERNAL_KEYS[2])


_EVENTS = msgspec.json.Decoder(list[Event])
_ARG_IDS = msgspec.json.Decoder(list[_ArgIds])
_RAW_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_FIELDS = tuple(Event.__struct_fields__)
_GETTERS = {f: attrgetter(f) for f in _FIELDS}
_TS = _FIELDS.index("ts")


def decode_structs(data: bytes) -> list[Event]:
    """A JSON array of events -> typed structs; :class:`NotTyped` when it does not fit."""
    try:
        return _EVENTS.decode(data)
    except (msgspec.DecodeError, RecursionError, ValueError):  # ValidationError: DecodeError
        raise NotTyped from None  # (ValueError: text that is not UTF-8)


def _args(raw: bytes) -> Any:
    """One event's ``args`` text decoded; bytes that are not UTF-8 are read with replacement
    characters (``ValueError`` when even that is not JSON)."""
    try:
        return loads(raw)
    except ValueError:
        return loads(raw.decode("utf-8", "replace").encode())


def raw_value(text: bytes) -> Any:
    """A value kept as its raw JSON text (``ts``), as the dict path sees it: None when absent,
    a number as its text (converted exactly later), anything else decoded (a string, null, a
    boolean, worse; None when it is not JSON)."""
    if not text:
        return None
    if text[:1] not in b'"nt[{f':
        return text.decode("ascii", "replace")
    try:
        return loads(text)
    except ValueError:
        return None


class StructRows:
    """A run of events decoded by :func:`decode_structs`."""

    __slots__ = ("events",)

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events

    def __len__(self) -> int:
        return len(self.events)

    def field(self, key: str) -> list[Any]:
        getter = _GETTERS.get(key)
        if getter is None:
            return [None] * len(self.events)
        return list(map(getter, self.events))

    def absent(self, key: str) -> np.ndarray:
        if key != "ts":
            raise ValueError(f"only ts tells absent from null here, not {key}")
        texts = cast("list[msgspec.Raw]", self.field("ts"))
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(self))
        return np.asarray(lengths == 0, dtype=bool)

    def take(self, rows: list[int]) -> StructRows:
        ev = self.events
        return StructRows([ev[i] for i in rows])

    def event(self, i: int) -> dict[str, Any]:
        """One event as the dict a generic decoder gives (absent and null keys left out)."""
        return self.dicts([i])[0]

    def dicts(self, rows: Sequence[int]) -> list[dict[str, Any]]:
        """:meth:`event` of each of ``rows``; their ``args`` decoded in one pass (each on its
        own when that pass fails: it then gives what each alone gives)."""
        events = [self.events[i] for i in rows]
        raws = [bytes(e.args) for e in events]
        given = [r for r in raws if r != b"{}"]
        decoded: Iterator[Any] | None = iter(())
        if given:
            try:
                decoded = iter(loads(b"[" + b",".join(given) + b"]"))
            except ValueError:
                decoded = None
        out = []
        for e, raw in zip(events, raws, strict=True):
            values = msgspec.structs.astuple(e)
            d = {f: v for f, v in zip(_FIELDS[:-1], values[:-1], strict=True) if v is not None}
            ts = raw_value(bytes(values[_TS]))
            if ts is None:
                del d["ts"]
            else:
                d["ts"] = ts
            if raw != b"{}":
                if decoded is not None:
                    d["args"] = next(decoded)
                else:
                    with contextlib.suppress(ValueError):  # else the event stays, without args
                        d["args"] = _args(raw)
            out.append(d)
        return out

    def ids(self) -> list[Any]:
        pairs = zip(self.field("id"), self.field("bind_id"), strict=True)
        return [b if a is None else a for a, b in pairs]

    def args_columns(self) -> tuple[pa.Array, pa.Array, pa.Array]:
        """(args as compact JSON text, correlation, External id).

        The raw ``args`` slices are joined into one array, made compact by one
        ``msgspec.json.format`` pass (whitespace out; numbers, strings and escapes as written)
        and decoded twice: into raw items (the text column) and for the id keys only.
        """
        raws = list(map(_GETTERS["args"], self.events))
        joined = b"[" + b",".join(raws) + b"]"
        del raws
        try:
            compact = msgspec.json.format(joined, indent=-1)
            del joined
            ids = _ARG_IDS.decode(compact)
            items = _RAW_ITEMS.decode(compact)
        except (msgspec.DecodeError, ValueError):  # args not objects, ids of other types
            raise NotTyped from None
        if len(items) != len(self.events):
            raise NotTyped
        text, _ = texts_array(items)
        del items
        return (
            text,
            self._arg_ints(ids, ("c0", "c1", "c2")),
            self._arg_ints(ids, ("e0", "e1", "e2")),
        )

    @staticmethod
    def _arg_ints(ids: list[_ArgIds], attrs: tuple[str, ...]) -> pa.Array:
        """One id column: per event, the first spelling present in its args (as the dict
        path: a present key wins even when its value is null or not an integer)."""
        n = len(ids)
        unset = msgspec.UNSET
        found: list[list[Any]] = []
        for a in attrs:
            vals = list(map(attrgetter(a), ids))
            if vals.count(unset) != n:
                found.append(vals)
        if not found:
            return pa.nulls(n, pa.int64())
        if len(found) == 1:
            vals = found[0]
            if unset in vals:
                vals = [None if v is unset else v for v in vals]
            return int_array(vals)
        out = pa.nulls(n, pa.int64())
        taken = np.zeros(n, dtype=bool)
        for vals in found:
            present = np.fromiter((v is not unset for v in vals), dtype=bool, count=n)
            ints = int_array([None if v is unset else v for v in vals])
            out = pc.if_else(pa.array(present & ~taken), ints, out)
            taken |= present
        return out
