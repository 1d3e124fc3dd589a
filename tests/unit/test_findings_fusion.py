"""fusion: the naive RMSNorm chain fires; the built-in and a compiled region do not."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_findings_kit import Doc, run_rule, shared

from opscope.analysis.findings.fusion import base_name, builtin_for
from opscope.trace import load

torch = pytest.importorskip("torch")

NAIVE_CHAIN = ["aten::mul", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"]


def _naive(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    ms = (x * x).mean(-1, keepdim=True)
    return x * torch.rsqrt(ms + eps) * w


def _builtin(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return torch.rms_norm(x, (x.shape[-1],), w, eps)


def _profile(fn, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    x, w = torch.randn(64, 256), torch.randn(256)
    fn(x, w)  # warm-up outside the profile
    path = tmp_path / "trace.json"
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True
    ) as prof:
        for _ in range(4):
            fn(x, w)
            prof.step()
    prof.export_chrome_trace(str(path))
    return path


def test_naive_rmsnorm_fires_and_names_the_mul_chain(tmp_path: Path) -> None:
    found = run_rule("fusion", load(_profile(_naive, tmp_path)))
    runs = [f for f in found if f.details["pattern"] == "run"]
    assert runs, [f.title for f in found]
    f = runs[0]
    assert f.details["ops"] == NAIVE_CHAIN
    assert " → ".join(NAIVE_CHAIN) in f.title
    assert "rms_norm" in f.details["builtin"] and "rms_norm" in f.recommendation
    assert f.details["occurrences"] >= 3
    assert f.details["launches_saved"] >= 5 * f.details["occurrences"]
    # shapes were recorded: the intermediates (x*x, mean, +eps, rsqrt, x*rms) are counted
    assert f.details["intermediate_bytes"] > 2 * 64 * 256 * 4
    assert 0 < f.time_at_stake_us < f.details["device_us"]
    assert len(f.evidence[0].event_ids) <= 50


def test_builtin_rmsnorm_does_not_fire(tmp_path: Path) -> None:
    # aten::rms_norm decomposes into pow/mean/add/rsqrt/mul on the CPU, but under the built-in:
    # nothing for the program to fuse
    assert run_rule("fusion", load(_profile(_builtin, tmp_path))) == []


def test_compiled_region_does_not_fire() -> None:
    """What an Inductor-compiled RMSNorm records on the CPU: one fused kernel per call."""
    d = Doc(gpu=False)
    for i in range(4):
        t0 = i * 100.0
        d.step(i, t0, 90)
        d.op("Torch-Compiled Region: 0/0", t0 + 5, 60, cat="user_annotation")
        d.op("TorchDynamo Cache Lookup", t0 + 6, 2)
        d.op("CompiledFunction", t0 + 10, 50)
        d.op("## Call CompiledFxGraph abc ##", t0 + 12, 45, cat="user_annotation")
        d.op("aten::empty_strided", t0 + 13, 2)
        d.op("cpp_fused_add_mean_mul_rsqrt_0", t0 + 16, 40)
    assert run_rule("fusion", d.trace()) == []


def test_gpu_attention_and_bias_patterns() -> None:
    d = Doc()
    t = 0.0
    for i in range(3):
        d.step(i, t, 400)
        for name, args in (
            ("aten::bmm", {}),
            ("aten::div", {}),
            ("aten::softmax", {}),
            ("aten::bmm", {}),
            ("aten::mm", {}),
            ("aten::add", {"Input_Dims": [[8, 64], [64]], "Input_type": ["float", "float"]}),
        ):
            d.op(name, t + 10, 20, **args)
            d.launch(t + 12, 5, f"k_{name}", t + 30, 40)
            t += 60
        t += 100
    found = run_rule("fusion", d.trace())
    patterns = {f.details["pattern"]: f for f in found}
    assert "scaled_dot_product_attention" in patterns["attention"].recommendation
    assert patterns["attention"].details["ops"] == [
        "aten::bmm",
        "aten::div",
        "aten::softmax",
        "aten::bmm",
    ]
    assert "addmm" in patterns["bias"].recommendation


def test_builtin_names() -> None:
    assert base_name("aten::add_") == "add"
    assert base_name("aten::mean.dim") == "mean"
    assert builtin_for(NAIVE_CHAIN) is not None and "rms_norm" in (builtin_for(NAIVE_CHAIN) or "")
    ln = builtin_for(
        [
            "aten::mean",
            "aten::sub",
            "aten::pow",
            "aten::mean",
            "aten::add",
            "aten::sqrt",
            "aten::div",
        ]
    )
    assert ln is not None and "layer_norm" in ln
    assert "gelu" in (builtin_for(["aten::mul", "aten::pow", "aten::add", "aten::tanh"]) or "")
    assert builtin_for(["aten::mul", "aten::add", "aten::neg"]) is None


def test_hf_qwen_rmsnorm_fires_on_rocm_trace() -> None:
    found = run_rule("fusion", shared("rocm/mi300x_models/qwen1.5_0.5b_chat.json.gz"))
    assert any("rms_norm" in (f.details.get("builtin") or "") for f in found)


def test_a100_cudagraph_compiled_training_does_not_fire() -> None:
    assert run_rule("fusion", shared("cuda/a100_cudagraph_rank0_of16.json.gz")) == []
