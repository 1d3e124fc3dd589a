"""The demo's closing line names the folder that holds the run folders."""

from __future__ import annotations

from opscope.report.demo import _common_parent


def test_common_parent_of_run_folders() -> None:
    runs = [
        "opscope-runs/20261129-110655-4x512-bfloat16-naive",
        "opscope-runs/20261129-110655-4x512-bfloat16-builtin",
        "opscope-runs/20261129-110704-4096x4096-float32-naive",
    ]
    assert _common_parent(runs) == "opscope-runs"
    assert _common_parent(["/tmp/x/runs/a", "/tmp/x/runs/b"]) == "/tmp/x/runs"
    assert _common_parent(["/tmp/x/runs/a"]) == "/tmp/x/runs"  # one folder: its parent
    assert _common_parent(["a"]) == "."
    assert _common_parent(["/abs/a", "rel/b"]) == "."
