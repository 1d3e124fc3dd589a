"""Compare variants honestly: identical inputs, numerics checked, compile time apart,
interleaved steady-state timing, speedups with confidence intervals and a verdict.

For each variant (``name -> callable``) on the same inputs:

1. **first call** under :func:`~opscope.capture.compile_metrics.watch_compile`: its time is the
   compile time when Dynamo compiled anything (``compile_s``), else ``None``;
2. **numerics** against the reference variant's output (:mod:`.numerics`);
3. **steady-state latency**, all variants measured in interleaved rounds
   (:func:`.timing.measure_interleaved`) inside a second ``watch_compile``: a variant that
   compiles again while being measured is flagged ``recompiled`` (its steady state is not
   steady) and gets no verdict other than ``unstable``;
4. optionally one **profile** per variant with the same schedule (device ops, device time and
   CPU time per call from the exported trace);
5. **speedup** over the reference: the median of the per-round ratios (blocks timed back to
   back, so drift cancels), with a 95% percentile-bootstrap interval over the rounds (seeded,
   so a result is reproducible), and a **verdict**: ``faster`` or
   ``slower`` only when the interval excludes 1 *and* the difference exceeds the noise floor
   (:data:`NOISE_FLOOR`, or the wander of the median per-round speedup if larger); else
   ``same``.  A variant whose result differs from the reference's gets ``differs``, never
   ``faster`` or ``slower`` (its speedup is still given).

Returns data (:class:`ComparisonData`); ``opscope.compare`` wraps it for printing.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from opscope.bench.timing import Timing, measure_interleaved

if TYPE_CHECKING:
    from opscope.analysis.report import Report

SCHEMA = "opscope.compare/1"
NOISE_FLOOR = 0.03  # below 3% no speedup is claimed: what these machines vary run to run
BOOTSTRAP_RESAMPLES = 2000
SCHEDULE = {"wait": 2, "warmup": 1, "active": 1}

OnReport = Callable[["Report", Path, "VariantOutcome"], None]


@dataclass
class VariantOutcome:
    name: str
    error: str | None = None
    compile_s: float | None = None
    compile: dict[str, Any] | None = None
    numerics: dict[str, Any] | None = None
    timing: Timing | None = None
    recompiled: bool = False
    device_ops: int | None = None
    device_us: float | None = None
    cpu_us: float | None = None
    run_dir: str | None = None
    speedup: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    # faster | slower | same | unstable | differs (numerics failed) | reference | error
    verdict: str | None = None

    @property
    def numerics_ok(self) -> bool:
        return bool(self.numerics and self.numerics.get("ok"))

    def latency_us(self) -> dict[str, Any] | None:
        if self.timing is None:
            return None
        d = self.timing.to_dict()
        return {"median": d["median"], "iqr": d["iqr"], "ci95": d["ci95"]}

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "numerics_ok": self.numerics_ok,
            "max_abs_err": None if self.numerics is None else self.numerics["max_abs_err"],
            "max_rel_err": None if self.numerics is None else self.numerics["max_rel_err"],
            "numerics_reason": None if self.numerics is None else self.numerics.get("reason"),
            "compile_s": self.compile_s,
            "recompiled_during_measurement": self.recompiled,
            "latency_us": self.latency_us(),
            "device_ops": self.device_ops,
            "device_us": self.device_us,
            "cpu_us": self.cpu_us,
            "speedup": None
            if self.speedup is None
            else {"point": self.speedup, "ci95": list(self.speedup_ci95 or (None, None))},
            "verdict": self.verdict,
            "run_dir": self.run_dir,
            "error": self.error,
        }


@dataclass
class ComparisonData:
    device: dict[str, Any]
    reference: str
    variants: list[VariantOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # about the measurement itself

    def variant(self, name: str) -> VariantOutcome | None:
        return next((v for v in self.variants if v.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "device": self.device,
            "reference": self.reference,
            "noise_floor": NOISE_FLOOR,
            "variants": [v.to_dict() for v in self.variants],
            "notes": list(self.notes),
        }


def speedup_ci(
    reference_s: tuple[float, ...] | list[float],
    variant_s: tuple[float, ...] | list[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    paired: bool | None = None,
    of_medians: bool = False,
) -> tuple[float, tuple[float, float]]:
    """Speedup of the variant over the reference and its 95% percentile-bootstrap interval.

    Paired (the default when both have as many samples, as interleaved rounds give): the
    speedup of each round is ``reference / variant`` of the blocks timed back to back, so drift
    of the machine between rounds cancels; the point is their median.  Unpaired: the ratio of
    the medians, resampling each side independently.  ``of_medians`` (paired): the point is
    the ratio of the two medians - the figure the medians printed beside it give - and the
    rounds are resampled as pairs.
    """
    a = np.asarray(reference_s, dtype=np.float64)
    b = np.asarray(variant_s, dtype=np.float64)
    rng = np.random.default_rng(seed)
    if paired is None:
        paired = len(a) == len(b)
    if paired and of_medians:
        if len(a) != len(b):
            raise ValueError("paired samples must have the same length")
        point = float(np.median(a) / np.median(b))
        idx = rng.integers(0, len(a), size=(resamples, len(a)))
        ratios = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
    elif paired:
        if len(a) != len(b):
            raise ValueError("paired samples must have the same length")
        r = a / b
        point = float(np.median(r))
        idx = rng.integers(0, len(r), size=(resamples, len(r)))
        ratios = np.median(r[idx], axis=1)
    else:
        point = float(np.median(a) / np.median(b))
        ia = rng.integers(0, len(a), size=(resamples, len(a)))
        ib = rng.integers(0, len(b), size=(resamples, len(b)))
        ratios = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return point, (float(lo), float(hi))


def verdict(
    point: float, ci: tuple[float, float], rel_noise: float = 0.0, floor: float = NOISE_FLOOR
) -> str:
    """``faster``/``slower`` only when the interval excludes 1 and the change exceeds the noise.

    The change is compared on a log scale (``ln point`` against the relative noise): about
    ``point - 1`` for small changes, and scale-free for large ones, whose per-round ratios
    spread in proportion to the speedup itself (a 5x speedup whose rounds range 3x-20x is
    faster, not 'same')."""
    noise = max(floor, rel_noise)
    if point <= 0:
        return "same"
    change = math.log(point)
    if ci[0] > 1.0 and change > noise:
        return "faster"
    if ci[1] < 1.0 and -change > noise:
        return "slower"
    return "same"


def _rel_iqr(t: Timing) -> float:
    s = t.summary
    return s.iqr / s.median if s.median > 0 else 0.0


def _paired_noise(ref: Timing, var: Timing) -> float:
    """How far the median per-round speedup wanders from run to run, relatively: the IQR of
    the rounds' log speedups over sqrt(rounds) (about the standard error of their median).
    The spread of single rounds themselves would call a 3x speedup 'same' on a loaded
    machine."""
    a = np.asarray(ref.samples_s)
    b = np.asarray(var.samples_s)
    if len(a) != len(b) or len(a) < 4:
        return 0.5 * (_rel_iqr(ref) + _rel_iqr(var))
    return paired_noise(a, b)


def paired_noise(ref_s: Any, var_s: Any) -> float:
    """:func:`_paired_noise` of two equally long series of per-round seconds."""
    a = np.asarray(ref_s, dtype=np.float64)
    b = np.asarray(var_s, dtype=np.float64)
    # on log ratios: relative noise, as verdict() compares it
    q1, q3 = np.percentile(np.log(a / b), [25, 75])
    return float((q3 - q1) / np.sqrt(len(a)))


def cpu_threads_note(threads: int | None = None, cores: int | None = None) -> str | None:
    """A warning when torch's intra-op threads cover every core of a small machine: other load
    then phase-locks with the thread pool and can make one of two identical functions
    consistently slower for a whole run (measured on a 2-core machine under a background load:
    3 false verdicts in 16 runs with 2 threads, none in 20 with 1)."""
    if threads is None:
        import torch

        threads = torch.get_num_threads()
    cores = cores if cores is not None else (os.cpu_count() or 1)
    if cores > 4 or threads < cores or cores < 2:
        return None
    return (
        f"torch runs {threads} intra-op threads on this {cores}-core machine: any other load "
        "can skew one variant for a whole run; for steadier numbers, "
        f"torch.set_num_threads({cores - 1})"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def run_comparison(
    variants: Mapping[str, Callable[..., Any]],
    inputs: tuple[Any, ...] | Callable[[], tuple[Any, ...]],
    *,
    reference: str | None = None,
    device: Any = None,
    rtol: float | None = None,
    atol: float | None = None,
    min_run_s: float = 0.3,
    profile: bool = True,
    out: str | os.PathLike[str] = "opscope-runs",
    label: str | None = None,
    progress: Callable[[str], None] = lambda _msg: None,
    first_call_context: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    on_report: OnReport | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> ComparisonData:
    """Run the comparison; see the module docstring.  A variant that raises carries the error in
    its row; the others still run.  ``clock``: what the steady-state blocks are timed with
    (wall time by default)."""
    from opscope.bench.numerics import compare_outputs
    from opscope.capture.compile_metrics import watch_compile
    from opscope.capture.devices import DeviceSpec, resolve_device

    if not variants:
        raise ValueError("no variants to compare")
    names = list(variants)
    ref_name = reference or names[0]
    if ref_name not in variants:
        raise ValueError(f"reference {ref_name!r} is not one of the variants: {', '.join(names)}")
    spec = device if isinstance(device, DeviceSpec) else resolve_device(device)
    args = inputs() if callable(inputs) else tuple(inputs)
    result = ComparisonData(device=spec.to_dict(), reference=ref_name)
    if spec.kind == "cpu":
        note = cpu_threads_note()
        if note:
            result.notes.append(note)
    outcomes = {n: VariantOutcome(name=n) for n in names}
    outputs: dict[str, Any] = {}
    ctx_factory = first_call_context or contextlib.nullcontext

    # 1. first call (compile) - the reference first, so numerics can be checked as we go
    order = [ref_name] + [n for n in names if n != ref_name]
    for n in order:
        progress(f"{n}: first call")
        try:
            with ctx_factory(), watch_compile(label=f"{label or 'compare'}-{n}") as rec:
                outputs[n] = variants[n](*args)
                spec.synchronize()
            outcomes[n].compile = rec.to_dict()
            if rec.frames_compiled or rec.compile_ids:
                outcomes[n].compile_s = rec.wall_s
        except Exception as exc:  # reported in the row
            outcomes[n].error = f"first call: {_first_line(exc)}"
            outcomes[n].verdict = "error"

    # 2. numerics against the reference
    ref_out = outputs.get(ref_name)
    for n in names:
        if outcomes[n].error is not None or ref_out is None:
            continue
        outcomes[n].numerics = compare_outputs(outputs[n], ref_out, rtol=rtol, atol=atol).to_dict()
    outputs.clear()

    # 3. interleaved steady-state timing of every variant that ran
    alive = {n: variants[n] for n in names if outcomes[n].error is None}
    if alive:
        progress("timing " + ", ".join(alive))
        fns: dict[str, Callable[[], Any]] = {
            n: functools.partial(f, *args) for n, f in alive.items()
        }
        try:
            with watch_compile(label="measurement") as during:
                timings = measure_interleaved(
                    fns, spec.synchronize, min_run_s=min_run_s, clock=clock
                )
        except Exception as exc:
            for n in alive:
                outcomes[n].error = f"timing: {_first_line(exc)}"
                outcomes[n].verdict = "error"
            timings = {}
        for n, t in timings.items():
            outcomes[n].timing = t
        if during.frames_compiled or during.recompiles:
            # attribute to the compiled variants; the record is process-wide
            for n in timings:
                c = outcomes[n].compile or {}
                if c.get("frames_compiled") or c.get("compile_ids"):
                    outcomes[n].recompiled = True

    # 4. profile each variant with the same schedule
    if profile:
        for n in names:
            if outcomes[n].error is not None:
                continue
            progress(f"{n}: profiling")
            _profile_variant(
                outcomes[n],
                variants[n],
                args=args,
                spec=spec,
                out=out,
                label=label,
                on_report=on_report,
            )

    # 5. speedups and verdicts
    ref_t = outcomes[ref_name].timing
    for n in names:
        o = outcomes[n]
        if o.error is not None or o.timing is None:
            o.verdict = o.verdict or "error"
            continue
        if n == ref_name:
            o.speedup, o.speedup_ci95, o.verdict = 1.0, (1.0, 1.0), "reference"
            continue
        if ref_t is None:
            continue
        o.speedup, o.speedup_ci95 = speedup_ci(ref_t.samples_s, o.timing.samples_s)
        # the noise that pairing does not remove (see _paired_noise)
        noise = _paired_noise(ref_t, o.timing)
        o.verdict = "unstable" if o.recompiled else verdict(o.speedup, o.speedup_ci95, noise)
        if o.numerics is not None and not o.numerics_ok:
            o.verdict = "differs"  # a wrong result is never faster or slower
    result.variants = [outcomes[n] for n in names]
    return result


def _profile_variant(
    o: VariantOutcome,
    fn: Callable[..., Any],
    *,
    args: tuple[Any, ...],
    spec: Any,
    out: str | os.PathLike[str],
    label: str | None,
    on_report: OnReport | None,
    schedule: dict[str, int] = SCHEDULE,
) -> None:
    from opscope.analysis.pipeline import analyze
    from opscope.capture.neuron_explorer import convert
    from opscope.capture.session import profile

    stage = "profile"
    try:
        with profile(
            device=spec,
            wait=schedule["wait"],
            warmup=schedule["warmup"],
            active=schedule["active"],
            out=out,
            label=f"{label}-{o.name}" if label else o.name,
            run_info={"compare": {"variant": o.name, "label": label}},
        ) as session:
            if o.compile is not None:
                session.record_compile(o.compile)
            for _ in range(session.steps):
                fn(*args)
                session.step()
        o.run_dir = str(session.run_dir)
        stage = "analysis"
        convert(session.run_dir)  # a Neuron capture's tables (when neuron-explorer is installed)
        report = analyze(session.run_dir)
        measured = [s for s in report.steps if s.device_ops or s.cpu_us]
        if measured:
            last = measured[-1]
            o.device_ops, o.device_us, o.cpu_us = last.device_ops, last.device_us, last.cpu_us
        if on_report is not None:
            stage = "writing reports"
            on_report(report, Path(session.run_dir), o)
    except Exception as exc:
        o.error = f"{stage}: {_first_line(exc)}"
        o.verdict = "error"
