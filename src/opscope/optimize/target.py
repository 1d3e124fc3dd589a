"""What ``opscope optimize`` works on, and how it is built: a function, an ``nn.Module`` class
built with its constructor's arguments, a factory (a function returning a module, with or
without arguments), or - from Python - a module or function already made.

The patched source is proven on a model built the same way (:mod:`.verify`): the class or
factory of the patched file called with the same arguments, or, for an object made elsewhere,
a copy whose classes from the patched files are swapped for the patched ones.  Errors are one
line that says what to do.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.errors import OpscopeError, UsageError


@dataclass
class Target:
    obj: Any
    """The function or module instance that is optimized."""
    label: str
    is_module: bool
    builder: Any = None
    """The class or factory that made ``obj`` (None: a function, or an object made elsewhere)."""
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    build: str | None = None
    """How ``obj`` is made, as source (``Block(n_embd=64)``, ``make_block()``), or None."""

    @classmethod
    def of(cls, obj: Any, label: str | None = None) -> Target:
        """An object made elsewhere (``opscope.optimize(model, ...)``)."""
        import torch

        is_module = isinstance(obj, torch.nn.Module)
        return cls(obj=obj, label=label or target_name(obj), is_module=is_module)

    def compile_target(self) -> str:
        """What the compile line compiles: the build expression, or the name in the user's
        code (``model`` for a module made elsewhere)."""
        if self.is_module:
            return self.build or "model"
        return self.label


def target_name(target: Any) -> str:
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    return str(name or type(target).__name__)


def parse_init_args(text: str | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``"64, n_head=4"`` -> ((64,), {"n_head": 4}): Python literals, as a call writes them."""
    if not text or not text.strip():
        return (), {}
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError:
        raise UsageError(
            f"--init-args {text!r}: not arguments of a call; write them as in Python, e.g. "
            "--init-args 'n_embd=64, n_head=4'"
        ) from None
    assert isinstance(call, ast.Call)
    try:
        args = tuple(ast.literal_eval(a) for a in call.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    except ValueError:
        raise UsageError(
            f"--init-args {text!r}: only Python literals (numbers, strings, True/None, tuples, "
            "lists, dicts); for anything else name a factory that builds the model"
        ) from None
    if any(k.arg is None for k in call.keywords) or any(
        isinstance(a, ast.Starred) for a in call.args
    ):
        raise UsageError(f"--init-args {text!r}: no * or ** arguments")
    return args, kwargs


def _call_text(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _required(fn: Any) -> list[str]:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in params.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]


def load_target(spec: str, init_args: str | None = None) -> tuple[Target, str]:
    """``FILE.py:NAME`` (and ``--init-args``) -> (the target, its file)."""
    import torch

    obj, file = load_object(spec)
    args, kwargs = parse_init_args(init_args)
    name = spec.rpartition(":")[2]
    if inspect.isclass(obj) and issubclass(obj, torch.nn.Module):
        missing = _required(obj)  # the signature of a class has no self
        missing = [m for m in missing[len(args) :] if m not in kwargs]
        if missing:
            example = ", ".join(f"{m}=..." for m in missing)
            raise UsageError(
                f"{spec}: {name}() needs {', '.join(missing)}: pass --init-args "
                f"'{example}', or name a factory that builds it"
            )
        return _built(spec, obj, name, args, kwargs), file
    if inspect.isclass(obj):
        raise UsageError(f"{spec}: {name} is a class but not an nn.Module")
    if isinstance(obj, torch.nn.Module):
        if args or kwargs:
            raise UsageError(
                f"{spec}: {name} is a module already built; --init-args is for a class or a factory"
            )
        return Target(obj=obj, label=name, is_module=True, build=name), file
    if not callable(obj):
        raise UsageError(f"{spec}: {name} is a {type(obj).__name__}, not a function or module")
    if args or kwargs or not _required(obj):  # a factory
        made = _built(spec, obj, name, args, kwargs)
        if made.is_module:
            return made, file
        if args or kwargs:
            raise UsageError(
                f"{spec}: {made.build} returned {type(made.obj).__name__}, not an nn.Module "
                "(--init-args is for a class or a factory)"
            )
        raise UsageError(
            f"{spec}: called without arguments {name}() returned {type(made.obj).__name__}, "
            "not an nn.Module; a function to optimize takes the inputs as parameters"
        )
    return Target(obj=obj, label=name, is_module=False), file


def _built(spec: str, builder: Any, name: str, args: tuple[Any, ...], kw: dict[str, Any]) -> Target:
    import torch

    build = _call_text(name, args, kw)
    try:
        made = builder(*args, **kw)
    except Exception as exc:
        raise OpscopeError(f"{spec}: {build} failed: {_first_line(exc)}") from None
    return Target(
        obj=made,
        label=name,
        is_module=isinstance(made, torch.nn.Module),
        builder=builder,
        args=args,
        kwargs=kw,
        build=build,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def load_object(spec: str) -> tuple[Any, str]:
    """``FILE.py:NAME`` -> (the object, the file's path)."""
    import importlib.util
    import sys

    file, sep, attr = spec.rpartition(":")
    if not sep or not file or not attr:
        raise UsageError(f"{spec!r}: expected FILE.py:NAME")
    path = Path(file)
    if not path.is_file():
        raise OpscopeError(f"{file}: no such file")
    mod_name = f"_opscope_user_{path.stem}_{abs(hash(str(path.resolve()))) % 10**8}"
    spec_obj = importlib.util.spec_from_file_location(mod_name, path)
    if spec_obj is None or spec_obj.loader is None:
        raise OpscopeError(f"{file}: not a Python file")
    module = importlib.util.module_from_spec(spec_obj)
    sys.modules[mod_name] = module
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec_obj.loader.exec_module(module)
    except Exception as exc:
        raise OpscopeError(f"{file}: importing it failed: {_first_line(exc)}") from None
    finally:
        sys.path.remove(str(path.resolve().parent))
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise OpscopeError(f"{file} has no {attr!r}")
        obj = getattr(obj, part)
    return obj, str(path.resolve())


def parse_inputs(text: str) -> tuple[Any, ...]:
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
        raise UsageError(f"--inputs {text!r}: no shapes")
    return tuple(out)


__all__ = ["Target", "load_object", "load_target", "parse_init_args", "parse_inputs", "target_name"]
