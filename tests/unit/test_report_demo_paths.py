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


def test_study_table_uses_the_report_time_format_and_fits_100_columns() -> None:
    """The demo's table formats times as the text report does, and its eight columns fit a
    100-column terminal even with three-digit milliseconds and differing numerics."""
    import io

    from rich.console import Console

    from opscope.render.demo import render_study
    from opscope.render.fmt import us

    def variant(name: str, us_: float, **kw: object) -> dict[str, object]:
        return {
            "name": name,
            "device_ops": 12,
            "device_us": us_,
            "cpu_us": us_ * 1.1,
            "latency_us": {"median": us_ * 1.05, "iqr": us_ / 2},
            "speedup_vs_naive": 1.0,
            "compile_s": None,
            "max_abs_err": 0.0,
            "numerics_ok": True,
            **kw,
        }

    data = {
        "device": {"kind": "cuda", "name": "NVIDIA H200"},
        "shapes": [
            {
                "shape": [4096, 4096],
                "dtype": "float32",
                "variants": [
                    variant("naive", 165_040.0),
                    variant("builtin", 999.9),
                    variant("compiled", 123_456.7, numerics_ok=False, max_abs_err=3e-2),
                ],
            }
        ],
    }
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(render_study(data))
    text = console.export_text()
    assert "…" not in text
    assert us(165_040.0) in text and us(999.9) in text and "DIFFERS 3.0e-02" in text
