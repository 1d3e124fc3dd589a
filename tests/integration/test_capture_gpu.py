"""A real CUDA (or ROCm) session: device activity on, kernels in the trace, sync annotated.

Skipped without a GPU; the CPU suite covers the same paths with stand-ins.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import opscope.trace
from opscope.capture import read_run_json
from opscope.capture.session import SYNC_ANNOTATION, profile

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm device"),
]


def test_cuda_session_records_kernels(tmp_path: Path) -> None:
    x = torch.randn(512, 512, device="cuda")
    with profile(device="cuda", wait=1, warmup=1, active=2, out=tmp_path) as p:
        for _ in range(p.steps):
            (x @ x).relu_()
            p.step()
    run = read_run_json(p.run_dir)
    assert run["device"]["kind"] in ("cuda", "rocm")
    assert "CUDA" in run["device"]["activities"]
    trace = opscope.trace.load(p.run_dir)
    sources = set(trace.column("source"))
    assert "device" in sources  # kernels were recorded
    syncs = trace.sql(f"SELECT step FROM events WHERE name = '{SYNC_ANNOTATION}' ORDER BY 1")
    assert syncs.column("step").to_pylist() == [2, 3]
