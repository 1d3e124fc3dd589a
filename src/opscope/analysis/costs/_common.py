"""Shared pieces of the cost model: the :class:`Cost` record, dtypes, and the parsing of what
Kineto records per op call (``Input Dims``, ``Input type``, ``Input Strides``, ``Concrete Inputs``).

Everything here is pure Python on the recorded JSON values; nothing imports torch.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Bytes per element for the C++ type names Kineto writes in ``Input type`` (lower-cased).
_ITEMSIZE: dict[str, int] = {
    "double": 8,
    "float": 4,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "long int": 8,
    "long": 8,
    "int64_t": 8,
    "int": 4,
    "unsigned int": 4,
    "short int": 2,
    "short": 2,
    "unsigned short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e4m3fnuz": 1,
    "c10::float8_e5m2": 1,
    "c10::float8_e5m2fnuz": 1,
    "c10::float8_e8m0fnu": 1,
    "c10::float4_e2m1fn_x2": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::complex<c10::half>": 4,
    "c10::qint8": 1,
    "c10::quint8": 1,
    "c10::qint32": 4,
    "unsigned long": 8,
    "unsigned long int": 8,
}

# The compute class of a dtype, the key of a device's peak table.
_CLASS: dict[str, str] = {
    "double": "fp64",
    "float": "fp32",
    "c10::half": "fp16",
    "c10::bfloat16": "bf16",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
    "c10::complex<float>": "fp32",
    "c10::complex<double>": "fp64",
    "c10::complex<c10::half>": "fp16",
}

# torch's ScalarType enum (c10/core/ScalarType.h) as recorded in ``Concrete Inputs`` for a
# ``dtype=`` argument, mapped to the ``Input type`` spelling.
SCALAR_TYPE_CODES: dict[int, str] = {
    0: "unsigned char",
    1: "signed char",
    2: "short int",
    3: "int",
    4: "long int",
    5: "c10::Half",
    6: "float",
    7: "double",
    8: "c10::complex<c10::Half>",
    9: "c10::complex<float>",
    10: "c10::complex<double>",
    11: "bool",
    15: "c10::BFloat16",
    23: "c10::Float8_e5m2",
    24: "c10::Float8_e4m3fn",
    25: "c10::Float8_e5m2fnuz",
    26: "c10::Float8_e4m3fnuz",
}


@functools.lru_cache(maxsize=1024)
def itemsize(dtype: str | None) -> int | None:
    """Bytes per element of a recorded ``Input type``, None when it is not a tensor dtype
    (remembered per spelling: a trace holds a few, asked about thousands of times)."""
    if not dtype:
        return None
    return _ITEMSIZE.get(dtype.lower())


@functools.lru_cache(maxsize=1024)
def dtype_class(dtype: str | None) -> str | None:
    """``fp64``/``fp32``/``bf16``/``fp16``/``fp8`` for floating dtypes, else None."""
    if not dtype:
        return None
    return _CLASS.get(dtype.lower())


@dataclass(frozen=True)
class Cost:
    """Work of one call of an op.

    ``flops`` - floating-point operations (a multiply-add counts 2); ``bytes`` - the minimum
    bytes the call must move to and from memory (each operand read once, each result written
    once); ``formula`` - a short name of the formula used (documented in docs/cost-model.md);
    ``dtype`` - the compute class whose peak bounds it (``fp32``, ``bf16``, ...; None when
    unknown); ``matrix`` - whether it runs on matrix units (tensor cores) and so is bounded by
    the matrix peak of ``dtype`` rather than the vector one.
    """

    flops: float
    bytes: float
    formula: str
    dtype: str | None = None
    matrix: bool = False

    @property
    def intensity(self) -> float | None:
        """FLOPs per byte (None when nothing moves)."""
        return self.flops / self.bytes if self.bytes > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "flops": self.flops,
            "bytes": self.bytes,
            "formula": self.formula,
            "dtype": self.dtype,
            "matrix": self.matrix,
        }


class CostError(ValueError):
    """The recorded arguments do not fit the formula (the op then gets no cost)."""


@dataclass(frozen=True)
class Tensor:
    """One recorded tensor argument."""

    shape: tuple[int, ...]
    dtype: str
    strides: tuple[int, ...] | None = None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        size = itemsize(self.dtype)
        if size is None:
            raise CostError(f"not a tensor dtype: {self.dtype!r}")
        return size

    @property
    def storage_numel(self) -> int:
        """Distinct elements the tensor addresses: a broadcast dimension (stride 0) reads its
        element once, so an ``expand``-ed operand costs its storage, not its view."""
        if self.strides is None or len(self.strides) != len(self.shape):
            return self.numel
        return math.prod(d for d, s in zip(self.shape, self.strides, strict=True) if s != 0)

    @property
    def nbytes(self) -> int:
        """Bytes of the distinct elements (what reading the operand once moves)."""
        return self.storage_numel * self.itemsize


class Call:
    """The recorded arguments of one op call, with typed accessors."""

    def __init__(
        self,
        dims: Sequence[Any],
        types: Sequence[Any],
        strides: Sequence[Any] | None = None,
        concrete: Sequence[Any] | None = None,
    ) -> None:
        self.dims = list(dims)
        self.types = [str(t) if t is not None else "" for t in types]
        self.strides = list(strides) if strides is not None else None
        self.concrete = [str(c) if c is not None else "" for c in concrete] if concrete else []
        self._tensor: dict[int, bool] = {}  # is_tensor per argument, asked again and again

    def __len__(self) -> int:
        return len(self.dims)

    def is_tensor(self, i: int) -> bool:
        """Argument ``i`` is a tensor with a known dtype (a shape list, possibly empty = 0-d)."""
        got = self._tensor.get(i)
        if got is None:
            got = self._tensor[i] = self._is_tensor(i)
        return got

    def _is_tensor(self, i: int) -> bool:
        if i >= len(self.dims) or i >= len(self.types):
            return False
        d = self.dims[i]
        if not isinstance(d, list) or any(not isinstance(x, int) for x in d):
            return False
        return itemsize(self.types[i]) is not None

    def tensor(self, i: int) -> Tensor:
        if not self.is_tensor(i):
            raise CostError(f"argument {i} is not a tensor")
        st = None
        if self.strides is not None and i < len(self.strides):
            s = self.strides[i]
            if isinstance(s, list) and all(isinstance(x, int) for x in s):
                st = tuple(s)
        return Tensor(tuple(self.dims[i]), self.types[i], st)

    def opt_tensor(self, i: int) -> Tensor | None:
        return self.tensor(i) if self.is_tensor(i) else None

    def tensors(self) -> list[Tensor]:
        """Every tensor argument, in order."""
        return [self.tensor(i) for i in range(len(self.dims)) if self.is_tensor(i)]

    def raw(self, i: int) -> str:
        return self.concrete[i] if i < len(self.concrete) else ""

    def ints(self, i: int, n: int | None = None, default: int | None = None) -> tuple[int, ...]:
        """An int-list argument such as ``"[2, 2]"`` (a single ``"2"`` is repeated ``n`` times)."""
        text = self.raw(i).strip()
        if not text or text in ("None", "[]"):
            if default is None or n is None:
                raise CostError(f"argument {i} not recorded")
            return (default,) * n
        vals = tuple(int(v) for v in re.findall(r"-?\d+", text))
        if not vals:
            raise CostError(f"argument {i} is not an int list: {text!r}")
        if n is not None and len(vals) == 1 and n > 1:
            vals = vals * n
        if n is not None and len(vals) != n:
            raise CostError(f"argument {i}: expected {n} values, got {text!r}")
        return vals

    def int_(self, i: int, default: int | None = None) -> int:
        text = self.raw(i).strip()
        if not text or text == "None":
            if default is None:
                raise CostError(f"argument {i} not recorded")
            return default
        return int(float(text))

    def bool_(self, i: int, default: bool | None = None) -> bool:
        text = self.raw(i).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        if default is None:
            raise CostError(f"argument {i} is not a recorded bool: {text!r}")
        return default

    def dtype_code(self, i: int) -> str | None:
        """A ``dtype=`` argument recorded as a ScalarType code, as an ``Input type`` name."""
        text = self.raw(i).strip()
        if not text.isdigit():
            return None
        return SCALAR_TYPE_CODES.get(int(text))


def broadcast(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy/PyTorch broadcasting of shapes (raises :class:`CostError` when incompatible)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        padded = [1] * (ndim - len(s)) + list(s)
        for k, d in enumerate(padded):
            if d == out[k] or d == 1:
                continue
            if out[k] == 1:
                out[k] = d
            else:
                raise CostError(f"shapes do not broadcast: {shapes}")
    return tuple(out)


def promote(*dtypes: str) -> str:
    """The result dtype of tensors of these dtypes (the widest floating, else the widest)."""
    floats = [d for d in dtypes if dtype_class(d) is not None]
    pool = floats or list(dtypes)
    if not pool:
        raise CostError("no dtype")
    return max(pool, key=lambda d: itemsize(d) or 0)
