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
