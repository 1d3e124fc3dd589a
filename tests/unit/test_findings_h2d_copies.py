"""h2d_copies: recurring host-to-device copies and the op that caused them."""

from __future__ import annotations

from test_findings_kit import Doc, run_rule, shared


def _doc(steps: int, copy_in_every_step: bool) -> Doc:
    d = Doc()
    t = 0.0
    for i in range(steps):
        d.step(i, t, 1000)
        if copy_in_every_step or i == 0:
            # x + torch.tensor(0.5): the CPU scalar tensor is copied to the device
            d.op("aten::add", t + 10, 100)
            d.op("aten::to", t + 12, 60)
            d.op("aten::_to_copy", t + 13, 58)
            d.op("aten::copy_", t + 15, 50)
            d.launch(
                t + 16,
                40,
                "Memcpy HtoD (Pageable -> Device)",
                t + 30,
                30,
                cat="gpu_memcpy",
                runtime="cudaMemcpyAsync",
                bytes=4,
            )
        d.op("aten::mm", t + 200, 20)
        d.launch(t + 202, 5, "gemm", t + 210, 500)
        t += 1000
    return d


def test_scalar_tensor_copy_every_step_fires() -> None:
    found = run_rule("h2d_copies", _doc(4, copy_in_every_step=True).trace())
    assert len(found) == 1
    f = found[0]
    assert f.details["op"] == "aten::add"
    assert f.details["copies"] == 4 and f.details["mean_bytes"] == 4
    assert "Python" in f.recommendation and "device" in f.recommendation
    # per copy the longer of device copy (30) and host call (40)
    assert f.time_at_stake_us == 4 * 40
    assert len(f.evidence[0].event_ids) == 4


def test_one_time_copy_is_not_steady_state() -> None:
    assert run_rule("h2d_copies", _doc(4, copy_in_every_step=False).trace()) == []


def test_shared_batch_loading_copies_fire() -> None:
    found = run_rule("h2d_copies", shared("cuda/diff_pair/control_a100.json.gz"))
    assert found and found[0].details["scope"] == "## load_batch ##"


def test_shared_trace_without_copies_does_not_fire() -> None:
    assert run_rule("h2d_copies", shared("cuda/sampled_world128/rank0.json.gz")) == []
