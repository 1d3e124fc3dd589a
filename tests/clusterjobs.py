"""Helpers of the cluster tests that run on Dask workers (importable there: the workers are
spawned with this process's ``sys.path``).  (No tests here.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from opscope.analysis.cluster import analyze_rank


def kill_once(task: dict[str, Any], job_meta: dict[str, Any], *, rank: int, marker: str) -> Any:
    """Round 2's task, but the first worker to take rank ``rank`` dies mid-task (the marker
    file says it happened): the scheduler must run the task again elsewhere."""
    if int(task["rank"]) == rank and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        os._exit(1)  # the worker process dies, as one killed by the system would
    return analyze_rank(task, job_meta)
