"""Sizes of collectives as traces record them: element counts and tensor types in an event's
``args`` (``record_param_comms``'s ``In msg nelems`` / ``dtype``, ``record_shapes``'
``Input Dims`` / ``Input type``) and the bytes they make."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: Element sizes by ScalarType name, as ``record_param_comms`` spells the ``dtype``.
DTYPE_BYTES = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Int": 4,
    "Long": 8,
    "Short": 2,
    "Byte": 1,
    "Char": 1,
    "Bool": 1,
    "ComplexHalf": 4,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
    "QInt8": 1,
    "QUInt8": 1,
    "QInt32": 4,
    "QUInt4x2": 1,
    "QUInt2x4": 1,
    "Float8_e4m3fn": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2": 1,
    "Float8_e5m2fnuz": 1,
    "Float8_e8m0fnu": 1,
    "Float4_e2m1fn_x2": 1,
}
# ``Input type`` (record_shapes) spells C++ types: the ScalarType of each
_CPP_TYPES = {
    "float": "Float",
    "double": "Double",
    "int": "Int",
    "long": "Long",
    "long int": "Long",
    "long long": "Long",
    "int64_t": "Long",
    "short": "Short",
    "short int": "Short",
    "unsigned char": "Byte",
    "signed char": "Char",
    "bool": "Bool",
    "c10::complex<float>": "ComplexFloat",
    "c10::complex<double>": "ComplexDouble",
    "c10::complex<c10::Half>": "ComplexHalf",
    "unsigned short": "UInt16",
    "unsigned int": "UInt32",
    "unsigned long": "UInt64",
}


def scalar_type(spelling: Any) -> str | None:
    """A tensor type as ScalarType name (``float`` -> ``Float``, ``c10::BFloat16`` ->
    ``BFloat16``); None for what is not a tensor type (``TensorList``, ``Scalar``, ``""``)."""
    if not isinstance(spelling, str) or not spelling:
        return None
    if spelling in DTYPE_BYTES:
        return spelling
    if spelling in _CPP_TYPES:
        return _CPP_TYPES[spelling]
    bare = spelling.removeprefix("c10::")
    return bare if bare in DTYPE_BYTES else None


def _nelems(dims: Any) -> int | None:
    """Elements of one recorded argument: a shape (``[96, 64]``), a tensor list's shapes
    (``[[96, 64], [96]]``, summed), None when nothing is recorded."""
    if not isinstance(dims, list) or not dims:
        return None
    if all(isinstance(d, int) for d in dims):
        return math.prod(dims)
    total = [_nelems(d) for d in dims]
    known = [t for t in total if t is not None]
    return sum(known) if known else None


def shape_size(args: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """(elements of the largest recorded argument, first tensor type) of an event's args."""
    dims = args.get("Input Dims")
    types = args.get("Input type")
    counts = [_nelems(d) for d in dims] if isinstance(dims, list) else []
    known = [c for c in counts if c is not None]
    dtype = None
    if isinstance(types, list):
        dtype = next((t for t in map(scalar_type, types) if t is not None), None)
    return (max(known) if known else None), dtype


def int_arg(args: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def bytes_of(nelems: int | None, dtype: str | None) -> int | None:
    """``nelems`` elements of ``dtype`` in bytes; None when either is unknown."""
    if nelems is None or dtype is None or dtype not in DTYPE_BYTES:
        return None
    return int(nelems) * DTYPE_BYTES[dtype]
