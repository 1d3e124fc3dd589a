"""dtype: float64 on a device; fp32 matmuls without tensor cores."""

from __future__ import annotations

from test_findings_kit import Doc, run_rule, shared


def _mm_doc(kernel: str, dtype: str = "float") -> Doc:
    d = Doc()
    d.step(1, 0, 10_000)
    t = 0.0
    for _ in range(10):
        d.op("aten::mm", t + 1, 10, Input_Dims=[[512, 512], [512, 512]], Input_type=[dtype, dtype])
        d.launch(t + 2, 5, kernel, t + 10, 500)
        t += 520
    return d


def test_fp32_sgemm_fires_with_tf32_advice() -> None:
    found = run_rule("dtype", _mm_doc("ampere_sgemm_128x64_nn").trace())
    assert len(found) == 1
    f = found[0]
    assert f.details["format"] == "float32 matmul" and f.details["kernels"] == 10
    assert "set_float32_matmul_precision" in f.recommendation
    assert f.time_at_stake_us == 0.5 * 5000


def test_tf32_kernels_do_not_fire() -> None:
    name = "cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1"
    assert run_rule("dtype", _mm_doc(name).trace()) == []
    assert run_rule("dtype", _mm_doc("ampere_bf16_s16816gemm", "c10::BFloat16").trace()) == []


def test_float64_on_device_fires() -> None:
    found = run_rule("dtype", _mm_doc("dgemm_kernel", "double").trace())
    assert [f.details["format"] for f in found] == ["float64"]
    assert found[0].details["ops"] == {"aten::mm": 5000.0}


def test_shared_v100_trace_has_float64_work() -> None:
    found = run_rule("dtype", shared("cuda/diff_pair/test_v100.json.gz"))
    assert any(f.details["format"] == "float64" for f in found)


def test_shared_a100_trace_does_not_fire() -> None:
    assert run_rule("dtype", shared("cuda/a100_cudagraph_rank0_of16.json.gz")) == []
