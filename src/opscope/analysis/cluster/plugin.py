"""Each Dask worker's copies of rank files given by URL (:class:`~opscope.trace.remote
.Downloads`), owned by a worker plugin: made when the worker takes the plugin, kept for every
round and job it runs there (a rank's file is fetched once per worker), removed when the
worker closes.  Imported by the coordinator only for a job by URL, and by the workers."""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from opscope.trace.remote import Downloads

NAME = "opscope-downloads"


class DownloadsPlugin(WorkerPlugin):
    """The worker's :class:`~opscope.trace.remote.Downloads` (see the module docstring)."""

    idempotent = True  # a second job on the same cluster keeps the worker's copies
    name = NAME

    def __init__(self) -> None:
        self.downloads = Downloads()

    def setup(self, worker: Any) -> None:
        self.downloads = Downloads()

    def teardown(self, worker: Any) -> None:
        self.downloads.close()


__all__ = ["NAME", "DownloadsPlugin"]
