"""The optimize loop: capture, match, build candidates, compare each against the original,
within a time budget.

Candidates, cheapest first, each stage one :func:`opscope.bench.compare.run_comparison`
against the original (so every speedup is a ratio measured in the same interleaved run):

1. each rewrite alone (one per pattern name found) and, with two or more, all together;
2. ``torch.compile`` of the original, default mode;
3. ``torch.compile`` of the rewritten graph (when there is one);
4. ``torch.compile(mode="max-autotune-no-cudagraphs")``;
5. ``mode="reduce-overhead"`` (CUDA only), ``backend="neuron"`` (Neuron only).

Before each stage its cost is estimated (the measurement cost of the first stage per variant;
a compile as long as the last one measured, a prior before any, three times that for
max-autotune); a stage the budget left cannot pay for is listed as not tried, with why.
"""

from __future__ import annotations

import contextlib
import inspect
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from opscope.optimize.patch import compile_line, make_patches
from opscope.optimize.result import Candidate, NotTried, OptimizeResult

DEFAULT_BUDGET_S = 120.0
COMPILE_PRIOR_S = {"cpu": 25.0}  # before any compile was measured; accelerators: 40 s
Progress = Callable[[str], None]


def _noop(_: str) -> None:
    return None


@contextlib.contextmanager
def _kernel_events(device_kind: str) -> Iterator[None]:
    """On the CPU, Inductor's generated kernels record profiler events (the trace then shows
    the fused kernels, so device ops per call count them)."""
    if device_kind != "cpu":
        yield
        return
    try:
        import torch._inductor.config as inductor_config

        patch = inductor_config.patch({"cpp.enable_kernel_profile": True})
    except Exception:
        yield
        return
    with patch:
        yield


def _to_device(x: Any, device: str) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_device(v, device) for v in x)
    return x


def target_name(target: Any) -> str:
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return str(name or type(target).__name__)


def optimize(
    target: Any,
    example_inputs: Sequence[Any] | Callable[[], Sequence[Any]],
    device: str | None = None,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    patterns: Sequence[str] | None = None,
    min_run_s: float = 0.2,
    profile: bool = True,
    out: str | None = None,
    name: str | None = None,
    progress: Progress = _noop,
) -> OptimizeResult:
    """Find the fused built-ins and compile modes that make ``target`` faster, and prove it.

    ``target``: a function or an ``nn.Module``; ``example_inputs``: the argument tuple (or a
    callable returning it), moved to ``device`` (auto-detected when None).  Every candidate is
    compared with the original on identical inputs (numerics, compile time, interleaved
    timing, speedup with its 95 % interval, device ops per call); see the module docstring.
    ``out``: where the profiles' run folders go (a temporary folder, removed, when None).
    """
    import torch

    from opscope.capture.devices import resolve_device
    from opscope.optimize.patterns import PATTERNS, capture, find_matches
    from opscope.optimize.rewrite import apply_rewrites

    start = time.perf_counter()
    spec = resolve_device(device)
    args = tuple(example_inputs() if callable(example_inputs) else example_inputs)
    args = tuple(_to_device(a, spec.torch_device) for a in args)
    if isinstance(target, torch.nn.Module):
        target = target.to(spec.torch_device)
    label = name or target_name(target)
    result = OptimizeResult(target=label, device=spec.to_dict(), budget_s=budget_s)

    # 2. graph and patterns
    progress("capturing the graph")
    cap = capture(target, args)
    result.capture = {"method": cap.method, "error": cap.error, "matches": []}
    matches = []
    if cap.gm is not None:
        matches = find_matches(cap.gm, tuple(patterns or PATTERNS))
        result.capture["matches"] = [m.to_dict() for m in matches]
    else:
        result.notes.append(f"{cap.error}: no rewrite is possible; compile is still tried")
    patches = make_patches(matches, list(cap.gm.graph.nodes) if cap.gm is not None else [])
    result.notes += [f"no patch for {p}" for p in patches.problems]
    result.hunks = list(patches.hunks)
    found = list(dict.fromkeys(m.pattern for m in matches))

    # 3. candidates, cheapest first, in stages
    is_class = isinstance(target, torch.nn.Module)
    stages: list[tuple[str, list[Candidate]]] = []
    first: list[Candidate] = []
    for p in found:
        gm = apply_rewrites(cap.gm, [m for m in matches if m.pattern == p])
        first.append(Candidate(f"rewrite:{p}", "rewrite", [p], fn=gm, patch=patches.diff([p])))
    all_gm = apply_rewrites(cap.gm, matches) if len(found) > 1 else None
    if all_gm is not None:
        first.append(
            Candidate("rewrite:all", "combined", list(found), fn=all_gm, patch=patches.diff())
        )
    if first:
        stages.append(("rewrites", first))
    modes: list[tuple[str, dict[str, Any]]] = [("default", {})]
    stages.append(("compile", [_compile_candidate(target, "default", {}, label, is_class)]))
    rewritten = all_gm if all_gm is not None else (first[0].fn if first else None)
    if rewritten is not None:
        c = _compile_candidate(rewritten, "default", {}, label, is_class)
        c.name, c.kind, c.patterns = "compile+rewrites", "combined", list(found)
        diff = patches.diff()
        c.patch = (diff or "") + ("\n" if diff else "") + compile_line(label, is_class)
        stages.append(("compile of the rewritten graph", [c]))
    slow_modes = [("max-autotune-no-cudagraphs", {"mode": "max-autotune-no-cudagraphs"})]
    if spec.kind == "cuda":
        slow_modes.append(("reduce-overhead", {"mode": "reduce-overhead"}))
    if spec.kind == "neuron":
        slow_modes.append(("neuron", {"backend": "neuron"}))
    for mode, kw in slow_modes:
        stages.append((f"compile {mode}", [_compile_candidate(target, mode, kw, label, is_class)]))
    del modes

    # 4. each stage through the comparison, within the budget
    tmp = None
    if out is None:
        tmp = tempfile.mkdtemp(prefix="opscope-optimize-")
    runs = out or tmp or "opscope-runs"
    per_variant_s: float | None = None
    last_compile_s: float | None = None
    try:
        for stage, cands in stages:
            spent = time.perf_counter() - start
            left = budget_s - spent
            prior = 4 * min_run_s + (2.0 if profile else 0.3)  # per variant, before a measure
            est = _estimate(cands, per_variant_s or prior, last_compile_s, spec.kind)
            if est > left:
                for c in cands:
                    result.not_tried.append(
                        NotTried(
                            c.name,
                            c.kind,
                            c.patterns,
                            f"budget: about {est:.0f} s needed, {max(left, 0):.0f} s of the "
                            f"{budget_s:.0f} s left (raise --budget)",
                        )
                    )
                continue
            t0 = time.perf_counter()
            outcome = _run_stage(
                target,
                args,
                cands,
                spec,
                runs=runs,
                min_run_s=min_run_s,
                profile=profile,
                progress=progress,
                stage=stage,
                result=result,
            )
            took = time.perf_counter() - t0
            compiled = [c.compile_s for c in cands if c.compile_s]
            if compiled:
                last_compile_s = max(compiled)
            if per_variant_s is None and outcome:
                per_variant_s = took / (len(cands) + 1)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    result.candidates = [c for _, cands in stages for c in cands if c.tried]
    if sum(1 for c in result.candidates if c.compile_s) > 1:
        result.notes.append(
            "compile_s after the first compile candidate reuses what torch.compile cached "
            "from it (Inductor's graph and kernel caches): read it as a warm compile time"
        )
    result.choose_best()
    result.elapsed_s = time.perf_counter() - start
    return result


def _compile_candidate(
    fn: Any, mode: str, kwargs: dict[str, Any], label: str, is_class: bool
) -> Candidate:
    name = f"compile:{mode}"
    c = Candidate(name, "compile", [], fn=None, patch=compile_line(label, is_class, mode))
    c.compile_of = fn
    c.compile_kwargs = kwargs
    return c


def _estimate(
    cands: list[Candidate], per_variant_s: float, compile_s: float | None, kind: str
) -> float:
    total = per_variant_s * (len(cands) + 1)
    for c in cands:
        if c.compile_of is None:
            continue
        base = compile_s if compile_s is not None else COMPILE_PRIOR_S.get(kind, 40.0)
        total += base * (3.0 if "autotune" in c.name else 1.0)
    return total


def _run_stage(
    target: Any,
    args: tuple[Any, ...],
    cands: list[Candidate],
    spec: Any,
    *,
    runs: str,
    min_run_s: float,
    profile: bool,
    progress: Progress,
    stage: str,
    result: OptimizeResult,
) -> bool:
    import torch

    from opscope.bench.compare import run_comparison

    variants: dict[str, Callable[..., Any]] = {"original": target}
    for c in cands:
        if c.compile_of is not None:
            torch._dynamo.reset()  # an honest compile time: nothing cached from a stage before
            try:
                c.fn = torch.compile(c.compile_of, **c.compile_kwargs)
            except Exception as exc:  # e.g. an unknown backend
                c.tried = True
                c.fail(f"compile: {type(exc).__name__}: {str(exc).strip()[:200]}")
                continue
        variants[c.name] = c.fn
    if len(variants) == 1:
        return False
    reports: dict[str, Any] = {}

    def on_report(report: Any, _run_dir: Path, v: Any) -> None:
        reports[v.name] = report

    def stage_progress(msg: str) -> None:
        if ": first call" in msg and msg.startswith("compile"):
            msg = msg.replace("first call", "compiling (the first compile takes a while)")
        progress(f"{stage}: {msg}")

    with torch.no_grad():
        data = run_comparison(
            variants,
            args,
            reference="original",
            device=spec,
            min_run_s=min_run_s,
            profile=profile,
            out=runs,
            label="optimize",
            progress=stage_progress,
            first_call_context=lambda: _kernel_events(spec.kind),
            on_report=on_report,
        )
    result.notes += [n for n in data.notes if n not in result.notes]
    ref = data.variant("original")
    if ref is not None and not result.baseline:
        result.baseline = {
            "latency_us": ref.latency_us(),
            "device_ops_per_call": ref.device_ops,
            "device_us": ref.device_us,
            "findings": _findings(reports.get("original")),
        }
    for c in cands:
        o = data.variant(c.name)
        if o is None:
            continue
        c.tried = True
        c.absorb(o)
    return True


def _findings(report: Any) -> list[dict[str, Any]]:
    if report is None:
        return []
    return [
        {"kind": f.get("kind"), "title": f.get("title")}
        for f in report.findings
        if isinstance(f, dict)
    ][:5]


def load_target(spec: str) -> tuple[Any, str, bool]:
    """``FILE.py:NAME`` -> (the target, its file, whether it is an ``nn.Module`` class or a
    factory): a function, an ``nn.Module`` subclass built without arguments, or a factory
    returning a module."""
    import torch

    obj, file = load_object(spec)
    if inspect.isclass(obj) and issubclass(obj, torch.nn.Module):
        return obj(), file, True
    if callable(obj) and not isinstance(obj, torch.nn.Module):
        try:
            params = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        required = [
            p
            for p in params.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if not required:  # a factory
            made = obj()
            if isinstance(made, torch.nn.Module):
                return made, file, True
            raise _error(
                f"{spec}: called without arguments it returned {type(made).__name__}, "
                "not an nn.Module"
            )
    return obj, file, False


def load_object(spec: str) -> tuple[Any, str]:
    """``FILE.py:NAME`` -> (the object, the file's path)."""
    import importlib.util
    import sys

    file, sep, attr = spec.rpartition(":")
    if not sep or not file or not attr:
        raise _error(f"{spec!r}: expected FILE.py:NAME")
    path = Path(file)
    if not path.is_file():
        raise _error(f"{file}: no such file")
    mod_name = f"_opscope_user_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    spec_obj = importlib.util.spec_from_file_location(mod_name, path)
    if spec_obj is None or spec_obj.loader is None:
        raise _error(f"{file}: not a Python file")
    module = importlib.util.module_from_spec(spec_obj)
    sys.modules[mod_name] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec_obj.loader.exec_module(module)
    except Exception as exc:
        raise _error(f"{file}: importing it failed: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise _error(f"{file} has no {attr!r}")
        obj = getattr(obj, part)
    return obj, str(path.resolve())


def parse_inputs(text: str, device: str | None = None) -> tuple[Any, ...]:
    """``4x512:bfloat16,512`` -> random tensors of those shapes (seeded), float32 by default."""
    import torch

    from opscope.study.rmsnorm import parse_shape

    gen = torch.Generator().manual_seed(0)
    out = []
    for part in text.split(","):
        if not part.strip():
            continue
        dims, dtype = parse_shape(part)
        out.append(torch.randn(dims, generator=gen).to(getattr(torch, dtype)))
    if not out:
        raise _error(f"--inputs {text!r}: no shapes")
    return tuple(out)


def _error(msg: str) -> Exception:
    from opscope.errors import OpscopeError

    return OpscopeError(msg)


__all__ = ["DEFAULT_BUDGET_S", "load_object", "load_target", "optimize", "parse_inputs"]
