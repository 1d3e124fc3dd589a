"""The RMSNorm study's pieces: shape parsing, variants' agreement, failure isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from opscope.errors import OpscopeError  # noqa: E402
from opscope.study import rmsnorm  # noqa: E402


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4x512", ((4, 512), "float32")),
        ("4x512:bf16", ((4, 512), "bfloat16")),
        ("4096×4096:fp32", ((4096, 4096), "float32")),
        ("2x3x4:half", ((2, 3, 4), "float16")),
    ],
)
def test_parse_shape(text: str, expected: tuple[tuple[int, ...], str]) -> None:
    assert rmsnorm.parse_shape(text) == expected


@pytest.mark.parametrize("text", ["", "4x", "0x5", "axb", "4x5:int7", "-1x4"])
def test_parse_shape_rejects(text: str) -> None:
    with pytest.raises(OpscopeError):
        rmsnorm.parse_shape(text)


def test_naive_and_builtin_agree() -> None:
    x = torch.randn(8, 64)
    w = torch.randn(64)
    torch.testing.assert_close(rmsnorm.naive_rmsnorm(x, w), rmsnorm.builtin_rmsnorm(x, w))


def test_a_failing_variant_is_reported_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(x: object, weight: object, eps: float = 1e-6) -> object:
        raise RuntimeError("kernel exploded\nsecond line")

    monkeypatch.setattr(rmsnorm, "builtin_rmsnorm", broken)
    reports: list[str] = []
    result = rmsnorm.run_study(
        device="cpu",
        shapes=(((4, 64), "float32"),),
        out=tmp_path,
        variants=("naive", "builtin"),
        min_run_s=0.01,
        on_report=lambda report, run_dir, v: reports.append(v.name),
    )
    naive, builtin = result.shapes[0].variants
    assert naive.error is None and naive.run_dir and Path(naive.run_dir, "trace.json.gz").exists()
    assert builtin.error is not None
    assert "kernel exploded" in builtin.error and "second line" not in builtin.error
    assert builtin.error.startswith("first call")
    assert reports == ["naive"]
    d = result.to_dict()
    assert d["shapes"][0]["variants"][1]["error"] == builtin.error
    assert any("failed: builtin" in line for line in d["reading"])


def test_numerics_mismatch_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def off(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        return rmsnorm.naive_rmsnorm(x, weight, eps) * 1.01

    monkeypatch.setattr(rmsnorm, "builtin_rmsnorm", off)
    result = rmsnorm.run_study(
        device="cpu",
        shapes=(((4, 64), "float32"),),
        out=tmp_path,
        variants=("naive", "builtin"),
        min_run_s=0.01,
    )
    builtin = result.shapes[0].variants[1]
    assert builtin.error is None
    assert builtin.numerics is not None and not builtin.numerics["ok"]
    assert any("numerics differ" in line for line in result.to_dict()["reading"])
