"""Kineto times -> integer nanoseconds, exactly.

Kineto writes ``ts``/``dur`` in microseconds with up to three decimals, relative to
``baseTimeNanoseconds`` when that key is present (torch >= 2.0) and as Unix-epoch microseconds
before.  Nanoseconds are exact.  The typed decoder reads every ``ts`` from its text (plain
decimals through Arrow's exact ``decimal128(19, 3)`` cast, :func:`_decimal_text_ns`).  The dict
path multiplies integers; below 2**43 µs (about 100 days) doubles are closer than 1 ns, so
the whole microseconds and the fraction, taken apart, give the written three decimals back;
a run with larger values (Unix-epoch microseconds with a nanosecond part) raises
:class:`NeedsQuoting` and is decoded again with them quoted, converted digit by digit.
Times are never rounded to µs.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from opscope.trace.rows import infer, null_mask, raw_value, texts_array, to_np_int

_INT64_MAX = 2**63 - 1
_US_LIMIT = 9_000_000_000_000_000  # |µs| * 1000 must stay inside int64
# Below 2**43 µs the doubles are less than 1 ns apart, so the double nearest to a value written
# with three decimals gives those decimals back exactly; above it the text must be read.
_LONG_FLOAT_US = float(2**43)


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


class NeedsQuoting(Exception):
    """A run holds float timestamps a double cannot carry: decode it again, quoted."""


def times_ns(
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


def text_times_ns(raws: list[msgspec.Raw]) -> tuple[np.ndarray, np.ndarray]:
    """(ns, bad) for timestamps kept as their JSON text (empty: absent): plain decimals all at
    once; anything else (strings, null, signs, exponents) value by value, numbers from their
    text so that no digit is lost."""
    arr, _ = texts_array(raws, objects_only=False)
    got = _decimal_text_ns(arr)
    if got is not None:
        return got, np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return times_ns([raw_value(bytes(r)) for r in raws], missing_ok=False)
