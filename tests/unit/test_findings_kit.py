"""Helpers shared by the finding-rule tests: shared traces, hand-made Kineto documents and a
Context built the way ``opscope.analyze`` builds it.  (No tests here.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.findings import Context, Finding, rules
from opscope.analysis.pipeline import analyze
from opscope.trace import Trace, load, load_document

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def shared(relative: str) -> Trace:
    """A trace under ../shared/traces, or skip (a user's clone has none)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces not present (a user's clone)")
    path = SHARED_TRACES / relative
    if not path.exists():
        pytest.skip(f"../shared/traces/{relative} not present")
    return load(path)


def context(
    trace: Trace,
    run_info: dict[str, Any] | None = None,
    steps: tuple[int, int] | None = None,
) -> Context:
    rep = analyze(trace, steps, findings=False)
    return Context(
        trace=trace,
        op_table=rep.ops,
        timeline=rep.timeline,
        steps=rep.steps,
        window_steps=steps,
        run_info=run_info,
    )


def run_rule(name: str, trace: Trace, run_info: dict[str, Any] | None = None) -> list[Finding]:
    (rule,) = [r for r in rules() if r.name == name]
    found = rule.run(context(trace, run_info))
    for f in found:
        assert f.kind == name
        assert f.time_at_stake_us >= 0
        assert 0.0 <= f.share <= 1.0
        assert f.severity in ("high", "medium", "low", "info")
        assert f.title and f.recommendation
    return found


class Doc:
    """A tiny Kineto document: add events with times in microseconds."""

    def __init__(self, gpu: bool = True) -> None:
        self.events: list[dict[str, Any]] = []
        self._corr = 1000
        self.gpu = gpu

    def op(
        self, name: str, ts: float, dur: float, tid: int = 1, cat: str = "cpu_op", **args: Any
    ) -> None:
        ev: dict[str, Any] = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": 1,
            "tid": tid,
            "ts": ts,
            "dur": dur,
        }
        if args:
            ev["args"] = {k.replace("_", " "): v for k, v in args.items()}
        self.events.append(ev)

    def step(self, n: int, ts: float, dur: float) -> None:
        self.op(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")

    def launch(
        self,
        ts: float,
        dur: float,
        kernel: str,
        kts: float,
        kdur: float,
        cat: str = "kernel",
        runtime: str = "cudaLaunchKernel",
        stream: int = 7,
        **kargs: Any,
    ) -> None:
        """A runtime launch on the host thread and the device execution it causes."""
        self._corr += 1
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": runtime,
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": {"correlation": self._corr},
            }
        )
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": kernel,
                "pid": 0,
                "tid": stream,
                "ts": kts,
                "dur": kdur,
                "args": {"correlation": self._corr, "stream": stream, **kargs},
            }
        )

    def runtime(self, name: str, ts: float, dur: float) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
            }
        )

    def doc(self) -> dict[str, Any]:
        d: dict[str, Any] = {"schemaVersion": 1, "traceEvents": list(self.events)}
        if self.gpu:
            d["deviceProperties"] = [{"id": 0, "name": "NVIDIA A100", "computeMajor": 8}]
        return d

    def trace(self) -> Trace:
        return load_document(self.doc())
