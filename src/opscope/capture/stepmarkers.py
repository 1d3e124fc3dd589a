"""Installing a run's step markers and removing them: ``opscope.step()``, the optimizers'
``step()`` (without ``--step-fn``), the ``--step-fn`` function (decorated in the program's
source when it lives in ``__main__``, wrapped after its module is imported otherwise) and the
SIGUSR2 handler that asks for a capture.  Every marker calls ``mark(source, owner)``; what a
mark does is the driver's (:mod:`opscope.capture.runner`)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from opscope.capture import active as active_mod
from opscope.capture.program import LoadedProgram
from opscope.capture.stepmarks import (
    DECORATOR_GLOBAL,
    Mark,
    OptimizerSteps,
    PostImportPatch,
    StepFnTarget,
    decorate_in_tree,
    wrap_in_module,
    wrap_step_fn,
)
from opscope.errors import OpscopeError


class StepMarkers:
    """The markers of one run: ``mark`` is called at the end of each step, ``on_signal`` for
    each SIGUSR2 (when ``signals``)."""

    def __init__(
        self, step_fn: str | None, mark: Mark, on_signal: Callable[[], None], signals: bool
    ) -> None:
        self.target = StepFnTarget.parse(step_fn) if step_fn else None
        self.target_in_main = False
        self.import_patch: PostImportPatch | None = None
        self.optimizers: OptimizerSteps | None = None
        self._mark = mark
        self._on_signal_cb = on_signal
        self._signals = signals
        self._previous_handler: Any = None
        self._previous_api: Any = None

    def transform(self, tree: Any, filename: str, module: str | None) -> None:
        """Decorate the ``--step-fn`` function in the program's source, when it is there."""
        target = self.target
        if target is None:
            return
        main_file = Path(os.path.realpath(filename))
        if not target.is_main(main_file, module):
            return
        self.target_in_main = True
        if decorate_in_tree(tree, target.qualname) == 0:
            raise OpscopeError(
                f"--step-fn {target.where}:{target.qualname}: no `def {target.parts[-1]}` "
                f"(or `{target.parts[-1]} = …`) found for {target.qualname} in {filename}"
            )

    def install(self, loaded: LoadedProgram) -> None:
        self._previous_api = active_mod.set_handler(self._mark_api)
        loaded.extra_globals[DECORATOR_GLOBAL] = self._decorator
        if self.target is None:
            self.optimizers = OptimizerSteps(self._mark)
            self.optimizers.install()
        elif not self.target_in_main:
            target = self.target
            mark = self._mark

            def patch(module: Any) -> None:
                wrap_in_module(module, target.qualname, mark)

            self.import_patch = PostImportPatch(target, patch)
            self.import_patch.install()
        if (
            self._signals
            and hasattr(signal, "SIGUSR2")
            and threading.current_thread() is threading.main_thread()
        ):
            self._previous_handler = signal.signal(signal.SIGUSR2, self._on_signal)

    def uninstall(self) -> None:
        active_mod.set_handler(self._previous_api)
        if self.optimizers is not None:
            self.optimizers.uninstall()
        if self.import_patch is not None:
            self.import_patch.uninstall()
        if self._previous_handler is not None:
            signal.signal(signal.SIGUSR2, self._previous_handler)
            self._previous_handler = None

    def _mark_api(self, source: str) -> None:
        self._mark(source, None)

    def _decorator(self, fn: Any) -> Any:
        return wrap_step_fn(fn, self._mark)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # a signal handler only sets a flag: the capture starts at the next step boundary
        self._on_signal_cb()


__all__ = ["StepMarkers"]
