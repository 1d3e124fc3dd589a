"""Hand-made Kineto documents with CUDA/HIP graph captures and replays (no tests here).

:class:`GraphDoc` writes what a profiler records: a capture window (``StreamBeginCapture``,
an op per node around its launch call, ``StreamEndCapture``) and replays (one graph launch on
the host, its kernels on the device with the launch's correlation; on CUDA each kernel with
its ``graph id`` and ``graph node id``).  Times in microseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opscope.trace import Trace, load_document


@dataclass
class Node:
    """One node of a captured graph: the op that launched it and its kernel."""

    op: str
    kernel: str
    kind: str = "kernel"  # kernel | memcpy | memset
    module: str | None = None  # an nn.Module frame around the op
    dims: list[Any] | None = None  # the op's Input Dims
    types: list[str] | None = None  # its Input type


class GraphDoc:
    def __init__(self, rocm: bool = True) -> None:
        self.rocm = rocm
        self.events: list[dict[str, Any]] = []
        self.corr = 100
        self.ext = 5000
        self.node_ids = 1

    @property
    def runtime_prefix(self) -> str:
        return "hip" if self.rocm else "cuda"

    def _x(self, cat: str, name: str, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
        ev: dict[str, Any] = {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": kw.pop("pid", 10),
            "tid": kw.pop("tid", 10),
            "ts": ts,
            "dur": dur,
        }
        if kw:
            ev["args"] = kw.pop("args", kw)
        self.events.append(ev)
        return ev

    def op(self, name: str, ts: float, dur: float, cat: str = "cpu_op", **args: Any) -> None:
        self.ext += 1
        self._x(cat, name, ts, dur, args={"External id": self.ext, **args})

    def runtime(self, name: str, ts: float, dur: float, **args: Any) -> int:
        self.corr += 1
        self._x("cuda_runtime", name, ts, dur, args={"correlation": self.corr, **args})
        return self.corr

    def device(
        self, name: str, ts: float, dur: float, corr: int, stream: int = 0, **args: Any
    ) -> None:
        cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
        cat = "gpu_memset" if name.startswith("Memset") else cat
        self._x(
            cat,
            name,
            ts,
            dur,
            pid=0,
            tid=stream,
            args={"correlation": corr, "stream": stream, "device": 0, **args},
        )

    def capture(self, ts: float, nodes: list[Node], label: str | None = None) -> float:
        """A capture window of ``nodes`` from ``ts``; returns its end."""
        t0 = ts
        if label is not None:
            self._x("user_annotation", label, ts, 6 * len(nodes) + 10)
            ts += 1
        self.runtime(f"{self.runtime_prefix}StreamBeginCapture", ts, 1)
        t = ts + 2
        for n in nodes:
            if n.module is not None:
                self._x("python_function", n.module, t, 5)
            args: dict[str, Any] = {}
            if n.dims is not None:
                args["Input Dims"] = n.dims
            if n.types is not None:
                args["Input type"] = n.types
            self.op(n.op, t + 0.5, 4, **args)
            call = {
                "kernel": f"{self.runtime_prefix}LaunchKernel",
                "memcpy": f"{self.runtime_prefix}MemcpyAsync",
                "memset": f"{self.runtime_prefix}MemsetAsync",
            }[n.kind]
            extra = {"kernel": n.kernel} if self.rocm and n.kind == "kernel" else {}
            self.runtime(call, t + 1, 2, **extra)
            t += 6
        self.runtime(f"{self.runtime_prefix}StreamEndCapture", t, 1)
        self.runtime(f"{self.runtime_prefix}GraphInstantiate", t + 2, 3)
        return max(t + 6, t0)

    def replay(
        self,
        ts: float,
        kernels: list[tuple[str, float]],
        *,
        streams: list[int] | None = None,
        graph_id: int | None = None,
        node_ids: list[int] | None = None,
        starts: list[float] | None = None,
        launch_dur: float = 5,
        device_at: float | None = None,
    ) -> float:
        """One replay: the launch at ``ts``, then ``kernels`` (name, duration) back to back on
        the device from ``device_at`` (default: just after the launch), or at ``starts``;
        returns the end of the last kernel."""
        corr = self.runtime(f"{self.runtime_prefix}GraphLaunch", ts, launch_dur)
        t = ts + launch_dur + 1 if device_at is None else device_at
        end = t
        for i, (name, dur) in enumerate(kernels):
            at = starts[i] if starts is not None else t
            args: dict[str, Any] = {}
            if graph_id is not None:
                args["graph id"] = graph_id
            if node_ids is not None:
                args["graph node id"] = node_ids[i]
            self.device(name, at, dur, corr, stream=streams[i] if streams else 0, **args)
            t = at + dur
            end = max(end, at + dur)
        return end

    def doc(self) -> dict[str, Any]:
        name = "AMD Instinct MI300X" if self.rocm else "NVIDIA H100"
        return {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": name}],
            "traceEvents": list(self.events),
        }

    def trace(self) -> Trace:
        return load_document(self.doc())
