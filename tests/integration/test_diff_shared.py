"""opscope diff A B on the shared trace pairs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from opscope.analysis.diff import diff_reports
from opscope.analysis.pipeline import analyze
from opscope.cli.main import main


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("cuda/diff_pair/control_a100.json.gz", "cuda/diff_pair/test_v100.json.gz"),
        (
            "cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz",
            "cuda/dataloader_pair/resnet50_workers4.pt.trace.json.gz",
        ),
    ],
)
def test_per_op_deltas_sum_to_the_difference_of_totals(
    a: str, b: str, shared: Callable[[str], Path]
) -> None:
    ra, rb = analyze(shared(a)), analyze(shared(b))
    d = diff_reports(ra, rb)
    assert d["schema"] == "opscope.diff/1"
    total_a = sum(o.device_self_us for o in ra.ops.rows)
    total_b = sum(o.device_self_us for o in rb.ops.rows)
    assert total_a > 0 and total_b > 0
    assert sum(r["delta_device_us"] for r in d["ops"]) == pytest.approx(total_b - total_a)
    assert d["totals"]["delta_device_us"] == pytest.approx(total_b - total_a)
    cpu_a = sum(o.cpu_self_us for o in ra.ops.rows)
    cpu_b = sum(o.cpu_self_us for o in rb.ops.rows)
    assert sum(r["delta_cpu_us"] for r in d["ops"]) == pytest.approx(cpu_b - cpu_a)
    # ops on one side only carry null on the other
    for name in d["only_in_a"]:
        row = next(r for r in d["ops"] if r["name"] == name)
        assert row["b"] is None and row["a"] is not None


def test_cross_device_pair_is_labelled(shared: Callable[[str], Path]) -> None:
    d = diff_reports(
        analyze(shared("cuda/diff_pair/control_a100.json.gz")),
        analyze(shared("cuda/diff_pair/test_v100.json.gz")),
    )
    assert d["cross_device"] is True
    assert "A100" in d["a"]["device"]["name"] and "V100" in d["b"]["device"]["name"]
    assert d["only_in_b"]  # e.g. the compiled functions exist only in the V100 run


@pytest.mark.parametrize("fmt", ["text", "json", "md", "html"])
def test_diff_cli_formats(
    fmt: str, capsys: pytest.CaptureFixture[str], shared: Callable[[str], Path]
) -> None:
    a = shared("cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz")
    b = shared("cuda/dataloader_pair/resnet50_workers4.pt.trace.json.gz")
    assert main(["diff", str(a), str(b), "--format", fmt, "--top", "5"]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        assert json.loads(out)["schema"] == "opscope.diff/1"
    elif fmt == "html":
        assert out.startswith("<!doctype html>")
    else:
        assert "aten::" in out


def test_the_diff_command_packs_args_and_diffs_what_the_library_does(
    shared: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from opscope.trace.model import Trace

    a = shared("cuda/diff_pair/control_a100.json.gz")
    b = shared("cuda/diff_pair/test_v100.json.gz")
    packed: list[int] = []
    real = Trace.pack_args

    def spy(self: Trace) -> None:
        packed.append(len(self))
        real(self)

    monkeypatch.setattr(Trace, "pack_args", spy)
    out = tmp_path / "diff.json"
    assert main(["diff", str(a), str(b), "--format", "json", "-o", str(out)]) == 0
    assert len(packed) == 2 and all(n > 0 for n in packed)
    got = json.loads(out.read_text())
    monkeypatch.setattr(Trace, "pack_args", real)
    want = json.loads(json.dumps(diff_reports(analyze(a), analyze(b)), default=str))
    assert got == want
