"""The op table computed from the exported trace agrees with torch.profiler's key_averages()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from opscope.analysis.optable import DISPATCH_WRAPPERS, NO_COMPUTE_OPS, op_table  # noqa: E402
from opscope.trace import load  # noqa: E402


def _workload(model: torch.nn.Module, x: torch.Tensor) -> None:
    with torch.profiler.record_function("my_block"):
        y = model(x)
        y = torch.nn.functional.gelu(y)
        (y * y).mean().item()


def test_cpu_self_time_matches_key_averages(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32))
    x = torch.randn(16, 64)
    path = tmp_path / "trace.json"
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True
    ) as prof:
        for _ in range(5):
            _workload(model, x)
    prof.export_chrome_trace(str(path))

    table = op_table(load(path))
    assert table.device_is_host
    ka = {e.key: e for e in prof.key_averages()}
    compared = 0
    for row in table.rows:
        ref = ka.get(row.name)
        assert ref is not None, f"{row.name} missing from key_averages"
        assert row.calls == ref.count, row.name
        # torch reports microseconds with ns resolution; allow 1% (or 0.01 µs rounding)
        tol = max(0.01 * ref.self_cpu_time_total, 0.01)
        assert row.cpu_self_us == pytest.approx(ref.self_cpu_time_total, abs=tol), row.name
        tol_total = max(0.01 * ref.cpu_time_total, 0.01)
        assert row.cpu_total_us == pytest.approx(ref.cpu_time_total, abs=tol_total), row.name
        compared += 1
    # the ops of the workload are all there, nested ones included
    names = {r.name for r in table.rows}
    assert {"aten::linear", "aten::addmm", "aten::relu", "aten::gelu", "my_block"} <= names
    assert compared >= 8


def test_device_columns_on_cpu_are_each_ops_own_time(tmp_path: Path) -> None:
    """On a CPU-only trace every op that computes carries its own self time as device time,
    leaf or not; views, allocation and dispatch wrappers carry none.  Checked against torch's
    own key_averages on an MLP (``aten::addmm`` calls ``aten::copy_``: not a leaf)."""
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)
    )
    x = torch.randn(64, 256)
    path = tmp_path / "trace.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            mlp(x)
    prof.export_chrome_trace(str(path))
    torch_self = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    table = op_table(load(path))
    addmm = table.row("aten::addmm")
    assert addmm is not None and addmm.device_self_us > 0
    # The heaviest op leads: the one torch's own key_averages gives the most self time among
    # the ops that compute (which one that is depends on this machine's load, not on us).
    computing = [r.name for r in table.rows if r.device_self_us > 0]
    heaviest = max(torch_self[name] for name in computing)
    assert torch_self[table.rows[0].name] >= 0.99 * heaviest  # a tie within torch's rounding
    assert [r.device_self_us for r in table.rows] == sorted(
        (r.device_self_us for r in table.rows), reverse=True
    )
    for name in ("aten::addmm", "aten::gelu"):
        row = table.row(name)
        assert row is not None
        assert row.device_self_us == pytest.approx(torch_self[name], rel=0.01)
    linear = table.row("aten::linear")
    assert linear is not None
    assert linear.device_self_us == 0  # a wrapper: no execution of its own
    assert linear.device_total_us >= addmm.device_self_us
    for view in ("aten::t", "aten::transpose", "aten::as_strided"):
        row = table.row(view)
        assert row is None or row.device_self_us == 0
    assert sum(r.device_share for r in table.rows) == pytest.approx(1.0)
    assert table.device_time_us == pytest.approx(sum(r.device_self_us for r in table.rows))


def _models() -> list[tuple[str, Any, Any]]:
    torch.manual_seed(0)
    conv = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(16 * 16 * 16, 10),
    )
    attn = torch.nn.MultiheadAttention(64, 4, batch_first=True)
    q = torch.randn(4, 32, 64)
    return [
        ("conv", conv, lambda: conv(torch.randn(8, 3, 32, 32))),
        ("attention", attn, lambda: attn(q, q, q, need_weights=False)),
        (
            "sdpa",
            None,
            lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q),
        ),
    ]


@pytest.mark.parametrize("case", range(3))
def test_every_computing_op_carries_torchs_self_time(case: int, tmp_path: Path) -> None:
    name, _, run = _models()[case]
    path = tmp_path / f"{name}.json"
    with (
        torch.no_grad(),
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof,
    ):
        for _ in range(2):
            run()
    prof.export_chrome_trace(str(path))
    torch_self = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    table = op_table(load(path))
    carrying = [r for r in table.rows if r.device_self_us > 0]
    assert carrying, name
    for r in carrying:  # device self on the CPU is torch's self CPU time
        if r.name in DISPATCH_WRAPPERS:  # its calls with op children are dispatch only
            continue
        assert r.device_self_us == pytest.approx(torch_self[r.name], rel=0.01, abs=1.0), r.name
    # of the computing ops, the one torch charges the most self time to carries it
    heaviest = max(
        (
            k
            for k in torch_self
            if k.startswith("aten::")
            and k not in DISPATCH_WRAPPERS | NO_COMPUTE_OPS
            and table.row(k) is not None
        ),
        key=lambda k: torch_self[k],
    )
    assert table.row(heaviest).device_self_us > 0, (name, heaviest)  # type: ignore[union-attr]
