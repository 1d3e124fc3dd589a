"""The proof of a printed patch: the patched source itself, run against the original.

For a candidate's patch: each patched file is written to a temporary folder and imported (its
siblings and its package still import as before); the model is built the same way as the
original (:class:`~opscope.optimize.target.Target`: the patched class or factory called with
the same arguments, or a copy of the original object whose classes from the patched files are
the patched ones), the original's ``state_dict`` loaded, its modes (train/eval) copied.  Then,
with the gradients off:

1. the example inputs, as they are: the patched model's outputs against the original's, and
   the fused built-ins it calls (counted through a ``TorchFunctionMode``) beyond the original's
   - each rewritten match must have called its built-in, or the patched lines did not run;
2. every parameter perturbed (seeded; a weight of ones becomes ``1 + 0.1 * noise``, so a
   patch that reads the wrong weight shows) and loaded into both, on the example inputs;
3. the same parameters on fresh inputs (each float input redrawn with its own mean and
   spread, non-finite entries such as an additive mask's ``-inf`` kept).

Every output tensor must agree within its dtype's tolerance (:mod:`opscope.bench.numerics`).
A model whose outputs change from call to call (dropout while training) is compared in eval
mode, which the check says.  The patched model, with the original's parameters back, is what
the candidate times.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import inspect
import itertools
import math
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.optimize.target import Target

_SEEDS = (1, 2)
_counter = itertools.count()
_IMPORTED: list[str] = []  # the patched modules, dropped from sys.modules with their folder


@dataclass
class PatchCheck:
    verified: bool = False
    max_abs_err: float | None = None
    inputs: int = 0
    """Input sets compared: the example inputs, then fresh ones."""
    params_randomised: bool = False
    parameters: int = 0
    """Parameter tensors perturbed."""
    builtin_calls: dict[str, int] = field(default_factory=dict)
    """Calls of each fused built-in the patched source made beyond the original's."""
    eval_mode: bool = False
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "max_abs_err": self.max_abs_err,
            "inputs": self.inputs,
            "params_randomised": self.params_randomised,
            "parameters": self.parameters,
            "builtin_calls": dict(self.builtin_calls),
            "eval_mode": self.eval_mode,
        }
        if self.reason:
            out["reason"] = self.reason
        return out


# -- building the patched target -----------------------------------------------------------


def _defining_file(obj: Any) -> str | None:
    try:
        f = inspect.getsourcefile(obj)
    except (TypeError, OSError):
        return None
    return str(Path(f).resolve()) if f else None


def _import_patched(file: str, text: str, tmp: Path, package: str | None) -> Any:
    folder = tmp / f"p{next(_counter)}"
    folder.mkdir(parents=True)
    path = folder / Path(file).name
    path.write_text(text, encoding="utf-8")
    name = f"_opscope_patched_{Path(file).stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    if package:
        module.__package__ = package  # its relative imports reach the original package
    sys.modules[name] = module
    _IMPORTED.append(name)
    sys.path.insert(0, str(Path(file).resolve().parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(Path(file).resolve().parent))
    return module


def _lookup(module: Any, qualname: str) -> Any:
    obj = module
    for part in qualname.split("."):
        if part == "<locals>":
            raise AttributeError(f"{qualname} is defined inside a function")
        obj = getattr(obj, part)
    return obj


def build_patched(target: Target, texts: Mapping[str, str], tmp: Path) -> Any:
    """The target built from the patched files ``texts`` (file -> text); raises with a
    one-line reason when it cannot be."""
    import torch

    modules: dict[str, Any] = {}
    for file, text in texts.items():
        original = _module_of_file(file)
        package = getattr(original, "__package__", None) if original is not None else None
        try:
            modules[str(Path(file).resolve())] = _import_patched(file, text, tmp, package)
        except Exception as exc:
            raise RuntimeError(f"the patched {Path(file).name} does not import: {exc}") from None
    if not target.is_module:
        fn_file = _defining_file(target.obj)
        if fn_file not in modules:
            raise RuntimeError(
                "the rewritten lines are not in the function's own file: the patched "
                "function cannot be run"
            )
        return _lookup(modules[fn_file], target.obj.__qualname__)
    original_model = target.obj
    builder_file = _defining_file(target.builder) if target.builder is not None else None
    if builder_file in modules:
        builder = _lookup(modules[builder_file], target.builder.__qualname__)
        with _seeded(0):
            model = builder(*target.args, **target.kwargs)
        if not isinstance(model, torch.nn.Module):
            raise RuntimeError(f"the patched {target.build} is not an nn.Module")
    else:
        model = copy.deepcopy(original_model)
    for _, sub in model.named_modules():
        cls = type(sub)
        f = _defining_file(cls)
        if f in modules and cls.__module__ != modules[f].__name__:
            try:
                sub.__class__ = _lookup(modules[f], cls.__qualname__)
            except AttributeError as exc:
                raise RuntimeError(f"the patched class {cls.__qualname__}: {exc}") from None
    model.load_state_dict(original_model.state_dict())
    device = next(itertools.chain(original_model.parameters(), original_model.buffers()), None)
    if device is not None:
        model.to(device.device)
    _copy_modes(original_model, model)
    return model


def _module_of_file(file: str) -> Any:
    want = str(Path(file).resolve())
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and str(Path(f).resolve()) == want:
            return mod
    return None


def _copy_modes(src: Any, dst: Any) -> None:
    modes = {name: m.training for name, m in src.named_modules()}
    for name, m in dst.named_modules():
        if name in modes:
            m.training = modes[name]


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


# -- comparing ----------------------------------------------------------------------------


class _Counter:
    """Counts calls of the fused built-ins (by function name) while active."""

    def __init__(self, names: set[str]) -> None:
        from torch.overrides import TorchFunctionMode

        counts: dict[str, int] = dict.fromkeys(names, 0)
        self.counts = counts

        class Mode(TorchFunctionMode):
            def __torch_function__(
                self, func: Any, types: Any, args: Any = (), kwargs: Any = None
            ) -> Any:
                name = getattr(func, "__name__", "")
                if name in counts:
                    counts[name] += 1
                return func(*args, **(kwargs or {}))

        self.mode = Mode()


def _counted(fn: Any, inputs: Sequence[Any], names: set[str]) -> tuple[Any, dict[str, int]]:
    c = _Counter(names)
    with c.mode:
        out = fn(*inputs)
    return out, c.counts


def compare_trees(out: Any, ref: Any) -> tuple[bool, float, str | None]:
    """(within tolerance, max abs error, why not) over every tensor of two outputs."""
    import torch
    from torch.utils._pytree import tree_flatten

    from opscope.bench.numerics import compare_outputs

    a, sa = tree_flatten(out)
    b, sb = tree_flatten(ref)
    if sa != sb:
        return False, math.inf, "the outputs' structure differs"
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if isinstance(y, torch.Tensor):
            n = compare_outputs(x, y)
            worst = max(worst, n.max_abs_err)
            if not n.ok:
                return False, n.max_abs_err, n.reason
        elif x != y:
            return False, math.inf, f"an output {y!r} became {x!r}"
    return True, worst, None


def fresh_inputs(inputs: Sequence[Any], seed: int) -> tuple[Any, ...]:
    """Each float tensor redrawn with its own mean and spread (non-finite entries kept)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    out: list[Any] = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
            f = x.detach().float()
            finite = torch.isfinite(f)
            vals = f[finite]
            mean = float(vals.mean()) if vals.numel() else 0.0
            std = float(vals.std()) if vals.numel() > 1 else 1.0
            std = std if std > 0 else max(abs(mean), 1.0) * 0.1
            new = torch.randn(x.shape, generator=gen).to(x.device) * std + mean
            out.append(torch.where(finite, new, f).to(x.dtype))
        else:
            out.append(x)
    return tuple(out)


def perturbed_state(model: Any, seed: int) -> tuple[dict[str, Any], int]:
    """The model's ``state_dict`` with every floating parameter perturbed (buffers such as
    masks kept); the number of parameters perturbed."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    names = {n for n, p in model.named_parameters() if p.is_floating_point()}
    for n in names:
        v = state[n]
        f = v.float()
        spread = float(f.std()) if f.numel() > 1 else 0.0
        scale = max(spread, 0.1 * float(f.abs().mean()) if f.numel() else 0.0, 0.1)
        noise = torch.randn(v.shape, generator=gen).to(v.device) * scale
        state[n] = (f + noise).to(v.dtype)
    return state, len(names)


def deterministic(fn: Any, inputs: Sequence[Any]) -> bool:
    """Whether two calls on the same inputs give the same outputs (no dropout while
    training)."""
    import torch

    with torch.no_grad():
        return _deterministic(fn, inputs)


def _deterministic(fn: Any, inputs: Sequence[Any]) -> bool:
    return compare_trees(fn(*inputs), fn(*inputs))[2] is None


def prove(
    original: Any,
    patched: Any,
    inputs: Sequence[Any],
    expected_calls: Mapping[str, int],
) -> PatchCheck:
    """The check of the module docstring; ``expected_calls``: calls of each built-in's
    function that the patch adds (one per rewritten match)."""
    import torch

    check = PatchCheck()
    names = set(expected_calls)
    with torch.no_grad():
        a, b = original, patched
        is_module = isinstance(original, torch.nn.Module)
        if not _deterministic(original, inputs):
            if not is_module or not original.training:
                check.reason = "the original's outputs change from call to call: nothing to prove"
                return check
            a, b = copy.deepcopy(original).eval(), copy.deepcopy(patched).eval()
            check.eval_mode = True
            if not _deterministic(a, inputs):
                check.reason = "the original's outputs change from call to call, even in eval mode"
                return check
        ref, base = _counted(a, inputs, names)
        try:
            out, got = _counted(b, inputs, names)
        except Exception as exc:
            check.reason = f"the patched source raises: {type(exc).__name__}: {exc}"[:300]
            return check
        check.builtin_calls = {n: got[n] - base[n] for n in names}
        missing = [n for n, k in expected_calls.items() if got[n] - base[n] < k]
        check.inputs = 1
        ok, err, why = compare_trees(out, ref)
        check.max_abs_err = err
        if not ok:
            check.reason = f"on the example inputs: {why}"
            return check
        if missing:
            check.reason = (
                f"the patched lines did not run ({', '.join(missing)} called fewer times than "
                "the rewrites): the model is not built from the patched source"
            )
            return check
        with _perturbed(a, b) as n:
            check.parameters, check.params_randomised = n, n > 0
            sets = [tuple(inputs)] if n else []
            sets += [fresh_inputs(inputs, s) for s in _SEEDS]
            for xs in sets:
                try:
                    ok, err, why = compare_trees(b(*xs), a(*xs))
                except Exception as exc:
                    check.reason = f"on fresh inputs: {type(exc).__name__}: {exc}"[:300]
                    return check
                check.max_abs_err = max(check.max_abs_err or 0.0, err)
                if not ok:
                    what = "with randomised parameters" if n else "on fresh inputs"
                    check.reason = f"{what}: {why}"
                    return check
        check.inputs = 1 + len(_SEEDS)
    check.verified = True
    return check


@contextlib.contextmanager
def _perturbed(a: Any, b: Any) -> Iterator[int]:
    """Both models with the same perturbed parameters (of ``a``) for the duration, each one's
    own state back after (one copy of the state is held, not of the models); the number of
    parameters perturbed (0 for functions)."""
    import torch

    if not isinstance(a, torch.nn.Module):
        yield 0
        return
    saved = {k: v.detach().clone() for k, v in a.state_dict().items()}
    state, n = perturbed_state(a, _SEEDS[0])
    try:
        a.load_state_dict(state)
        b.load_state_dict(state)
        yield n
    finally:
        a.load_state_dict(saved)
        b.load_state_dict(saved)


@contextlib.contextmanager
def patched_folder() -> Iterator[Path]:
    """A temporary folder for the patched files (removed after, with their modules)."""
    mark = len(_IMPORTED)
    try:
        with tempfile.TemporaryDirectory(prefix="opscope-patched-") as d:
            yield Path(d)
    finally:
        for name in _IMPORTED[mark:]:
            sys.modules.pop(name, None)
        del _IMPORTED[mark:]


__all__ = [
    "PatchCheck",
    "build_patched",
    "compare_trees",
    "deterministic",
    "fresh_inputs",
    "prove",
]
