"""Run a Python program in this process exactly as ``python script.py`` / ``python -m module``
would, so that a profiler can be wrapped around it.

Contract: :func:`load_program` finds and compiles the program (``Program.script`` or
``Program.module``), optionally editing its parsed source first (the step-function decorator of
:mod:`.stepmarks`); :meth:`LoadedProgram.execute` runs it and returns a
:class:`ProgramOutcome` instead of letting its exit or exception escape.  While it runs, what
the program sees is what the interpreter would give it:

- ``sys.argv`` is ``[script, args…]`` (for ``-m``: the module's file, as ``python -m`` sets);
- ``__name__ == "__main__"`` in a fresh ``__main__`` module that is ``sys.modules["__main__"]``
  (pickling classes defined in the script, ``multiprocessing`` spawn children and
  ``if __name__ == "__main__"`` all work); ``__file__``, ``__spec__``, ``__package__`` as the
  interpreter sets them;
- ``sys.path[0]`` is the script's folder (symlinks resolved), or for ``-m`` the working folder;
- its stdout and stderr are untouched.

The exit code follows the interpreter: 0 at the end, ``SystemExit``'s code (``None`` → 0, an
int → itself, anything else is printed → 1), 1 for an uncaught exception, 130 for
``KeyboardInterrupt``.  :meth:`ProgramOutcome.print_exception` prints an uncaught exception
through ``sys.excepthook`` with the launcher's own frames cut off, so the traceback reads as if
the program had run alone.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from opscope.errors import OpscopeError

#: ``transform(tree, filename, module)`` edits the program's parsed source before it is
#: compiled; ``module`` is the module name for ``-m`` (else None).
Transform = Callable[[ast.Module, str, "str | None"], None]

EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Program:
    """What to run: ``kind`` ``script`` (``target`` is a path) or ``module`` (a module name)."""

    kind: Literal["script", "module"]
    target: str
    args: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """A short name for run folders: the script's stem or the module's name."""
        if self.kind == "module":
            return self.target
        p = Path(self.target)
        return p.resolve().name if p.is_dir() else p.stem

    def display(self) -> str:
        head = ["-m", self.target] if self.kind == "module" else [self.target]
        return " ".join([*head, *self.args])


@dataclass
class ProgramOutcome:
    """How the program ended."""

    exit_code: int
    exception: BaseException | None = None  # uncaught, not SystemExit
    code: types.CodeType | None = None

    @property
    def interrupted(self) -> bool:
        return isinstance(self.exception, KeyboardInterrupt)

    def print_exception(self) -> None:
        """Print the uncaught exception as the interpreter would (``sys.excepthook``)."""
        exc = self.exception
        if exc is None:
            return
        tb = exc.__traceback__
        # cut the launcher's frames: the traceback starts at the program's module code
        probe = tb
        while probe is not None and probe.tb_frame.f_code is not self.code:
            probe = probe.tb_next
        if probe is not None:
            tb = probe
        # the default hook prints the exception's own __traceback__, not the argument
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)


@dataclass
class LoadedProgram:
    """A compiled program, ready to run (see the module docstring)."""

    program: Program
    code: types.CodeType
    main_globals: dict[str, Any]
    argv0: str
    path0: str
    main_file: Path | None  # the file the program's __main__ code comes from
    main_module: str | None  # for -m: the module whose code runs as __main__
    extra_globals: dict[str, Any] = field(default_factory=dict)

    def execute(self) -> ProgramOutcome:
        """Run the program; restores ``sys.argv``, ``sys.path[0]`` and ``__main__`` after."""
        saved_argv = sys.argv
        saved_path0 = sys.path[0] if sys.path else None
        saved_main = sys.modules.get("__main__")
        module = types.ModuleType("__main__")
        module.__dict__.update(self.main_globals)
        module.__dict__.update(self.extra_globals)
        sys.argv = [self.argv0, *self.program.args]
        if sys.path:
            sys.path[0] = self.path0
        else:
            sys.path.insert(0, self.path0)
        sys.modules["__main__"] = module
        try:
            exec(self.code, module.__dict__)
        except SystemExit as exc:
            return ProgramOutcome(exit_code=_exit_code(exc.code), code=self.code)
        except KeyboardInterrupt as exc:
            return ProgramOutcome(exit_code=EXIT_INTERRUPTED, exception=exc, code=self.code)
        except BaseException as exc:
            return ProgramOutcome(exit_code=1, exception=exc, code=self.code)
        finally:
            sys.argv = saved_argv
            if saved_path0 is not None and sys.path:
                sys.path[0] = saved_path0
            if saved_main is not None:
                sys.modules["__main__"] = saved_main
        return ProgramOutcome(exit_code=0, code=self.code)


def _exit_code(code: object) -> int:
    """``SystemExit.code`` as the interpreter turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF if code >= 0 else code % 256
    if isinstance(code, bool):
        return int(code)
    print(code, file=sys.stderr)
    return 1


def _compile(
    source: str, filename: str, transform: Transform | None, module: str | None
) -> types.CodeType:
    tree = ast.parse(source, filename=filename, mode="exec")
    if transform is not None:
        transform(tree, filename, module)
    return compile(tree, filename, "exec", dont_inherit=True)


def load_program(program: Program, transform: Transform | None = None) -> LoadedProgram:
    """Find and compile ``program``.

    Raises OpscopeError when the script or module cannot be found; a SyntaxError in the
    program propagates (the caller prints it as the interpreter would).
    """
    if program.kind == "module":
        return _load_module(program, transform)
    return _load_script(program, transform)


def _load_script(program: Program, transform: Transform | None) -> LoadedProgram:
    given = Path(program.target)
    script = given / "__main__.py" if given.is_dir() else given
    if not script.is_file():
        what = "no __main__.py in folder" if given.is_dir() else "no such file"
        raise OpscopeError(f"can't open {program.target!r}: {what}")
    filename = os.path.abspath(script)
    with io.open_code(filename) as fh:
        source = importlib.util.decode_source(fh.read())
    code = _compile(source, filename, transform, None)
    folder = str(given.resolve()) if given.is_dir() else os.path.dirname(os.path.realpath(script))
    return LoadedProgram(
        program=program,
        code=code,
        main_globals={
            "__name__": "__main__",
            "__file__": filename,
            "__cached__": None,
            "__doc__": None,
            "__loader__": None,
            "__package__": None,
            "__spec__": None,
            "__builtins__": __builtins__,
        },
        argv0=program.target,
        path0=folder,
        main_file=Path(os.path.realpath(script)),
        main_module=None,
    )


def _load_module(program: Program, transform: Transform | None) -> LoadedProgram:
    name = program.target
    cwd = os.getcwd()
    # python -m looks the module up with the working folder first on the path
    if sys.path:
        sys.path[0] = cwd
    else:
        sys.path.insert(0, cwd)
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            name = f"{name}.__main__"  # a package runs as its __main__ submodule
            spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        raise OpscopeError(f"no module named {program.target!r} ({exc})") from None
    if spec is None or spec.loader is None:
        raise OpscopeError(f"no module named {name!r}")
    loader: Any = spec.loader
    filename = spec.origin or name
    source = None
    get_source = getattr(loader, "get_source", None)
    if get_source is not None:
        source = get_source(name)
    if source is not None:
        code = _compile(source, filename, transform, name)
    else:  # compiled only: it runs, but its source cannot be edited
        got = loader.get_code(name) if hasattr(loader, "get_code") else None
        if got is None:
            raise OpscopeError(f"cannot run module {name!r}: its loader gives no code")
        code = got
    return LoadedProgram(
        program=program,
        code=code,
        main_globals={
            "__name__": "__main__",
            "__file__": spec.origin,
            "__cached__": spec.cached,
            "__doc__": None,
            "__loader__": loader,
            "__package__": spec.parent,
            "__spec__": spec,
            "__builtins__": __builtins__,
        },
        argv0=spec.origin or name,
        path0=cwd,
        main_file=Path(os.path.realpath(spec.origin)) if spec.origin else None,
        main_module=name,
    )


__all__ = [
    "EXIT_INTERRUPTED",
    "LoadedProgram",
    "Program",
    "ProgramOutcome",
    "Transform",
    "load_program",
]
