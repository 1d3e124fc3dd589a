"""The CPU's peaks, measured: fp32 matrix-multiply FLOP/s (NumPy's BLAS, all its threads, as a
CPU op in PyTorch would run) and a stream-like copy bandwidth, about a second in all, cached.

Cache: ``<cache dir>/peaks/cpu.json`` - ``$OPSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/opscope``,
else ``~/.cache/opscope`` - keyed by the machine (processor, core count, NumPy version), so a
different machine or BLAS re-measures.  A cache that cannot be written is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from opscope.analysis.peaks.device import DevicePeaks

_SOURCE = "measured on this machine: NumPy fp32 matmul (1024^3) and array copy (64 MiB)"


def cache_path() -> Path:
    env = os.environ.get("OPSCOPE_CACHE_DIR")
    if env:
        root = Path(env)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = Path(xdg) / "opscope" if xdg else Path.home() / ".cache" / "opscope"
    return root / "peaks" / "cpu.json"


def machine_key() -> str:
    """What the measurement depends on: the processor, the cores, the BLAS (via NumPy)."""
    proc = platform.processor() or platform.machine()
    return f"{platform.system()}|{proc}|{os.cpu_count()}|numpy {np.__version__}"


def _best_rate(fn: Any, work: float, budget_s: float) -> float:
    """``work`` per second of the fastest of repeated calls of ``fn`` within ``budget_s``."""
    fn()  # warm up: page in the buffers, start BLAS threads
    best = float("inf")
    end = time.perf_counter() + budget_s
    reps = 0
    while reps < 3 or time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        reps += 1
        if reps >= 50:
            break
    return work / best if best > 0 else 0.0


def measure(budget_s: float = 0.6, n: int = 1024, copy_mib: int = 64) -> dict[str, float]:
    """Run the microbenchmark: ``{"fp32_flops": FLOP/s, "bandwidth": bytes/s}``."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    flops = _best_rate(lambda: np.matmul(a, b, out=c), 2.0 * n**3, budget_s / 2)
    count = copy_mib * 2**20 // 4
    src = np.ones(count, dtype=np.float32)
    dst = np.empty_like(src)
    # a copy reads the source and writes the destination: 2 bytes moved per byte copied
    bandwidth = _best_rate(lambda: np.copyto(dst, src), 2.0 * src.nbytes, budget_s / 2)
    return {"fp32_flops": flops, "bandwidth": bandwidth}


def _peaks(values: dict[str, Any]) -> DevicePeaks:
    proc = platform.processor() or platform.machine() or "CPU"
    return DevicePeaks(
        key="cpu",
        name=f"CPU ({proc}, {os.cpu_count()} threads)",
        flops={"fp32": float(values["fp32_flops"])},
        bandwidth=float(values["bandwidth"]),
        source=_SOURCE,
        measured=True,
    )


def cached_cpu_peaks() -> DevicePeaks | None:
    """The cached measurement for this machine, or None (never measures)."""
    path = cache_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("machine") != machine_key():
        return None
    try:
        if float(data["fp32_flops"]) <= 0 or float(data["bandwidth"]) <= 0:
            return None
        return _peaks(data)
    except (KeyError, TypeError, ValueError):
        return None


def cpu_peaks(refresh: bool = False, budget_s: float = 0.6) -> DevicePeaks:
    """This machine's CPU peaks: cached, else measured (about ``budget_s``) and cached."""
    if not refresh:
        cached = cached_cpu_peaks()
        if cached is not None:
            return cached
    values: dict[str, Any] = dict(measure(budget_s))
    values["machine"] = machine_key()
    values["measured_at"] = time.time()
    path = cache_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(values), encoding="utf-8")
        tmp.replace(path)
    return _peaks(values)
