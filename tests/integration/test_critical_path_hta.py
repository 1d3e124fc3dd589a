"""The critical path agrees with HTA's on the traces HTA's own tests use, window for window.

HTA (PyPI ``traceinsight``) is not a test dependency: its figures are constants here, the
``total_us`` (sum of ``get_critical_path_breakdown()["duration"]``) and the ``bound_by`` with
the most time, from a run of the reference script with traceinsight 0.6.1::

    /tmp/hta-venv/bin/python benchmarks/hta_critical_path_reference.py --out ref.json \\
        ../shared/traces/cuda/critical_path_alexnet.json.gz \\
        ../shared/traces/cuda/critical_path_event_sync.json.gz \\
        ../shared/traces/cuda/critical_path_event_sync_multi_stream.json.gz \\
        ../shared/traces/cuda/critical_path_simple_add.json.gz \\
        ../shared/traces/cuda/ns_resolution.pt.trace.json.gz \\
        ../shared/traces/cuda/a100_nccl_rank0_of2.json.gz \\
        ../shared/traces/cuda/triton_example.json.gz

Comparable windows: HTA's whole-trace run keeps only what starts before the last ProfilerStep
when a trace has two or more, so opscope runs over the steps but the last (``steps=(first,
last - 1)``); with fewer than two steps both cover the whole trace.  HTA's
``annotation="ProfilerStep", instance_id=0`` is opscope's first step.

Comparable time: HTA's path leaves out what no op accounts for (a thread's time between its
top-level events, and under a ``record_function`` range or a Python frame with no op), where
opscope's path names it (``untraced``, and the range's own ``cpu``), so a step's path is its
wall.  Checked: opscope's path less that time within 5% of HTA's, and the dominant label
among the others mapped to HTA's name equal to HTA's dominant ``bound_by``
(``benchmarks/critical_path.py`` prints the same comparison with timings).  The one trace
where the two cannot cover the same time is ``triton_example``: its step marker was recorded
by another process than its ops, so the step's 13.3 s are untraced on the marker's thread
while HTA's path is the 1.4 ms of ops.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from opscope.analysis.critical.model import HTA_BOUND_BY
from opscope.analysis.pipeline import analyze
from opscope.trace import load

pytestmark = pytest.mark.shared

TOLERANCE = 0.05

# (trace, HTA window, opscope's steps, the steps the trace has, HTA's total_us, its dominant)
CASES = [
    ("critical_path_alexnet.json.gz", "whole", None, [], 43355486, "cpu_bound"),
    ("critical_path_event_sync.json.gz", "whole", None, [100], 2411, "cpu_bound"),
    ("critical_path_event_sync.json.gz", "step 0", (100, 100), [100], 2411, "cpu_bound"),
    ("critical_path_event_sync_multi_stream.json.gz", "whole", None, [], 1178, "cpu_bound"),
    ("critical_path_simple_add.json.gz", "whole", None, [], 41435012, "cpu_bound"),
    (
        "ns_resolution.pt.trace.json.gz",
        "whole",
        (101, 104),
        [101, 102, 103, 104, 105],
        384490,
        "gpu_compute_bound",
    ),
    (
        "ns_resolution.pt.trace.json.gz",
        "step 0",
        (101, 101),
        [101, 102, 103, 104, 105],
        97518,
        "gpu_compute_bound",
    ),
    ("a100_nccl_rank0_of2.json.gz", "whole", (4, 5), [4, 5, 6], 379819, "cpu_bound"),
    ("a100_nccl_rank0_of2.json.gz", "step 0", (4, 4), [4, 5, 6], 190909, "cpu_bound"),
    ("triton_example.json.gz", "whole", None, [1], 1386, "cpu_bound"),
    ("triton_example.json.gz", "step 0", (1, 1), [1], 1386, "cpu_bound"),
]


@pytest.mark.parametrize(
    ("name", "window", "steps", "trace_steps", "hta_us", "hta_bound"),
    CASES,
    ids=[f"{c[0].split('.')[0]}-{c[1].replace(' ', '')}" for c in CASES],
)
def test_critical_path_matches_hta(
    shared: Callable[[str], Path],
    name: str,
    window: str,
    steps: tuple[int, int] | None,
    trace_steps: list[int],
    hta_us: int,
    hta_bound: str,
) -> None:
    trace = load(shared(f"cuda/{name}"))
    # the window is derived from the trace's steps as HTA derives its own
    have = sorted(int(s) for s in np.unique(trace.index.step) if s >= 0)
    assert have == trace_steps
    if window == "whole":
        assert steps == ((have[0], have[-2]) if len(have) >= 2 else None)
    else:
        assert steps == (have[0], have[0])

    cp = analyze(trace, steps=steps).to_dict()["critical_path"]
    full = float(cp["length_us"])
    if name.startswith("triton_example"):
        # the marker's process holds no op: the step is untraced, the ops beside the path
        assert cp["bound_by_us"]["untraced"] == pytest.approx(full)
        assert full == pytest.approx(cp["steps"][0]["wall_us"])
        return
    length = full - float(cp["bound_by_us"]["untraced"]) - range_time(trace, cp)
    assert abs(length - hta_us) <= TOLERANCE * hta_us, (length, hta_us)
    by = {k: v for k, v in cp["bound_by_us"].items() if k != "untraced"}
    top = max(by, key=lambda k: by[k])
    assert HTA_BOUND_BY.get(top) == hta_bound, (top, by)
    if steps is not None and steps[0] == steps[1]:
        # the step's own path (the report's per-step entry) is its wall; the window's path
        # holds the step's events, with the device work that ran on after its wall
        (only,) = [s for s in cp["steps"] if s["step"] == steps[0]]
        assert only["length_us"] == pytest.approx(only["wall_us"], rel=0.02)
        assert only["length_us"] <= full + 1e-6


def range_time(trace: Any, cp: dict[str, Any]) -> float:
    """The path's time under ranges and Python frames with no op (µs)."""
    kinds = dict(
        zip(
            trace.events.column("id").to_pylist(),
            trace.events.column("kind").to_pylist(),
            strict=True,
        )
    )
    return sum(
        float(s["dur_us"])
        for s in cp["segments"]
        if kinds.get(s["event_id"]) in ("annotation", "python", "step")
    )
