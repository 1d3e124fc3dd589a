"""Each DataLoader worker process profiled on its own, its trace written where the report
finds it (``loader_traces/`` beside the main trace).

    loader = profile_loader_workers(DataLoader(ds, num_workers=4), "runs/r1/loader_traces")
    with torch.profiler.profile(...) as prof:   # or opscope.capture.profile(...)
        for batch in loader: ...
    prof.export_chrome_trace("runs/r1/trace.json")
    # opscope report runs/r1/trace.json   (reads runs/r1/loader_traces/ by itself)

The loader's ``worker_init_fn`` is wrapped: each worker starts a CPU ``torch.profiler`` when
it starts and writes ``loader_worker<id>.pid<pid>.pt.trace.json`` when it exits (a
``multiprocessing`` finalizer, which runs when the worker leaves its loop: at the end of an
epoch, or when a loader with ``persistent_workers`` is deleted).  A worker killed rather than
stopped writes nothing.  The worker's profiler records its whole life (no schedule): keep
such runs short, as a profile is.  The user's own ``worker_init_fn`` runs after the profiler
starts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: the run folder's folder of loader workers' traces, which the report reads by itself (the
#: same name as ``opscope.trace.loader_work.LOADER_FOLDER``: the capture imports
#: none of the trace reading, and NumPy with it)
LOADER_FOLDER = "loader_traces"


class _ProfiledWorker:
    """The wrapped ``worker_init_fn`` (a class, so that a spawned worker can unpickle it)."""

    def __init__(self, out_dir: str, inner: Callable[[int], Any] | None, with_stack: bool) -> None:
        self.out_dir = out_dir
        self.inner = inner
        self.with_stack = with_stack

    def __call__(self, worker_id: int) -> None:
        from multiprocessing import util

        import torch

        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], with_stack=self.with_stack
        )
        prof.start()
        path = Path(self.out_dir) / f"loader_worker{worker_id}.pid{os.getpid()}.pt.trace.json"

        def write() -> None:
            prof.stop()
            prof.export_chrome_trace(str(path))

        # exitpriority set: run when the worker process ends its loop (not only at interpreter
        # exit, which a multiprocessing child leaves through os._exit)
        util.Finalize(prof, write, exitpriority=10)
        if self.inner is not None:
            self.inner(worker_id)


def profile_loader_workers(loader: Any, out_dir: str | Path, *, with_stack: bool = False) -> Any:
    """``loader`` (a ``torch.utils.data.DataLoader`` with ``num_workers > 0``) with each of
    its workers profiled into ``out_dir`` (made if missing); returns the loader."""
    workers = getattr(loader, "num_workers", None)
    if not isinstance(workers, int):
        raise TypeError("profile_loader_workers: expected a torch.utils.data.DataLoader")
    if workers <= 0:
        raise ValueError(
            "profile_loader_workers: the loader has num_workers=0, its loading runs in the main "
            "process and is in the main trace already"
        )
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    loader.worker_init_fn = _ProfiledWorker(str(folder), loader.worker_init_fn, with_stack)
    return loader


class LoaderWorkerPatch:
    """``opscope profile --loader-workers``: while installed, every DataLoader with workers
    that starts iterating has its workers profiled (:func:`profile_loader_workers`) into
    ``folder``; :meth:`traces` are the files they wrote, :attr:`loaders` how many loaders
    were profiled.  Installed around the program, removed after it."""

    def __init__(self, folder: Path, *, with_stack: bool = False) -> None:
        self.folder = folder
        self.with_stack = with_stack
        self.loaders = 0
        self._original: Any = None

    def install(self) -> None:
        from torch.utils.data import DataLoader

        original = DataLoader.__iter__
        patch = self

        def __iter__(loader: Any) -> Any:
            if getattr(loader, "num_workers", 0) > 0 and not isinstance(
                loader.worker_init_fn, _ProfiledWorker
            ):
                profile_loader_workers(loader, patch.folder, with_stack=patch.with_stack)
                patch.loaders += 1
            return original(loader)

        self._original = original
        DataLoader.__iter__ = __iter__  # type: ignore[method-assign]

    def uninstall(self) -> None:
        if self._original is not None:
            from torch.utils.data import DataLoader

            DataLoader.__iter__ = self._original  # type: ignore[method-assign]
            self._original = None

    def traces(self) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(f for f in self.folder.iterdir() if f.name.endswith(".pt.trace.json"))


__all__ = ["LOADER_FOLDER", "LoaderWorkerPatch", "profile_loader_workers"]
