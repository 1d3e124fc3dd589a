"""What ``opscope optimize`` found (``opscope.optimize/1``, ``opscope.optimize(...)
.to_dict()``): the original's figures, each candidate (a rewrite to a fused built-in, a compile
mode, or both) compared with it, what was not tried and why, and the best candidate."""

from typing import Any, Literal

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.compare import Latency, Speedup
from opscope.documents.devices import CaptureDevice


class OptimizeBaseline(TypedDict):
    """The original, as the comparisons measured it."""

    latency_us: Latency | None
    device_ops_per_call: int | None
    """Device executions per call, from its profile."""
    device_us: NotRequired[float | None]
    findings: NotRequired[list[dict[str, Any]]]
    """The report's findings on the original (kind and title)."""


class OptimizeCandidate(TypedDict):
    name: str
    """``rewrite:<pattern>``, ``rewrite:all``, ``compile:<mode>``, ``compile+rewrites``."""
    kind: Literal["rewrite", "compile", "combined"]
    patterns: list[str]
    """``rms_norm``, ``layer_norm``, ``sdpa``, ``gelu_tanh``, ``silu``, ``linear``."""
    numerics_ok: bool
    max_abs_err: float | None
    speedup: Speedup | None
    verdict: Literal["faster", "same", "slower", "failed"]
    reason: str | None
    """Why it is not faster, or failed."""
    device_ops_per_call: int | None
    compile_s: float | None
    latency_us: NotRequired[Latency | None]
    patch: str | None
    """A unified diff of the user's source, or the line that compiles the target."""


class OptimizeNotTried(TypedDict):
    name: str
    kind: str
    patterns: list[str]
    reason: str


class Optimize(TypedDict):
    """The candidates that would make a block faster, each proven or refuted
    (``opscope.optimize/1``)."""

    schema: Literal["opscope.optimize/1"]
    target: str
    device: CaptureDevice
    baseline: OptimizeBaseline
    capture: NotRequired[dict[str, Any]]
    """How the graph was captured, the error when it was not, the matches."""
    candidates: list[OptimizeCandidate]
    not_tried: NotRequired[list[OptimizeNotTried]]
    best: str | None
    budget_s: NotRequired[float]
    elapsed_s: NotRequired[float]
    notes: NotRequired[list[str]]


__all__ = ["Optimize", "OptimizeBaseline", "OptimizeCandidate", "OptimizeNotTried"]
