"""A one-process report's progress on stderr: the trace file read (bytes, with an ETA), then
the analysis (events, or ranks of a job), gone once the report is written."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from opscope.trace.progress import Listener, reporting


def describe(stage: str, done: int, total: int, name: str) -> tuple[str, int | None, int]:
    """``(description, bar total or None for a pulse, completed)`` of a stage told by the
    core (:mod:`opscope.trace.progress`)."""
    if stage == "read":
        if total <= 0:
            return f"reading {name}", None, 0
        return f"reading {name} ({done / 1e6:,.0f} of {total / 1e6:,.0f} MB)", total, done
    if stage == "link":
        return f"linking the events of {name}", None, 0
    if stage == "rank":
        shown = min(done + 1, total)
        return f"analysing rank {shown} of {total}", total, done
    if stage == "analyse":
        return f"analysing {total:,} events", None, 0
    return stage, None, 0


@contextlib.contextmanager
def stages(name: str, *, quiet: bool) -> Iterator[None]:
    """Show the stages of the work inside the block on stderr (nothing when ``quiet`` or
    when stderr is not a terminal); the line is removed at the end of the block."""
    if quiet or not sys.stderr.isatty():  # rich is not even imported: start-up pays nothing
        yield
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    import time

    from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
    from rich.text import Text

    class Since(ProgressColumn):
        """The time since the work began (a task's own clock stops when its bar fills)."""

        def __init__(self) -> None:
            super().__init__()
            self.t0 = time.monotonic()

        def render(self, task: Task) -> Text:
            s = int(time.monotonic() - self.t0)
            return Text(f"{s // 60}:{s % 60:02d}", style="progress.elapsed")

    columns = (TextColumn("{task.description}"), BarColumn(), Since())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(f"reading {name}", total=None)

        def tell(stage: str, done: int, total: int) -> None:
            text, size, completed = describe(stage, done, total, name)
            bar.update(task, description=text, total=size, completed=completed)

        listener: Listener = tell
        with reporting(listener):
            yield


__all__ = ["describe", "stages"]
