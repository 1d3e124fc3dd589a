"""The reference study: RMSNorm three ways, profiled and timed on the device at hand.

Variants (identical inputs for all):

* ``naive``    - eager ops: ``x*x``, ``mean``, ``rsqrt(mean + eps)``, ``x*rms*weight``
* ``builtin``  - ``torch.rms_norm`` (one fused kernel where the backend has one)
* ``compiled`` - ``torch.compile(naive, fullgraph=True)``

For each variant and shape: the first call runs under :func:`watch_compile` (compile time is
reported, never measured as steady state); numerics are checked against ``naive``; latency is
measured in steady state (blocks of calls with device synchronisation, median and IQR); and one
profile with the same schedule for every variant (wait 2, warmup 1, active 1) yields the device
ops dispatched per call, device time and CPU time from the exported trace.  A failing variant is
reported in its row with the reason; the others still run.

This module returns data; ``opscope demo`` renders it.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opscope.bench.compare import VariantOutcome
from opscope.errors import OpscopeError

if TYPE_CHECKING:
    from opscope.analysis.report import Report

EPS = 1e-6
DEFAULT_SHAPES: tuple[tuple[tuple[int, ...], str], ...] = (
    ((4, 512), "bfloat16"),
    ((4096, 4096), "float32"),
)
VARIANTS = ("naive", "builtin", "compiled")
SCHEDULE = {"wait": 2, "warmup": 1, "active": 1}
DTYPES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
    "fp64": "float64",
    "float64": "float64",
    "double": "float64",
}


def naive_rmsnorm(x: Any, weight: Any, eps: float = EPS) -> Any:
    """RMSNorm as separate eager ops: six device ops on most backends."""
    import torch

    ms = (x * x).mean(-1, keepdim=True)
    rms = torch.rsqrt(ms + eps)
    return x * rms * weight


def builtin_rmsnorm(x: Any, weight: Any, eps: float = EPS) -> Any:
    """``torch.rms_norm``: the backend's fused kernel."""
    import torch

    return torch.rms_norm(x, (x.shape[-1],), weight, eps)


def parse_shape(text: str) -> tuple[tuple[int, ...], str]:
    """``"4x512"`` or ``"4x512:bf16"`` -> ((4, 512), "bfloat16"); dtype defaults to float32."""
    dims_text, _, dtype_text = text.strip().partition(":")
    try:
        dims = tuple(int(d) for d in dims_text.lower().replace("×", "x").split("x"))
    except ValueError:
        raise OpscopeError(
            f"shape {text!r}: expected dimensions like 4x512 or 4096x4096:fp32"
        ) from None
    if not dims or any(d <= 0 for d in dims):
        raise OpscopeError(f"shape {text!r}: dimensions must be positive integers")
    dtype = DTYPES.get((dtype_text or "float32").lower())
    if dtype is None:
        raise OpscopeError(
            f"shape {text!r}: unknown dtype {dtype_text!r}; choose one of bf16, fp16, fp32, fp64"
        )
    return dims, dtype


def demo_row(o: VariantOutcome) -> dict[str, Any]:
    """One variant of a comparison as the ``opscope.demo/1`` document writes it."""
    return {
        "name": o.name,
        "device_ops": o.device_ops,
        "device_us": o.device_us,
        "cpu_us": o.cpu_us,
        "latency_us": o.latency_us(),
        "compile_s": o.compile_s,
        "numerics_ok": o.numerics_ok,
        "max_abs_err": None if o.numerics is None else o.numerics["max_abs_err"],
        "max_rel_err": None if o.numerics is None else o.numerics["max_rel_err"],
        "speedup_vs_naive": o.speedup,
        "speedup_ci95": None if o.speedup_ci95 is None else list(o.speedup_ci95),
        "verdict": o.verdict,
        "run_dir": o.run_dir,
        "error": o.error,
    }


@dataclass
class ShapeResult:
    shape: tuple[int, ...]
    dtype: str
    variants: list[VariantOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the comparison's (e.g. CPU threads)

    def variant(self, name: str) -> VariantOutcome | None:
        return next((v for v in self.variants if v.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "variants": [demo_row(v) for v in self.variants],
            "notes": list(self.notes),
        }


@dataclass
class StudyResult:
    device: dict[str, Any]
    shapes: list[ShapeResult] = field(default_factory=list)

    @property
    def run_dirs(self) -> list[str]:
        return [v.run_dir for s in self.shapes for v in s.variants if v.run_dir]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "opscope.demo/1",
            "device": self.device,
            "schedule": SCHEDULE,
            "shapes": [s.to_dict() for s in self.shapes],
            "reading": reading(self),
            "notes": self.notes,
            "run_dirs": self.run_dirs,
        }

    @property
    def notes(self) -> list[str]:
        """The comparisons' notes, each once, in order."""
        return list(dict.fromkeys(n for s in self.shapes for n in s.notes))


def reading(result: StudyResult) -> list[str]:
    """A short plain-language reading of the result, one sentence per shape."""
    lines: list[str] = []
    on = "the CPU" if result.device.get("kind") == "cpu" else str(result.device.get("name"))
    for s in result.shapes:
        label = "×".join(map(str, s.shape)) + f" {s.dtype}"
        naive, comp, built = s.variant("naive"), s.variant("compiled"), s.variant("builtin")
        bad = [v.name for v in s.variants if v.numerics is not None and not v.numerics_ok]
        failed = [v.name for v in s.variants if v.error]
        parts: list[str] = []
        if naive and comp and comp.speedup and naive.device_ops is not None:
            sp = comp.speedup
            ops_text = f"{naive.device_ops} separate ops" if naive.device_ops else "separate ops"
            fused = (
                f"{comp.device_ops} fused kernel{'s' if comp.device_ops != 1 else ''}"
                if comp.device_ops
                else "one compiled region"
            )
            if sp < 0.95:
                parts.append(
                    f"at {label} the compiled region is {1 / sp:.1f}× slower than naive on {on}: "
                    "per-call overhead (guards, wrapper) dominates work this small"
                )
            elif sp > 1.05:
                parts.append(
                    f"at {label} the compiled region is {sp:.1f}× faster than naive on {on}: "
                    f"{fused} instead of {ops_text}"
                )
            else:
                parts.append(f"at {label} compiled and naive take about the same time on {on}")
        if built and built.speedup:
            parts.append(f"torch.rms_norm runs at {built.speedup:.1f}× naive")
        if bad:
            parts.append(f"numerics differ beyond tolerance for: {', '.join(bad)}")
        if failed:
            parts.append(f"failed: {', '.join(failed)}")
        if parts:
            lines.append("; ".join(parts) + ".")
    return lines


Progress = Callable[[str], None]
OnReport = Callable[["Report", Path, "VariantOutcome"], None]


def _noop(_: str) -> None:
    return None


def check_fits(numel: int, dtype: str, device: Any) -> None:
    """Refuse a shape whose tensors cannot fit in the device's memory, with one line."""
    import torch

    itemsize = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    # input, weight, output and the naive variant's intermediates (x*x, mean, x*rms)
    need = numel * itemsize * 6
    free: int | None = None
    if device.kind == "cpu":
        with contextlib.suppress(ValueError, OSError, AttributeError):
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    elif device.kind in ("cuda", "rocm"):
        with contextlib.suppress(Exception):
            free = int(torch.cuda.mem_get_info(device.index or 0)[0])
    if free is not None and need > free:
        raise OpscopeError(
            f"shape of {numel} elements ({need / 2**30:.1f} GiB with intermediates) does not fit "
            f"in the {free / 2**30:.1f} GiB free on {device.torch_device}"
        )


@contextlib.contextmanager
def kernel_events(device_kind: str) -> Iterator[None]:
    """On the CPU, make Inductor's generated C++ kernels record profiler events, so the trace
    shows the fused kernel that ran (not only the wrapper around it), and device ops per call
    count them.  Wrap the first call (the compile) in it; ``opscope optimize`` does too."""
    if device_kind != "cpu":
        yield
        return
    try:
        import torch._inductor.config as inductor_config

        patch = inductor_config.patch({"cpp.enable_kernel_profile": True})
    except Exception:  # older torch without the option: the wrapper event still shows
        yield
        return
    with patch:
        yield


def run_study(
    *,
    device: str | None = None,
    shapes: tuple[tuple[tuple[int, ...], str], ...] = DEFAULT_SHAPES,
    out: str | os.PathLike[str] = "opscope-runs",
    variants: tuple[str, ...] = VARIANTS,
    progress: Progress = _noop,
    min_run_s: float = 0.3,
    on_report: OnReport | None = None,
) -> StudyResult:
    """Run the study; see the module docstring.

    Each shape is one :func:`opscope.bench.compare.run_comparison` with ``naive`` as the
    reference.  ``on_report(report, run_dir, variant)`` is called after each variant's profile
    has been analysed (the CLI writes ``report.json``/``report.html`` there).
    """
    import torch

    from opscope.bench.compare import run_comparison
    from opscope.capture.devices import resolve_device

    spec = resolve_device(device)
    result = StudyResult(device=spec.to_dict())
    for dims, dtype in shapes:
        check_fits(math.prod(dims), dtype, spec)
        label = "x".join(map(str, dims)) + f"-{dtype}"
        gen = torch.Generator().manual_seed(0)
        try:
            x = torch.randn(dims, generator=gen, dtype=torch.float32).to(
                device=spec.torch_device, dtype=getattr(torch, dtype)
            )
            weight = (1 + 0.1 * torch.randn(dims[-1], generator=gen)).to(
                device=spec.torch_device, dtype=getattr(torch, dtype)
            )
        except (RuntimeError, MemoryError) as exc:  # torch.OutOfMemoryError is a RuntimeError
            raise OpscopeError(f"cannot allocate inputs of shape {dims} {dtype}: {exc}") from None
        fns: dict[str, Callable[..., Any]] = {}
        for name in variants:
            if name == "naive":
                fns[name] = naive_rmsnorm
            elif name == "builtin":
                fns[name] = builtin_rmsnorm
            elif name == "compiled":
                torch._dynamo.reset()  # each shape compiles afresh: honest compile times
                fns[name] = torch.compile(naive_rmsnorm, fullgraph=True, dynamic=False)
            else:
                raise OpscopeError(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")

        def shape_progress(msg: str, label: str = label) -> None:
            if msg.startswith("compiled: first call"):
                msg = "compiled: compiling (the first compile takes a while)"
            progress(f"{label}: {msg}")

        data = run_comparison(
            fns,
            (x, weight),
            reference="naive",
            device=spec,
            min_run_s=min_run_s,
            out=out,
            label=label,
            progress=shape_progress,
            first_call_context=lambda: kernel_events(spec.kind),
            on_report=on_report,
        )
        shape_res = ShapeResult(
            shape=dims, dtype=dtype, variants=list(data.variants), notes=list(data.notes)
        )
        result.shapes.append(shape_res)
        del x, weight, fns
    return result
