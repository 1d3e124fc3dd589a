"""launch_bound: short kernels behind long launch calls leave the device in short bubbles."""

from __future__ import annotations

from test_findings_kit import Doc, run_rule, shared


def _doc(kernel_us: float, launch_us: float) -> Doc:
    d = Doc()
    d.step(1, 0, 300 * (launch_us + 6) + 60)
    t = 0.0
    for _ in range(300):
        d.op("aten::add", t, launch_us + 4)
        d.launch(t + 2, launch_us, "add_kernel", t + 2 + launch_us + 1, kernel_us)
        t += launch_us + 6
    return d


def test_tiny_kernels_with_slow_launches_fire() -> None:
    found = run_rule("launch_bound", _doc(kernel_us=2, launch_us=10).trace())
    assert len(found) == 1
    f = found[0]
    assert f.details["short_kernel_fraction"] == 1.0
    assert f.details["bubbles"] > 250
    assert f.details["dispatch_bound_ops"][0]["op"] == "aten::add"
    assert "reduce-overhead" in f.recommendation


def test_long_kernels_keep_the_device_busy() -> None:
    assert run_rule("launch_bound", _doc(kernel_us=50, launch_us=10).trace()) == []


def test_shared_small_model_is_launch_bound() -> None:
    assert run_rule("launch_bound", shared("cuda/gpu_user_annotation.json.gz"))


def test_shared_cudagraph_training_is_not() -> None:
    assert run_rule("launch_bound", shared("cuda/a100_cudagraph_rank0_of16.json.gz")) == []
