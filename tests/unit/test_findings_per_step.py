"""h2d_copies and sync_stalls below their share thresholds: avoidable per-step work (a CPU
scalar copied to the device inside an op, an explicit sync inside the step) is still reported,
at ``info``; one-off copies, explicit transfers and the syncs an op needs are not."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from test_findings_kit import Doc, run_rule

from opscope.analysis.pipeline import analyze

NEURON_FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "neuron_fixtures"


# -- host-to-device copies of CPU scalars --------------------------------------------------------


def _cuda_doc(
    copy_steps: range | list[int],
    op: str = "aten::add",
    nbytes: int = 4,
    host_us: float = 5,
    steps: int = 4,
) -> Doc:
    """``steps`` steps of 1 ms: a 700 µs matmul, and in ``copy_steps`` an ``op`` that copies
    ``nbytes`` host bytes to the device (``cudaMemcpyAsync`` of ``host_us``, a 2 µs HtoD)."""
    d = Doc()
    t = 0.0
    for i in range(steps):
        d.step(i, t, 1000)
        d.op("aten::mm", t + 10, 20)
        d.launch(t + 12, 5, "gemm", t + 30, 700)
        if i in copy_steps:
            d.op(op, t + 100, 30)
            if op != "aten::to":
                d.op("aten::to", t + 102, 20)
            d.op("aten::copy_", t + 104, 15)
            d.launch(
                t + 105,
                host_us,
                "Memcpy HtoD (Pageable -> Device)",
                t + 740,
                2,
                cat="gpu_memcpy",
                runtime="cudaMemcpyAsync",
                bytes=nbytes,
            )
        t += 1000
    return d


def test_cuda_scalar_copy_in_every_step_below_the_share_is_info() -> None:
    # 4 × 5 µs of a 4 ms window: 0.5 %, under the 1 % threshold
    found = run_rule("h2d_copies", _cuda_doc(range(4)).trace())
    assert len(found) == 1
    f = found[0]
    assert f.severity == "info" and f.details["below_threshold"] is True
    assert f.details["op"] == "aten::add" and f.details["copies"] == 4
    assert f.time_at_stake_us == pytest.approx(20.0)
    assert f.share == pytest.approx(20.0 / 4000.0, rel=0.01)
    assert "Python" in f.recommendation and "device" in f.recommendation


def test_scalar_copy_above_the_share_is_unchanged() -> None:
    # 4 × 50 µs: 5 %, the ordinary finding (no below_threshold mark)
    (f,) = run_rule("h2d_copies", _cuda_doc(range(4), host_us=50).trace())
    assert f.severity == "medium" and "below_threshold" not in f.details
    assert f.time_at_stake_us == pytest.approx(200.0)


def test_large_input_copy_at_the_start_does_not_fire() -> None:
    # one 4 MB upload in the first step only: not per step, not a scalar
    assert run_rule("h2d_copies", _cuda_doc([0], op="aten::to", nbytes=4 << 20).trace()) == []


def test_scalar_copy_missing_from_steps_does_not_fire() -> None:
    assert run_rule("h2d_copies", _cuda_doc([0, 1]).trace()) == []


def test_explicit_small_transfer_below_the_share_does_not_fire() -> None:
    # tensor.to(device) of a 128-byte split-size tensor every step: data the device needs
    assert run_rule("h2d_copies", _cuda_doc(range(4), op="aten::to", nbytes=128).trace()) == []


def test_no_copy_does_not_fire() -> None:
    assert run_rule("h2d_copies", _cuda_doc([]).trace()) == []


def _neuron_doc() -> Doc:
    """Kineto-shaped Neuron events: per step, aten::pow and aten::add each run one NEFF
    (``nc_exec_running``); aten::add first writes its CPU scalar operand (``nrt_tensor_write``,
    4 B, 5 µs)."""
    d = Doc(gpu=False)
    t = 0.0
    for i in range(1, 5):
        d.step(i, t, 1000)
        d.op("aten::pow", t + 10, 30)
        d.events.append(_hw(t + 50, 300))
        d.op("aten::add", t + 400, 40)
        d.events.append(
            {
                "ph": "X",
                "cat": "neuron_rt",
                "name": "nrt_tensor_write",
                "pid": 1,
                "tid": 1,
                "ts": t + 405,
                "dur": 5,
                "args": {"size": 4},
            }
        )
        d.events.append(_hw(t + 450, 300))
        t += 1000
    return d


def _hw(ts: float, dur: float) -> dict[str, object]:
    return {
        "ph": "X",
        "cat": "neuron_hw",
        "name": "nc_exec_running",
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
    }


def test_neuron_scalar_write_inside_add_is_info() -> None:
    tr = _neuron_doc().trace()
    assert tr.device.kind == "neuron"
    (f,) = run_rule("h2d_copies", tr)
    assert f.severity == "info" and f.details["below_threshold"] is True
    assert f.details["op"] == "aten::add" and f.details["mean_bytes"] == 4
    assert f.share == pytest.approx(0.005, rel=0.01)
    assert "nrt_tensor_write" in f.recommendation and "Python float" in f.recommendation


def _make_fixture() -> ModuleType:
    script = NEURON_FIXTURES / "make_fixture.py"
    if not script.is_file():
        pytest.skip("../shared/neuron_fixtures not present (a user's clone)")
    name = "_shared_neuron_make_fixture"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # its dataclasses look their module up while being defined
    spec.loader.exec_module(mod)
    return mod


def test_neuron_eager_naive_rmsnorm_names_the_epsilon_copy(tmp_path: Path) -> None:
    """The eager naive RMSNorm as a Neuron profile (the shared fixture generator, one NEFF per
    op): ``x + EPS`` with a CPU ``EPS`` writes 4 B before aten::add's NEFF, 0.6 % of the step."""
    mf = _make_fixture()
    programs = [
        ("aten::pow", "mul", 0),
        ("aten::mean", "mean_lastdim", 0),
        ("aten::add", "add_scalar", 4),
        ("aten::rsqrt", "rsqrt", 0),
        ("aten::mul", "mul_bcast_col", 0),
        ("aten::mul", "mul_bcast_row", 0),
    ]
    ops = [
        mf.Op(
            name=name,
            cpu_us=45.0 if h2d else 30.0,
            device_ns=320_000,
            program=program,
            neff_hash=str(1000 + i),
            hlo=f"op.{i}",
            h2d_bytes=h2d,
        )
        for i, (name, program, h2d) in enumerate(programs)
    ]
    sc = mf.Scenario(
        name="eager",
        title="eager naive RMSNorm",
        display_name="rmsnorm_eager",
        start_ns=mf._wall(2026, 7, 20, 14, 1, 0, 0),
        ops=ops,
        prev_neff="neff_1005_vnc_0.neff",
    )
    expected = mf.write_scenario(sc, tmp_path / "eager", "{title}\n")
    assert [c["bytes"] for c in expected["h2d_copies"]] == [4]
    report = analyze(tmp_path / "eager")
    h2d = [f for f in report.findings if f["kind"] == "h2d_copies"]
    assert len(h2d) == 1
    f = h2d[0]
    assert f["severity"] == "info" and f["details"]["below_threshold"] is True
    assert f["details"]["op"] == "aten::add" and f["details"]["mean_bytes"] == 4
    assert 0.003 < f["share"] < 0.01
    assert "Python float" in f["recommendation"]
    # the end-of-step torch.neuron.synchronize() has nothing after it: nothing at stake
    assert not [f for f in report.findings if f["kind"] == "sync_stalls"]


# -- syncs inside the step -----------------------------------------------------------------------


def _sync_doc(
    sync_steps: range | list[int],
    call: str = "cudaDeviceSynchronize",
    under: tuple[str, ...] = (),
) -> Doc:
    """4 steps of 1 ms: a 400 µs matmul, in ``sync_steps`` a sync (inside the ops ``under``)
    that returns just after it; the next launch follows 7 µs later - the device idles 7 µs."""
    d = Doc()
    t = 0.0
    for i in range(4):
        d.step(i, t, 1000)
        d.op("aten::mm", t + 10, 20)
        d.launch(t + 12, 5, "gemm", t + 30, 400)
        if i in sync_steps:
            for k, name in enumerate(under):
                cat = "user_annotation" if name.startswith("opscope::") else "cpu_op"
                d.op(name, t + 19 + k * 0.1, 414 - k * 0.2, cat=cat)
            d.runtime(call, t + 20, 412)
        d.op("aten::add", t + 433, 10)
        d.launch(t + 434, 3, "add_kernel", t + 437, 50)
        t += 1000
    return d


def test_explicit_sync_in_every_step_below_the_share_is_info() -> None:
    found = run_rule("sync_stalls", _sync_doc(range(4)).trace())
    assert len(found) == 1
    f = found[0]
    assert f.severity == "info" and f.details["below_threshold"] is True
    assert f.details["call"] == "cudaDeviceSynchronize" and f.details["count"] == 4
    # per sync min(7 µs idle after, 412 µs wait)
    assert f.time_at_stake_us == pytest.approx(4 * 7.0)
    assert f.share == pytest.approx(28.0 / 4000.0, rel=0.01)
    assert "Remove the explicit cudaDeviceSynchronize" in f.recommendation


def test_opscope_own_synchronize_below_the_share_does_not_fire() -> None:
    doc = _sync_doc(range(4), under=("opscope::synchronize",))
    assert run_rule("sync_stalls", doc.trace()) == []


def test_scalar_read_below_the_share_does_not_fire() -> None:
    # .item(): the sync an op needs for its result, not an explicit one
    doc = _sync_doc(
        range(4), call="cudaStreamSynchronize", under=("aten::item", "aten::_local_scalar_dense")
    )
    assert run_rule("sync_stalls", doc.trace()) == []


def test_sync_in_one_step_only_does_not_fire() -> None:
    assert run_rule("sync_stalls", _sync_doc([1]).trace()) == []
