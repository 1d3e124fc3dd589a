"""What ``opscope optimize`` found (``opscope.optimize/1``, ``opscope.optimize(...)
.to_dict()``): the original's figures, each candidate (a rewrite to a fused built-in, a compile
mode, or both) compared with it, what was not tried and why, and the best candidate."""

from typing import Any, Literal

from opscope.documents._typing import NotRequired, TypedDict
from opscope.documents.compare import Latency
from opscope.documents.devices import CaptureDevice


class OptimizeBaseline(TypedDict):
    """The original, as the comparisons measured it."""

    latency_us: Latency | None
    device_ops_per_call: int | None
    """Device executions per call, from its profile."""
    device_us: NotRequired[float | None]
    findings: NotRequired[list[dict[str, Any]]]
    """The report's findings on the original (kind and title)."""


class OptimizeSpeedup(TypedDict):
    point: float
    """The original's median time over the candidate's, in the same interleaved run."""
    ci95: list[float | None]
    """95 % bootstrap interval (rounds resampled as pairs), ``[low, high]``."""
    statistic: NotRequired[str]
    """``ratio of medians``."""
    rounds: NotRequired[int]
    """Paired rounds the speedup is computed from."""
    outlier_rounds: NotRequired[int]
    """Rounds dropped: a block beyond ``Q3 + 3 IQR`` of its series."""


class OptimizePatchCheck(TypedDict):
    """The proof of a patch: the patched source run against the original."""

    max_abs_err: float | None
    """The largest difference of any output, over every input set."""
    inputs: int
    """Input sets compared (the example inputs, then fresh ones)."""
    params_randomised: bool
    """Every parameter perturbed and loaded into both models (False: none to perturb)."""
    parameters: NotRequired[int]
    builtin_calls: NotRequired[dict[str, int]]
    """Calls of each fused built-in the patched source made beyond the original's."""
    eval_mode: NotRequired[bool]
    """Compared in eval mode (the model's outputs are random while training)."""
    reason: NotRequired[str]
    """Why the patch is not proven."""


class OptimizeNearMiss(TypedDict):
    """A fusable chain that got no proven rewrite, and the step that kept it."""

    pattern: str
    where: str
    """``file.py:line (function)``, or the scope a finding of the profile names."""
    reason: str


class OptimizeTiming(TypedDict):
    threads: int
    """``torch.set_num_threads`` while optimizing."""
    threads_before: int
    min_run_s: float
    clock: NotRequired[Literal["process_cpu", "wall"]]
    """What each block was timed with: the process's CPU time on a CPU where torch runs one
    thread (other processes' load is not in it), else the wall clock."""
    rounds: NotRequired[int]
    """Interleaved rounds of the one timing run."""
    more_runs: NotRequired[int]
    """Sets of interleaved rounds appended while a verdict was open."""
    outlier_rounds: NotRequired[int]
    """Rounds dropped from every series (a block of any variant beyond ``Q3 + 3 IQR`` of its
    own series): the medians and speedups are of the rest."""


class OptimizeCandidate(TypedDict):
    name: str
    """``rewrite:<pattern>``, ``rewrite:all``, ``compile:<mode>``, ``compile+rewrites``."""
    kind: Literal["rewrite", "compile", "combined"]
    patterns: list[str]
    """``rms_norm``, ``layer_norm``, ``sdpa``, ``gelu_tanh``, ``gelu_erf``, ``silu``,
    ``linear``."""
    numerics_ok: bool
    max_abs_err: float | None
    speedup: OptimizeSpeedup | None
    verdict: Literal["faster", "same", "slower", "failed"]
    reason: str | None
    """Why it is not faster, or failed."""
    device_ops_per_call: int | None
    compile_s: float | None
    latency_us: NotRequired[Latency | None]
    patch: str | None
    """A unified diff of the user's source (``a/`` ``b/`` paths, for ``patch -p1`` and ``git
    apply``), or the line that compiles the target, or both (``compile+rewrites``)."""
    patch_verified: bool
    """The patched source was run and gave the original's outputs (always False for a compile
    mode alone, which changes no source)."""
    patch_check: OptimizePatchCheck | None


class OptimizeNotTried(TypedDict):
    name: str
    kind: str
    patterns: list[str]
    reason: str
    patch: NotRequired[str]
    """A rewrite's patch, proven but not timed (the budget ran out), or a compile mode's
    line."""
    patch_verified: NotRequired[bool]


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
    """The candidate to use: faster, numerics and patch proven; of those that do not separate
    from the fastest, the first tried."""
    best_note: NotRequired[str | None]
    """How the best separates from the runner-up, or that it does not."""
    tied_with: NotRequired[list[str]]
    """The faster candidates that do not separate from the best."""
    near_misses: list[OptimizeNearMiss]
    timing: NotRequired[OptimizeTiming]
    budget_s: NotRequired[float]
    elapsed_s: NotRequired[float]
    notes: NotRequired[list[str]]


__all__ = [
    "Optimize",
    "OptimizeBaseline",
    "OptimizeCandidate",
    "OptimizeNearMiss",
    "OptimizeNotTried",
    "OptimizePatchCheck",
    "OptimizeSpeedup",
    "OptimizeTiming",
]
