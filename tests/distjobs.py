"""Real multi-rank jobs for the tests: ``torch.distributed`` on the CPU (gloo), profiled.

:func:`run_gloo_job` spawns ``world`` ranks (``torch.multiprocessing.spawn``, rendezvous on
127.0.0.1 at a free port, one intra-op thread each).  Every rank trains a small Linear stack
for a few steps under ``torch.profiler.profile`` (a wait/warmup/active schedule,
``record_shapes=True``); after each backward it all-reduces every gradient with an explicit
``dist.all_reduce``, parameter by parameter in ``model.parameters()`` order, so that the
collectives of a step and their sizes are known exactly (:func:`grad_numels`).  Each rank
exports ``rank<r>.json`` (a Kineto chrome trace with ``distributedInfo``) into the folder.

``slow_rank=k, delay_s=d`` makes rank ``k`` sleep ``d`` seconds after its backward, just before
the step's first all_reduce: the ranks' arrival at that collective then differ by about ``d``,
the other ranks wait for rank ``k`` (the ground truth for waits and stragglers).

The join has a timeout: past it every rank is killed and :class:`DistJobError` raised.
(No tests here.)
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The model: Linear layers of these widths (in, hidden..., out).
DEFAULT_WIDTHS: tuple[int, ...] = (64, 96, 32)
DEFAULT_BATCH = 16
# Profiler schedule: steps skipped, warmed up, recorded.
WAIT, WARMUP = 1, 1


class DistJobError(RuntimeError):
    """A distributed job failed or ran past its timeout."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def grad_numels(widths: Sequence[int] = DEFAULT_WIDTHS) -> list[int]:
    """Element counts of the gradients in ``model.parameters()`` order (weight, bias per
    Linear): the ``nelems`` of each step's all_reduces, in order."""
    out: list[int] = []
    for a, b in itertools.pairwise(widths):
        out += [a * b, b]
    return out


def _build_model(widths: Sequence[int]) -> Any:
    import torch

    layers: list[Any] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        if i:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(a, b))
    return torch.nn.Sequential(*layers)


def _rank_main(
    rank: int,
    world: int,
    port: int,
    folder: str,
    active: int,
    slow_rank: int | None,
    delay_s: float,
    widths: tuple[int, ...],
    tmpdir: str,
) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TMPDIR=tmpdir,
        GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"),
    )
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:
        torch.manual_seed(0)
        model = _build_model(widths)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(DEFAULT_BATCH, widths[0])
        out_path = Path(folder) / f"rank{rank}.json"

        def export(prof: Any) -> None:
            prof.export_chrome_trace(str(out_path))

        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=WAIT, warmup=WARMUP, active=active, repeat=1),
            record_shapes=True,
            on_trace_ready=export,
        ) as prof:
            for _ in range(WAIT + WARMUP + active):
                loss = model(x).square().mean()
                loss.backward()
                if rank == slow_rank:
                    time.sleep(delay_s)
                for p in model.parameters():
                    dist.all_reduce(p.grad)
                    p.grad.div_(world)
                opt.step()
                opt.zero_grad()
                prof.step()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_gloo_job(
    folder: str | Path,
    world: int = 2,
    *,
    active: int = 3,
    slow_rank: int | None = None,
    delay_s: float = 0.0,
    widths: Sequence[int] = DEFAULT_WIDTHS,
    timeout_s: float = 90.0,
) -> list[Path]:
    """Run a ``world``-rank gloo job (see the module docstring) recording ``active`` steps;
    returns the paths of ``rank<r>.json``, one per rank, in rank order."""
    if not 1 <= world <= 8:
        raise ValueError(f"world must be 1..8, got {world}")
    import torch.multiprocessing as mp

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmpdir = tempfile.mkdtemp(prefix="distjob-tmp-")
    args = (
        world,
        free_port(),
        str(folder),
        active,
        slow_rank,
        delay_s,
        tuple(widths),
        tmpdir,
    )
    ctx = mp.start_processes(_rank_main, args=args, nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    try:
        while not ctx.join(timeout=max(0.1, min(1.0, deadline - time.monotonic()))):
            if time.monotonic() > deadline:
                raise DistJobError(f"{world}-rank gloo job ran past {timeout_s:.0f} s: killed")
    except mp.ProcessRaisedException as exc:
        raise DistJobError(f"a rank of the gloo job failed:\n{exc}") from exc
    except mp.ProcessExitedException as exc:
        raise DistJobError(f"a rank of the gloo job exited: {exc}") from exc
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join(5)
        shutil.rmtree(tmpdir, ignore_errors=True)
    paths = [folder / f"rank{r}.json" for r in range(world)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise DistJobError(f"the gloo job wrote no {', '.join(missing)}")
    return paths


def nccl_rank_doc(
    rank: int,
    world: int,
    *,
    n: int = 3,
    late_rank: int | None = None,
    late_us: float = 0.0,
    pg: str = "0",
    sync: bool = False,
    comm_stream: int = 7,
    steps: bool = False,
) -> dict[str, Any]:
    """A synthetic Kineto document of one rank of an NCCL job (no torch needed): ``n``
    all_reduces, each a ``c10d::allreduce_`` > ``record_param_comms`` (``Collective name``,
    ``In msg nelems``, ``dtype``, ``Process Group Name`` ``pg``, ``Group size``, ``Seq``) >
    ``nccl:all_reduce`` > ``cudaLaunchKernel`` -> an NCCL kernel, after a compute op and its
    kernel.  Collective ``i``'s kernel starts at ``1000 + 1000 i`` us (``late_us`` later on
    ``late_rank``: the other ranks wait that long) and ends at ``1300 + 1000 i`` us on every
    rank.  Event ids are those of the file's order (the host ops first).  With ``sync`` the
    host ends the step in a ``cudaDeviceSynchronize`` that returns 10 us after the last
    kernel (the step marker ends there), as a training loop that reads its loss does: the
    step's end then waits on the device; without it the host's step runs on to ``1000 (n+1)``
    us whatever the device does.  ``comm_stream``: the NCCL kernels' stream (by default the
    compute stream, where collective ``i``'s kernel overlaps the next iteration's gemm; NCCL
    runs its own stream, 8, in a real job).  ``steps``: each iteration is a profiler step of
    its own (``ProfilerStep#i+1`` from ``1000 i`` us; the last runs to the end), one step
    otherwise."""
    ev: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0.0, "dur": 1000.0 * (n + 1)},
    ]  # fmt: skip
    corr = 100

    def x(name: str, ts: float, dur: float, cat: str = "cpu_op", **kw: Any) -> None:
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts,
                   "dur": dur, **kw})  # fmt: skip

    for i in range(n):
        base = 1000.0 * i + 100.0
        corr += 1
        x("aten::mm", base, 30.0, args={"External id": corr})
        x("cudaLaunchKernel", base + 5, 5.0, "cuda_runtime", args={"correlation": corr})
        x("gemm_kernel", base + 20, 400.0, "kernel", pid=0, tid=7, args={"correlation": corr})
        corr += 1
        host = base + 500.0
        x("c10d::allreduce_", host, 60.0, args={"External id": corr})
        params = {
            "Collective name": "allreduce",
            "In msg nelems": 1024,
            "Out msg nelems": 1024,
            "dtype": "Float",
            "Process Group Name": pg,
            "Group size": world,
            "Seq": i,
        }
        x("record_param_comms", host + 2, 50.0, args=params)
        x("nccl:all_reduce", host + 4, 40.0, "user_annotation")
        x("cudaLaunchKernel", host + 10, 5.0, "cuda_runtime", args={"correlation": corr})
        start = 1000.0 * (i + 1) + (late_us if rank == late_rank else 0.0)
        end = 1000.0 * (i + 1) + 300.0
        x(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)",
            start,
            end - start,
            "kernel",
            pid=0,
            tid=comm_stream,
            args={"correlation": corr},
        )
    if sync:
        last_end = 1000.0 * n + 300.0
        x("cudaDeviceSynchronize", 1000.0 * n + 100.0, last_end + 10.0 - (1000.0 * n + 100.0),
          "cuda_runtime")  # fmt: skip
        ev[0]["dur"] = last_end + 10.0
    if steps and n > 1:
        end = float(ev[0]["dur"])
        ev[0]["dur"] = 1000.0
        for i in range(1, n):
            ev.append({**ev[0], "name": f"ProfilerStep#{i + 1}", "ts": 1000.0 * i,
                       "dur": 1000.0 if i < n - 1 else end - 1000.0 * i})  # fmt: skip
    return {
        "schemaVersion": 1,
        "traceEvents": ev,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
    }


def write_nccl_job(folder: str | Path, world: int = 2, **kw: Any) -> list[Path]:
    """:func:`nccl_rank_doc` of each rank as ``trace_rank_<r>.json`` in ``folder``."""
    import json

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(world):
        path = folder / f"trace_rank_{r}.json"
        path.write_text(json.dumps(nccl_rank_doc(r, world, **kw)))
        paths.append(path)
    return paths
