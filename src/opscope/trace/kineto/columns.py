"""What one Kineto document becomes (:class:`KinetoParse`), its column schemas, and the text
columns every conversion builds the same way."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy.ma  # noqa: F401 (pyarrow imports it on its first array from NumPy: do it at import)
import pyarrow as pa

from opscope.trace.rows import DictRows, StructRows, infer

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError)


def clean_str(v: Any, missing: str) -> str:
    if v is None:
        return missing
    s = v if type(v) is str else str(v)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from \ud800-style escapes
        s = s.encode("utf-8", "replace").decode("utf-8")
    return s


def str_array(values: list[Any], missing: str = "") -> pa.Array:
    try:
        arr = pa.array(values, pa.string())
        return arr.fill_null(missing) if arr.null_count else arr
    except (*_ARROW_ERRORS, UnicodeEncodeError):
        return pa.array([clean_str(v, missing) for v in values], pa.string())


def id_str_array(values: list[Any]) -> pa.Array:
    """pid/tid as text (traces use integers and strings alike)."""
    arr = infer(values)
    if arr is not None and (
        pa.types.is_integer(arr.type) or pa.types.is_string(arr.type) or pa.types.is_null(arr.type)
    ):
        arr = arr.cast(pa.string())
        return arr.fill_null("") if arr.null_count else arr
    return str_array(values)


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

RAW_SCHEMA = pa.schema(
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
FLOW_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ph", pa.string()),
        ("cat", pa.string()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("ts_ns", pa.int64()),
    ]
)
