"""hotspots: top ops by device time, one expensive kernel vs many small executions."""

from __future__ import annotations

from test_findings_kit import Doc, run_rule, shared


def _doc(big: bool) -> Doc:
    d = Doc()
    t = 0.0
    d.step(1, 0, 10_000)
    if big:
        d.op("aten::mm", 10, 20)
        d.launch(12, 5, "sgemm", 30, 3000)
        t = 3100
    for _ in range(200):
        d.op("aten::add", t + 10, 8)
        d.launch(t + 11, 4, "add_kernel", t + 20, 2)
        t += 25
    return d


def test_one_expensive_kernel_and_many_small_executions() -> None:
    found = {f.details["op"]: f for f in run_rule("hotspots", _doc(big=True).trace())}
    assert found["aten::mm"].details["character"] == "one expensive kernel"
    assert found["aten::mm"].time_at_stake_us == 3000
    assert found["aten::add"].details["character"] == "many small executions"
    assert found["aten::add"].details["calls"] == 200
    assert "CUDA graphs" in found["aten::add"].recommendation


def test_no_hotspot_on_a_trace_with_almost_no_device_time() -> None:
    d = Doc()
    d.step(1, 0, 100)
    d.op("aten::add", 10, 8)
    d.launch(11, 4, "add_kernel", 20, 2)
    assert run_rule("hotspots", d.trace()) == []


def test_shared_resnet_hotspots_are_convolutions() -> None:
    found = run_rule("hotspots", shared("cuda/dataloader_pair/resnet50_workers4.pt.trace.json.gz"))
    assert found and all("convolution" in f.details["op"] for f in found)


def test_tiny_shared_trace_has_no_hotspot() -> None:
    assert run_rule("hotspots", shared("cuda/triton_example.json.gz")) == []


def test_advice_fits_the_op_and_the_device() -> None:
    """bf16/tf32 only for a matmul on an accelerator; CUDA graphs only on CUDA/ROCm; a wait
    is told to be a wait, never 'speed up the op itself'."""
    found = {f.details["op"]: f for f in run_rule("hotspots", _doc(big=True).trace())}
    assert "bf16/tf32 for this matmul" in found["aten::mm"].recommendation  # on an A100

    d = Doc()
    d.step(1, 0, 10_000)
    d.op("aten::gelu_backward", 10, 20)
    d.launch(12, 5, "gelu_bw_kernel", 30, 3000)
    d.op("Stage::waitEvents", 3100, 20)
    d.launch(3102, 5, "wait_kernel", 3110, 2500)
    got = {f.details["op"]: f.recommendation for f in run_rule("hotspots", d.trace())}
    assert "bf16" not in got["aten::gelu_backward"]  # not a matmul
    assert "is a wait, not work" in got["Stage::waitEvents"]
    assert "speed up the op itself" not in got["Stage::waitEvents"]


def test_a_cpu_trace_is_not_told_about_cuda_graphs() -> None:
    d = Doc(gpu=False)
    d.step(1, 0, 20_000)
    d.op("aten::mm", 10, 3000)  # one expensive matmul
    t = 3100.0
    for _ in range(400):  # many small ones
        d.op("aten::add", t, 8)
        t += 10
    trace = d.trace()
    assert trace.device.kind == "cpu"
    found = {f.details["op"]: f for f in run_rule("hotspots", trace)}
    assert found["aten::add"].details["character"] == "many small executions"
    assert found["aten::mm"].details["character"] == "one expensive kernel"
    for f in found.values():
        assert "CUDA graphs" not in f.recommendation and "bf16" not in f.recommendation
