"""The demo's closing line names the folder that holds the run folders; its notes are shown."""

from __future__ import annotations

from opscope.render.demo import _common_parent


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


def test_comparison_notes_are_printed_once() -> None:
    """The comparisons' notes (e.g. torch's threads on every core of a small CPU) reach the
    demo's JSON and its terminal output, each once however many shapes carry it."""
    import io

    from rich.console import Console

    from opscope.render.demo import render_study
    from opscope.study.rmsnorm import ShapeResult, StudyResult

    note = "torch uses 2 intra-op threads on this 2-core machine"
    result = StudyResult(
        device={"kind": "cpu", "name": "CPU"},
        shapes=[
            ShapeResult(shape=(4, 512), dtype="bfloat16", notes=[note]),
            ShapeResult(shape=(8, 8), dtype="float32", notes=[note, "another"]),
        ],
    )
    data = result.to_dict()
    assert data["notes"] == [note, "another"]
    assert data["shapes"][1]["notes"] == [note, "another"]
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(render_study(data))
    text = console.export_text()
    assert text.count(f"note: {note}") == 1 and "note: another" in text
