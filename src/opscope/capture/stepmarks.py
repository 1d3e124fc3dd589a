"""Where a program's steps end, without changing the program: optimizer steps and step functions.

Contract: each marker calls ``mark(source, owner)`` once at the end of every step it sees,
*after* the step's work has returned, never inside a profiler range the step opened:

- :class:`OptimizerSteps` — every ``optimizer.step()`` (source ``"optimizer"``, owner the
  optimizer).  torch's global ``register_optimizer_step_post_hook`` runs *inside* the
  ``Optimizer.step#…`` range that torch opens around each step, so advancing the profiler from
  it would cut that range in two (its end would fall into the next profiler step, and the last
  recorded step would lose it).  So the marker wraps the function torch uses to instrument each
  optimizer class (``Optimizer.profile_hook_step``, applied once per class when its first
  instance is built) and marks after torch's wrapper returned.  The public post hook stays
  registered as a fallback: for an optimizer class instrumented before the marker was installed
  (or a torch without ``profile_hook_step``) it marks from inside the range, and says so.
  Nested ``step()`` calls (a subclass's ``step`` calling ``super().step()``) mark once.
- :func:`wrap_step_fn` — each completed outermost call of a function (source ``"step_fn"``).
  :class:`StepFnTarget` parses ``--step-fn module:qualname`` / ``path.py:qualname``.  Functions
  of the program's own ``__main__`` are marked by :func:`decorate_in_tree`, which adds a
  decorator to their ``def`` in the parsed source before it is compiled, so the wrapper is in
  place from the moment the function exists (before a ``main()`` at the bottom of the script
  can call it); ``name = …`` assignments get a rebinding statement right after them.
  Functions of other modules are wrapped when their module has been imported
  (:class:`PostImportPatch`, a ``sys.meta_path`` finder), or at once if it already was.
  Neither needs ``sys.settrace``/``sys.setprofile``: marking costs one Python call per step.
"""

from __future__ import annotations

import ast
import functools
import importlib.abc
import importlib.machinery
import inspect
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from opscope.errors import OpscopeError

#: ``mark(source, owner)``: called at the end of each step.
Mark = Callable[[str, object], None]

OPTIMIZER_SOURCE = "optimizer"
STEP_FN_SOURCE = "step_fn"

#: Name under which the step-function decorator is placed in the program's ``__main__`` globals.
DECORATOR_GLOBAL = "__opscope_step_fn__"

_WRAPPED_ATTR = "_opscope_step_fn"
_LOCALS = "<locals>"
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


# -- optimizer steps -------------------------------------------------------------------------


class OptimizerSteps:
    """Marks each ``optimizer.step()`` after it returned; see the module docstring."""

    def __init__(self, mark: Mark) -> None:
        self._mark = mark
        self._depth = 0
        self._installed = False
        self._original: Any = None
        self._handle: Any = None
        #: set when a step was marked from inside torch's ``Optimizer.step`` range (fallback)
        self.marked_inside_range = False

    def install(self) -> None:
        """Instrument optimizers built from now on; register the fallback post hook."""
        from torch.optim import Optimizer
        from torch.optim.optimizer import register_optimizer_step_post_hook

        if self._installed:
            return
        original = Optimizer.__dict__.get("profile_hook_step")
        if isinstance(original, staticmethod):
            self._original = original
            torch_wrapper = original.__func__
            marker = self

            def profile_hook_step(func: Callable[..., Any]) -> Callable[..., Any]:
                inner = torch_wrapper(func)

                @functools.wraps(inner)
                def step_then_mark(*args: Any, **kwargs: Any) -> Any:
                    marker._depth += 1
                    try:
                        out = inner(*args, **kwargs)
                    finally:
                        marker._depth -= 1
                    if marker._depth == 0 and marker._installed and args:
                        marker._mark(OPTIMIZER_SOURCE, args[0])
                    return out

                return step_then_mark

            Optimizer.profile_hook_step = staticmethod(profile_hook_step)  # type: ignore[method-assign]
        self._handle = register_optimizer_step_post_hook(self._post_hook)
        self._installed = True

    def uninstall(self) -> None:
        """Stop marking; optimizer classes instrumented meanwhile keep a wrapper that no longer
        marks."""
        if not self._installed:
            return
        self._installed = False
        if self._original is not None:
            from torch.optim import Optimizer

            Optimizer.profile_hook_step = self._original  # type: ignore[method-assign]
            self._original = None
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _post_hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._depth == 0 and self._installed:
            # torch instrumented this optimizer's class before install(): no wrapper of ours
            # around it, so mark here, inside the Optimizer.step range
            self.marked_inside_range = True
            self._mark(OPTIMIZER_SOURCE, optimizer)


# -- step functions --------------------------------------------------------------------------


@dataclass(frozen=True)
class StepFnTarget:
    """A ``--step-fn`` target: a module name or a ``.py`` path, and a qualified name in it."""

    where: str
    qualname: str
    is_path: bool

    @classmethod
    def parse(cls, text: str) -> StepFnTarget:
        """Parse ``module:function``, ``module:Class.method``, ``path.py:function`` or
        ``path.py:main.<locals>.step``; raises OpscopeError with the expected form."""
        where, sep, qualname = text.strip().rpartition(":")
        hint = (
            f"--step-fn {text!r}: expected MODULE:FUNCTION or PATH.py:FUNCTION "
            "(e.g. train:train_step, ./infer.py:run_batch, model:Model.forward)"
        )
        if not sep or not where or not qualname:
            raise OpscopeError(hint)
        parts = qualname.split(".")
        if not all(_IDENT.match(p) or p == _LOCALS for p in parts) or parts[-1] == _LOCALS:
            raise OpscopeError(hint)
        is_path = where.endswith(".py") or "/" in where or os.sep in where
        if not is_path and not all(_IDENT.match(p) for p in where.split(".")):
            raise OpscopeError(hint)
        return cls(where=where, qualname=qualname, is_path=is_path)

    @property
    def parts(self) -> list[str]:
        return self.qualname.split(".")

    def path(self) -> Path:
        return Path(os.path.realpath(self.where))

    def is_main(self, main_file: Path | None, main_module: str | None) -> bool:
        """Whether the target is in the program's own ``__main__`` code."""
        if self.is_path:
            return main_file is not None and self.path() == main_file
        return self.where == "__main__" or (main_module is not None and self.where == main_module)


def wrap_step_fn(fn: Any, mark: Mark) -> Any:
    """``fn`` wrapped so that each completed outermost call marks a step.

    ``staticmethod``/``classmethod`` objects are re-wrapped around their function; an already
    wrapped function is returned as is.  A call that raises marks nothing.
    """
    if isinstance(fn, (staticmethod, classmethod)):
        return type(fn)(wrap_step_fn(fn.__func__, mark))
    if getattr(fn, _WRAPPED_ATTR, False):
        return fn
    if not callable(fn):
        raise TypeError(f"--step-fn: {fn!r} is not callable")
    depth = 0

    @functools.wraps(fn)
    def step_fn(*args: Any, **kwargs: Any) -> Any:
        nonlocal depth
        depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            depth -= 1
        if depth == 0:  # a recursive call is part of the outer call's step
            mark(STEP_FN_SOURCE, None)
        return out

    setattr(step_fn, _WRAPPED_ATTR, True)
    return step_fn


def _flat(body: list[ast.stmt]) -> list[tuple[list[ast.stmt], int]]:
    """Statements of one scope, looking into ``if``/``try``/``with``/loops but not into other
    scopes (functions, classes): (the list holding it, index)."""
    out: list[tuple[list[ast.stmt], int]] = []
    for i, stmt in enumerate(body):
        out.append((body, i))
        blocks: list[list[ast.stmt]] = []
        if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While)):
            blocks = [stmt.body, stmt.orelse]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            blocks = [stmt.body]
        elif isinstance(stmt, ast.Try):
            blocks = [stmt.body, stmt.orelse, stmt.finalbody, *(h.body for h in stmt.handlers)]
        for block in blocks:
            out.extend(_flat(block))
    return out


def _assigns(stmt: ast.stmt, name: str) -> bool:
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name and bool(stmt.value)
    return False


def decorate_in_tree(tree: ast.Module, qualname: str, decorator: str = DECORATOR_GLOBAL) -> int:
    """Make every definition of ``qualname`` in ``tree`` go through ``decorator`` (a global
    name); returns how many definitions were found (0: none, nothing changed).

    ``def`` statements get ``@decorator`` as their outermost decorator, so it wraps what the
    other decorators made; ``name = …`` gets ``name = decorator(name)`` right after it.
    ``Class.method`` looks in class bodies, ``outer.<locals>.inner`` in function bodies.
    Raises OpscopeError for an ``async def`` (a step must end when its call returns).
    """
    count = _decorate(tree.body, qualname.split("."), decorator, qualname)
    ast.fix_missing_locations(tree)
    return count


def _decorate(body: list[ast.stmt], parts: list[str], decorator: str, qualname: str) -> int:
    head, rest = parts[0], parts[1:]
    count = 0
    inserts: list[tuple[list[ast.stmt], int, ast.stmt]] = []
    for container, index in _flat(body):
        stmt = container[index]
        if not rest:
            if isinstance(stmt, ast.AsyncFunctionDef) and stmt.name == head:
                raise OpscopeError(
                    f"--step-fn {qualname}: an async function cannot mark steps (its call "
                    "returns before its work is done); mark the function that awaits it"
                )
            if isinstance(stmt, ast.FunctionDef) and stmt.name == head:
                stmt.decorator_list.insert(0, ast.Name(id=decorator, ctx=ast.Load()))
                count += 1
            elif _assigns(stmt, head):
                rebind = ast.Assign(
                    targets=[ast.Name(id=head, ctx=ast.Store())],
                    value=ast.Call(
                        func=ast.Name(id=decorator, ctx=ast.Load()),
                        args=[ast.Name(id=head, ctx=ast.Load())],
                        keywords=[],
                    ),
                )
                ast.copy_location(rebind, stmt)
                inserts.append((container, index + 1, rebind))
                count += 1
        elif isinstance(stmt, ast.ClassDef) and stmt.name == head:
            count += _decorate(stmt.body, rest, decorator, qualname)
        elif (
            isinstance(stmt, ast.FunctionDef)
            and stmt.name == head
            and rest[0] == _LOCALS
            and len(rest) > 1
        ):
            count += _decorate(stmt.body, rest[1:], decorator, qualname)
    # insert from the back so that earlier indexes stay valid
    for container, index, node in sorted(inserts, key=lambda t: t[1], reverse=True):
        container.insert(index, node)
    return count


def wrap_in_module(module: ModuleType, qualname: str, mark: Mark) -> None:
    """Replace ``module.<qualname>`` (a function or ``Class.method``) with its step wrapper.

    Raises OpscopeError when the name is missing, or nested in a function (only the program's
    own ``__main__`` can be edited before it runs).
    """
    parts = qualname.split(".")
    if _LOCALS in parts:
        raise OpscopeError(
            f"--step-fn {module.__name__}:{qualname}: a function nested in another can only be "
            "marked in the program's main script or module"
        )
    owner: Any = module
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if owner is None:
            raise OpscopeError(f"--step-fn: {module.__name__} has no {qualname}")
    try:
        raw = inspect.getattr_static(owner, parts[-1])
    except AttributeError:
        raise OpscopeError(f"--step-fn: {module.__name__} has no {qualname}") from None
    setattr(owner, parts[-1], wrap_step_fn(raw, mark))


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then the patch; everything else is the real loader's."""

    def __init__(self, loader: Any, after: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._after = after

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._after(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, … (tracebacks use them)
        return getattr(self._loader, name)


class PostImportPatch(importlib.abc.MetaPathFinder):
    """Calls ``patch(module)`` once, right after the target module was first executed.

    The target is a module name, or a ``.py`` path (matched against each candidate's file).
    If the module is already imported, :meth:`install` patches it at once.
    """

    def __init__(self, target: StepFnTarget, patch: Callable[[ModuleType], None]) -> None:
        self._target = target
        self._patch = patch
        self._done = False
        self.error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self._done

    def install(self) -> None:
        for module in list(sys.modules.values()):
            if module is not None and self._matches_module(module):
                self._apply(module)
                return
        sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def _matches_module(self, module: ModuleType) -> bool:
        if not self._target.is_path:
            return getattr(module, "__name__", None) == self._target.where
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file:
            return False
        return Path(os.path.realpath(file)) == self._target.path()

    def _apply(self, module: ModuleType) -> None:
        self._done = True
        self.uninstall()
        try:
            self._patch(module)
        except BaseException as exc:  # reported by the runner; never break the program's import
            self.error = exc

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if self._done:
            return None
        if self._target.is_path:
            stem = self._target.path().stem
            last = fullname.rpartition(".")[2]
            if last != stem and not (
                stem == "__init__" and last == self._target.path().parent.name
            ):
                return None
        elif fullname != self._target.where:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return None
        if self._target.is_path and (
            not spec.origin or Path(os.path.realpath(spec.origin)) != self._target.path()
        ):
            return None
        spec.loader = _PatchingLoader(spec.loader, self._apply)
        return spec


__all__ = [
    "DECORATOR_GLOBAL",
    "OPTIMIZER_SOURCE",
    "STEP_FN_SOURCE",
    "Mark",
    "OptimizerSteps",
    "PostImportPatch",
    "StepFnTarget",
    "decorate_in_tree",
    "wrap_in_module",
    "wrap_step_fn",
]
