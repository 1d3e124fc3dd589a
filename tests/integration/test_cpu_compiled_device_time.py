"""A real torch.compile'd function on the CPU, Inductor's kernel profile off (the default): the
compiled graph's call carries the generated code's time as device time, equal to torch's own
self CPU time, and dynamo's region around it (guards) carries none."""

from __future__ import annotations

from pathlib import Path

import pytest

from opscope.analysis.optable import op_table
from opscope.trace import load

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow


def test_compiled_graph_carries_its_code(compile_env: dict[str, str], tmp_path: Path) -> None:
    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    x, w = torch.randn(512, 512), torch.randn(512)
    compiled = torch.compile(rms)
    for _ in range(2):
        compiled(x, w)
    path = tmp_path / "compiled.json"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            compiled(x, w)
    prof.export_chrome_trace(str(path))
    torch_self = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    rows = {r.name: r for r in op_table(load(path, cache=False)).rows}
    (graph,) = [n for n in rows if n.startswith("## Call CompiledFxGraph")]
    assert rows[graph].device_self_us > 0
    assert rows[graph].device_self_us == pytest.approx(torch_self[graph], rel=0.01)
    dynamo = [n for n in rows if n.startswith("Torch-Compiled Region")]
    assert dynamo and all(rows[n].device_self_us == 0 for n in dynamo)
