"""The optimize loop: capture, match, patch, prove each patch, build the compile candidates
within the budget, time everything in one run, choose the best.

1. **Capture** the graph (:mod:`.capture`: symbolic tracing, else Dynamo's graph) and scan it
   for the patterns (:mod:`.patterns`): matches and near-misses.
2. **Patches** (:mod:`.patch`, :mod:`.spell`): for each pattern found, ``rewrite:<pattern>``;
   with two or more proven, ``rewrite:all`` (proven again).  Each patch is **proven** on its
   own patched source (:mod:`.verify`); the patched model is the candidate.  A rewrite without
   a proven patch is listed, failed, with the reason, and never timed as faster.
3. **Compile candidates**, cheapest first: ``compile:default``, ``compile+rewrites`` (the
   proven patched model, compiled), ``mode="max-autotune-no-cudagraphs"``,
   ``mode="reduce-overhead"`` (CUDA), ``backend="neuron"`` (Neuron).  Before each compile its
   cost is estimated (as long as the last compile measured, a prior before any, three times
   that for max-autotune) with the final timing's share kept aside; what the budget cannot pay
   for is listed as not tried, with why.
4. **One timing** of the original and every candidate built (:mod:`.measure`), threads
   pinned, then the verdicts, the best, the near-misses (:mod:`.nearmiss`).
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from opscope.optimize.patch import compile_line, make_patches
from opscope.optimize.result import Candidate, NotTried, OptimizeResult
from opscope.optimize.target import Target, target_name

DEFAULT_BUDGET_S = 120.0
COMPILE_PRIOR_S = {"cpu": 25.0}  # before any compile was measured; accelerators: 40 s
MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead", "neuron")
Progress = Callable[[str], None]


def _noop(_: str) -> None:
    return None


def _to_device(x: Any, device: str) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_device(v, device) for v in x)
    return x


def optimize(
    target: Any,
    example_inputs: Sequence[Any] | Callable[[], Sequence[Any]],
    device: str | None = None,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    patterns: Sequence[str] | None = None,
    modes: Sequence[str] | None = None,
    min_run_s: float = 0.2,
    profile: bool = True,
    threads: int | None = None,
    out: str | None = None,
    name: str | None = None,
    progress: Progress = _noop,
) -> OptimizeResult:
    """Find the fused built-ins and compile modes that make ``target`` faster, and prove it.

    ``target``: a function, an ``nn.Module``, or a :class:`~opscope.optimize.target.Target`
    (how it was built: the patched source is built the same way); ``example_inputs``: the
    argument tuple (or a callable returning it), moved to ``device`` (auto-detected when
    None).  ``modes``: the compile modes to try (all by default, ``()`` none).  ``threads``:
    torch's intra-op threads while optimizing (default: see :mod:`.measure`).  ``out``: where
    the profiles' run folders go (a temporary folder, removed, when None).
    """
    from opscope.capture.devices import resolve_device
    from opscope.optimize.measure import pinned_threads, timing_clock
    from opscope.optimize.verify import deterministic

    start = time.perf_counter()
    spec = resolve_device(device)
    tgt = target if isinstance(target, Target) else Target.of(target, name)
    if name:
        tgt.label = name
    args = tuple(example_inputs() if callable(example_inputs) else example_inputs)
    args = tuple(_to_device(a, spec.torch_device) for a in args)
    if tgt.is_module:
        tgt.obj.to(spec.torch_device)
    result = OptimizeResult(target=tgt.label, device=spec.to_dict(), budget_s=budget_s)
    tmp = None if out is not None else tempfile.mkdtemp(prefix="opscope-optimize-")
    with contextlib.ExitStack() as stack:
        pin = stack.enter_context(pinned_threads(spec.kind, threads))
        clock, clock_name = timing_clock(spec.kind)
        result.timing = {**pin, "min_run_s": min_run_s, "clock": clock_name}
        if tgt.is_module and tgt.obj.training and not deterministic(tgt.obj, args):
            stack.enter_context(_eval_mode(tgt.obj))
            result.notes.append(
                "the model's outputs change from call to call in training mode (dropout): "
                "everything was compared and timed in eval mode"
            )
        try:
            _Run(
                tgt,
                args=args,
                spec=spec,
                result=result,
                budget_s=budget_s,
                start=start,
                progress=progress,
                clock=clock,
            ).go(
                patterns=patterns,
                modes=modes,
                min_run_s=min_run_s,
                profile=profile,
                runs=out or tmp or "opscope-runs",
            )
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
    result.elapsed_s = time.perf_counter() - start
    return result


@contextlib.contextmanager
def _eval_mode(model: Any) -> Any:
    """``model.eval()`` for the duration; each module's mode restored after."""
    modes = {name: m.training for name, m in model.named_modules()}
    model.eval()
    try:
        yield model
    finally:
        for name, m in model.named_modules():
            m.training = modes.get(name, m.training)


class _Run:
    def __init__(
        self,
        tgt: Target,
        *,
        args: tuple[Any, ...],
        spec: Any,
        result: OptimizeResult,
        budget_s: float,
        start: float,
        progress: Progress,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.tgt, self.args, self.spec, self.result = tgt, args, spec, result
        self.budget_s, self.start, self.progress = budget_s, start, progress
        self.clock = clock  # what the timing's blocks are timed with (.measure.timing_clock)

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.start)

    def go(
        self,
        *,
        patterns: Sequence[str] | None,
        modes: Sequence[str] | None,
        min_run_s: float,
        profile: bool,
        runs: str,
    ) -> None:
        from opscope.optimize.capture import capture
        from opscope.optimize.nearmiss import near_misses
        from opscope.optimize.patterns import PATTERNS, scan
        from opscope.optimize.verify import patched_folder

        result, tgt = self.result, self.tgt
        self.progress("capturing the graph")
        cap = capture(tgt.obj, self.args)
        result.capture = cap.to_dict()
        matches, misses = [], []
        for g in cap.graphs:
            found, missed = scan(g, tuple(patterns or PATTERNS))
            matches += found
            misses += missed
        result.capture["matches"] = [m.to_dict() for m in matches]
        if cap.error:
            result.notes.append(f"{cap.error}: no rewrite is possible; compile is still tried")
        elif cap.fx_error:
            result.notes.append(
                f"{cap.fx_error}: the patterns were matched on the graph "
                "torch.compile captures (Dynamo), mapped back to the source"
            )
        patches = make_patches(matches, cap.nodes())
        result.hunks = list(patches.hunks)
        found_patterns = list(dict.fromkeys(m.pattern for m in matches))
        cands = self._rewrite_candidates(found_patterns, patches)
        if self.budget_s <= 0:
            self._none_tried(cands, modes)
        else:
            with patched_folder() as folder:
                self._prove(cands, patches, folder)
                proven = [c.patterns[0] for c in cands if c.patch_verified]
                if len(proven) > 1:  # all the proven rewrites together, proven again
                    both = Candidate(
                        "rewrite:all",
                        "combined",
                        proven,
                        patch=patches.diff(proven),
                        needs_patch=True,
                    )
                    cands.append(both)
                    self._prove([both], patches, folder)
                ready = [c for c in cands if c.fn is not None]
                t_call = _call_time(tgt.obj, self.args, self.spec)
                per_variant = 4 * min_run_s + 15 * max(t_call, 0.01) + 6 * t_call
                per_variant += 1.0 if profile else 0.2
                ready = self._fit(ready, per_variant)
                compiled = self._compile_candidates(cands, modes, per_variant, len(ready))
                self._time(ready + compiled, min_run_s=min_run_s, profile=profile, runs=runs)
        result.candidates = [c for c in cands if c.tried or (c.verdict == "failed" and c.reason)]
        result.candidates += [c for c in self._compiled if c.tried]
        if sum(1 for c in result.candidates if c.compile_s) > 1:
            result.notes.append(
                "compile_s after the first compile candidate reuses what torch.compile cached "
                "from it (Inductor's graph and kernel caches): read it as a warm compile time"
            )
        result.choose_best()
        proven_patterns = {p for c in cands if c.patch_verified for p in c.patterns}
        unpatched = list(patches.problems)
        for c in cands:
            if c.patch is not None and not c.patch_verified and c.kind == "rewrite":
                unpatched += [
                    (m, f"the patch is not proven: {c.reason}")
                    for m in matches
                    if m.pattern in c.patterns
                ]
        result.near_misses = near_misses(
            misses=misses,
            unpatched=unpatched,
            findings=(result.baseline or {}).get("findings") or [],
            proven=proven_patterns,
            matched={m.pattern for m in matches},
            capture_error=cap.error,
        )

    # -- rewrites ---------------------------------------------------------------------------

    def _rewrite_candidates(self, found: list[str], patches: Any) -> list[Candidate]:
        """``rewrite:<pattern>`` for each pattern found (failed, with why, when it got no
        patch); ``rewrite:all`` comes after their proofs."""
        out: list[Candidate] = []
        for p in found:
            c = Candidate(f"rewrite:{p}", "rewrite", [p], patch=patches.diff([p]), needs_patch=True)
            if not patches.chosen([p]):
                why = "; ".join(dict.fromkeys(w for m, w in patches.problems if m.pattern == p))
                c.fail(f"no patch: {why or 'no source edit'}")
            out.append(c)
        return out

    def _prove(self, cands: list[Candidate], patches: Any, folder: Path) -> None:
        from opscope.optimize.patterns import REGISTRY
        from opscope.optimize.verify import build_patched, prove

        for c in cands:
            if c.verdict == "failed" and c.reason:
                continue
            self.progress(f"{c.name}: proving the patch")
            hunks = patches.chosen(c.patterns)
            expected: dict[str, int] = {}
            for h in hunks:
                fn = REGISTRY[h.pattern].calls
                expected[fn] = expected.get(fn, 0) + h.matches
            try:
                model = build_patched(self.tgt, patches.texts(c.patterns), folder)
            except Exception as exc:
                c.fail(f"the patch is not proven: {str(exc)[:300]}")
                c.patch_check = {
                    "max_abs_err": None,
                    "inputs": 0,
                    "params_randomised": False,
                    "reason": str(exc)[:300],
                }
                continue
            check = prove(self.tgt.obj, model, self.args, expected)
            c.patch_check = check.to_dict()
            c.patch_verified = check.verified
            if check.verified:
                c.fn = c.model = model
                if check.eval_mode:
                    self.result.notes.append(
                        f"{c.name}: proven in eval mode (the model's dropout is random while "
                        "training)"
                    )
            else:
                c.fail(f"the patch is not proven: {check.reason}")

    def _fit(self, ready: list[Candidate], per_variant: float) -> list[Candidate]:
        """The rewrite candidates the budget can time (cheapest first), the rest not tried."""
        keep: list[Candidate] = []
        for c in ready:
            need = per_variant * (len(keep) + 2)
            if need > self.left():
                self._skip(c, need)
            else:
                keep.append(c)
        return keep

    def _skip(self, c: Candidate, need: float) -> None:
        c.fn = None
        self.result.not_tried.append(
            NotTried(
                c.name,
                c.kind,
                c.patterns,
                f"budget: about {need:.0f} s needed, {max(self.left(), 0):.0f} s of the "
                f"{self.budget_s:.0f} s left (raise --budget)",
                patch=c.patch if c.patch_verified else None,
                patch_verified=c.patch_verified,
            )
        )
        c.reason = None  # listed under not_tried, not as a candidate
        c.verdict = "not tried"

    def _none_tried(self, cands: list[Candidate], modes: Sequence[str] | None) -> None:
        for c in cands:
            if c.verdict == "failed" and c.reason:
                continue
            self._skip(c, 0.0)
        for mode, _ in self._modes(modes):
            self.result.not_tried.append(
                NotTried(f"compile:{mode}", "compile", [], "budget: 0 s (raise --budget)")
            )
        if any(c.kind in ("rewrite", "combined") for c in cands):
            self.result.not_tried.append(
                NotTried("compile+rewrites", "combined", [], "budget: 0 s (raise --budget)")
            )
        self._compiled = []

    # -- compile ----------------------------------------------------------------------------

    _compiled: list[Candidate]

    def _modes(self, modes: Sequence[str] | None) -> list[tuple[str, dict[str, Any]]]:
        want = list(MODES if modes is None else modes)
        out: list[tuple[str, dict[str, Any]]] = []
        for m in want:
            if m == "reduce-overhead" and self.spec.kind != "cuda":
                continue
            if m == "neuron":
                if self.spec.kind == "neuron":
                    out.append((m, {"backend": "neuron"}))
                continue
            out.append((m, {} if m == "default" else {"mode": m}))
        return out

    def _compile_candidates(
        self,
        cands: list[Candidate],
        modes: Sequence[str] | None,
        per_variant: float,
        n_ready: int,
    ) -> list[Candidate]:
        import torch

        from opscope.capture.compile_metrics import watch_compile
        from opscope.study.rmsnorm import kernel_events

        tgt = self.tgt
        proven_all = next(
            (c for c in reversed(cands) if c.model is not None and c.patch_verified), None
        )
        plan: list[Candidate] = []
        for mode, kw in self._modes(modes):
            c = Candidate(
                f"compile:{mode}",
                "compile",
                [],
                patch=compile_line(tgt.compile_target(), tgt.is_module, mode),
            )
            c.compile_of, c.compile_kwargs = tgt.obj, kw
            plan.append(c)
            if mode == "default" and proven_all is not None:
                cr = Candidate("compile+rewrites", "combined", list(proven_all.patterns))
                cr.patch = (proven_all.patch or "") + compile_line(
                    tgt.compile_target(), tgt.is_module
                )
                cr.compile_of, cr.needs_patch = proven_all.model, True
                cr.patch_verified, cr.patch_check = True, proven_all.patch_check
                plan.append(cr)
        self._compiled = plan
        built: list[Candidate] = []
        last: float | None = None
        for c in plan:
            prior = last if last is not None else COMPILE_PRIOR_S.get(self.spec.kind, 40.0)
            est = prior * (3.0 if "autotune" in c.name else 1.0) + per_variant
            reserve = per_variant * (n_ready + len(built) + 1)
            if est + reserve > self.left():
                self.result.not_tried.append(
                    NotTried(
                        c.name,
                        c.kind,
                        c.patterns,
                        f"budget: about {est:.0f} s needed (with the timing's "
                        f"{reserve:.0f} s), {max(self.left(), 0):.0f} s of the "
                        f"{self.budget_s:.0f} s left (raise --budget)",
                        patch=c.patch,
                        patch_verified=c.patch_verified,
                    )
                )
                continue
            self.progress(f"{c.name}: compiling (the first compile takes a while)")
            c.tried = True
            try:
                c.fn = torch.compile(c.compile_of, **c.compile_kwargs)
                t0 = time.perf_counter()
                with kernel_events(self.spec.kind), watch_compile(label=c.name), torch.no_grad():
                    c.fn(*self.args)
                    self.spec.synchronize()
                c.compile_s = time.perf_counter() - t0
                last = c.compile_s
            except Exception as exc:
                c.fn = None
                c.fail(f"compile: {type(exc).__name__}: {str(exc).strip()[:200]}")
                continue
            built.append(c)
        return built

    # -- timing -----------------------------------------------------------------------------

    def _time(self, cands: list[Candidate], *, min_run_s: float, profile: bool, runs: str) -> None:
        import torch

        from opscope.bench.compare import run_comparison
        from opscope.study.rmsnorm import kernel_events

        variants: dict[str, Callable[..., Any]] = {"original": self.tgt.obj}
        for c in cands:
            variants[c.name] = c.fn
        reports: dict[str, Any] = {}

        def on_report(report: Any, _run_dir: Path, v: Any) -> None:
            reports[v.name] = report

        self.progress("timing " + ", ".join(variants))
        with torch.no_grad():
            data = run_comparison(
                variants,
                self.args,
                reference="original",
                device=self.spec,
                min_run_s=min_run_s,
                profile=profile,
                out=runs,
                label="optimize",
                progress=lambda m: self.progress(f"timing: {m}"),
                first_call_context=lambda: kernel_events(self.spec.kind),
                on_report=on_report,
                clock=self.clock,
            )
        r = self.result
        r.notes += [n for n in data.notes if n not in r.notes]
        self._settle(data, variants, min_run_s)
        dropped = self._trim(data)
        ref = data.variant("original")
        if ref is not None:
            r.baseline = {
                "latency_us": ref.latency_us(),
                "device_ops_per_call": ref.device_ops,
                "device_us": ref.device_us,
                "findings": _findings(reports.get("original")),
            }
            if ref.timing is not None:
                r.timing["rounds"] = ref.timing.summary.n
                r.timing["outlier_rounds"] = dropped
        for c in cands:
            o = data.variant(c.name)
            if o is not None:
                c.absorb(o, ref, trimmed_rounds=dropped)

    def _trim(self, data: Any) -> int:
        """The outlier rounds of the timed variants dropped from all of them alike
        (:func:`.measure.trimmed`), so that each speedup is the ratio of the medians printed;
        how many."""
        from opscope.optimize.measure import trimmed

        timed = {o.name: o for o in data.variants if o.timing is not None and not o.error}
        new, dropped = trimmed({n: o.timing for n, o in timed.items()})
        for n, t in new.items():
            timed[n].timing = t
        return dropped

    def _settle(self, data: Any, variants: dict[str, Any], min_run_s: float) -> None:
        """More interleaved rounds while a verdict is open (:func:`.measure.more_rounds`),
        until the budget is spent (at least as long again as the first rounds took): on a
        loaded machine an open verdict is settled by rounds, not left to chance."""
        import functools

        import torch

        from opscope.optimize.measure import more_rounds

        timed = {o.name: o for o in data.variants if o.timing is not None and not o.error}
        if "original" not in timed or len(timed) < 2:
            return
        first = sum(sum(o.timing.samples_s) * o.timing.number for o in timed.values())
        until = time.perf_counter() + max(self.left() - 0.5, first)
        fns: dict[str, Callable[[], Any]] = {
            n: functools.partial(variants[n], *self.args) for n in timed
        }
        with torch.no_grad():
            new, extra = more_rounds(
                fns,
                {n: o.timing for n, o in timed.items()},
                "original",
                self.spec.synchronize,
                min_run_s=min_run_s,
                until=until,
                clock=self.clock,
            )
        for n, t in new.items():
            timed[n].timing = t
        if extra:
            self.result.timing["more_runs"] = extra


def _call_time(fn: Any, args: tuple[Any, ...], spec: Any) -> float:
    import torch

    times = []
    with torch.no_grad():
        for _ in range(3):
            t0 = time.perf_counter()
            fn(*args)
            spec.synchronize()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _findings(report: Any) -> list[dict[str, Any]]:
    if report is None:
        return []
    out = []
    for f in report.findings:
        if not isinstance(f, Mapping):
            continue
        d = f.get("details") or {}
        row: dict[str, Any] = {"kind": f.get("kind"), "title": f.get("title")}
        if f.get("kind") == "fusion":
            row["details"] = {k: d.get(k) for k in ("pattern", "ops", "scope", "builtin")}
        out.append(row)
    return out[:8]


# the names the CLI and older callers import from here
from opscope.optimize.target import load_object, load_target, parse_inputs  # noqa: E402

__all__ = [
    "DEFAULT_BUDGET_S",
    "MODES",
    "load_object",
    "load_target",
    "optimize",
    "parse_inputs",
    "target_name",
]
