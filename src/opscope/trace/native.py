"""The optional C scanner: a run of trace events -> Arrow columns in one pass over the bytes.

Contract: :func:`scan` reads one run of ``traceEvents`` entries (objects separated by commas,
without the array's brackets; see :mod:`opscope.trace.jsonstream`) and returns its
:class:`Columns`, or None when the run holds anything outside the common shapes the scanner
reads (then :mod:`opscope.trace.rows` decodes it).  What it reads and how each value is
converted is listed at the top of ``_scan.c``; every value comes out as the typed decoder
gives it (tested on every shared trace and on generated events).

Why: decoding into Python objects (dicts, or msgspec structs) and then building Arrow arrays
from per-field lists costs several times more than reading the bytes.  The scanner writes the
columns directly, holds no Python object while it reads, and releases the GIL.

The extension is built at install when a C compiler is present (``setup.py``, optional); where
it is missing, or ``OPSCOPE_NATIVE=0`` is set, :func:`enabled` is False and every run goes
through the msgspec decoder, which gives the same table more slowly.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pyarrow as pa

_scan: ModuleType | None
_args: ModuleType | None
try:
    from opscope.trace import _scan
except ImportError:  # built without a C compiler
    _scan = None
try:
    from opscope.trace import _args
except ImportError:
    _args = None

AVAILABLE = _scan is not None and sys.byteorder == "little"


def enabled() -> bool:
    """Whether runs go through the C scanner (built, and not switched off by the environment)."""
    return AVAILABLE and os.environ.get("OPSCOPE_NATIVE", "1") != "0"


@dataclass(frozen=True)
class Columns:
    """One run's fields, one entry per event (see ``_scan.c`` for each conversion)."""

    n: int
    ph: pa.Array  # strings; "" where absent or null (as name, cat, pid, tid)
    name: pa.Array
    cat: pa.Array
    pid: pa.Array
    tid: pa.Array
    args: pa.Array  # compact JSON text; null where absent or an empty object
    ts_ns: np.ndarray  # int64; 0 where ts_flag is not 0
    ts_flag: np.ndarray  # uint8: 0 read, 1 absent, 2 null
    dur_ns: np.ndarray  # int64; 0 where absent or null
    flow_id: pa.Array  # int64, null where the event has no integer id
    correlation: pa.Array
    external_id: pa.Array
    starts: np.ndarray  # each event's byte offsets in the run
    ends: np.ndarray


def _strings(n: int, offsets: bytes, data: bytes) -> pa.Array:
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _validity(valid: np.ndarray) -> tuple[pa.Buffer | None, int]:
    """An Arrow validity bitmap (None when nothing is null) and the null count."""
    missing = len(valid) - int(np.count_nonzero(valid))
    return (pa.py_buffer(np.packbits(valid, bitorder="little")) if missing else None), missing


def _ints(n: int, values: bytes, ok: bytes) -> pa.Array:
    bitmap, missing = _validity(np.frombuffer(ok, dtype=np.bool_))
    return pa.Array.from_buffers(pa.int64(), n, [bitmap, pa.py_buffer(values)], missing)


def scan(piece: bytes) -> Columns | None:
    """One run of events -> its :class:`Columns`; None when the scanner does not read it."""
    if _scan is None:
        return None
    got = _scan.scan(piece)
    if got is None:
        return None
    n = got[0]
    ph, name, cat, pid, tid = (_strings(n, got[i], got[i + 1]) for i in range(1, 11, 2))
    offsets = np.frombuffer(got[11], dtype=np.int32)
    bitmap, missing = _validity(np.diff(offsets) > 2)  # "{}": no arguments
    args = pa.StringArray.from_buffers(
        n, pa.py_buffer(got[11]), pa.py_buffer(got[12]), bitmap, missing
    )
    return Columns(
        n=n,
        ph=ph,
        name=name,
        cat=cat,
        pid=pid,
        tid=tid,
        args=args,
        ts_ns=np.frombuffer(got[13], dtype=np.int64),
        ts_flag=np.frombuffer(got[14], dtype=np.uint8),
        dur_ns=np.frombuffer(got[15], dtype=np.int64),
        flow_id=_ints(n, got[16], got[17]),
        correlation=_ints(n, got[18], got[19]),
        external_id=_ints(n, got[20], got[21]),
        starts=np.frombuffer(got[22], dtype=np.int64),
        ends=np.frombuffer(got[23], dtype=np.int64),
    )


def top_values(
    texts: pa.Array, mask: np.ndarray | None, keys: tuple[str, ...]
) -> tuple[np.ndarray, list[pa.Array]] | None:
    """The text of each key's top-level value in compact JSON object ``texts`` (the rows of
    ``mask``; others, and null texts, give null), where it is what ``orjson.dumps`` writes of
    the decoded value (``_args.c`` says when), and the mask of the rows it is not sure of
    (their values are null: a decoder must read them).  None when the extension is not built
    (or switched off with ``OPSCOPE_NATIVE=0``) or gives up."""
    if _args is None or not enabled():
        return None
    n = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + n + 1]
    data = texts.buffers()[2]
    want = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool).copy()
    if texts.null_count:
        want &= np.asarray(texts.is_valid())
    got = _args.values(
        np.ascontiguousarray(offsets),
        data if data is not None else b"",
        n,
        want.view(np.uint8),
        tuple(k.encode() for k in keys),
    )
    if got is None:
        return None
    unsure = np.frombuffer(got[0], dtype=np.bool_)
    values = []
    for i in range(len(keys)):
        bitmap, offs, body = got[1 + 3 * i : 4 + 3 * i]
        values.append(
            pa.StringArray.from_buffers(
                n, pa.py_buffer(offs), pa.py_buffer(body), pa.py_buffer(bitmap)
            )
        )
    return unsure, values
