"""Several ranks, one run folder: what ``opscope profile`` needs to know about a distributed run.

Contract:

- :func:`detect` reads the launcher's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, …,
  as torchrun and most launchers set them) into a :class:`World`, or None for a plain process.
- :func:`agreed_run_dir` names the one run folder that every rank of a run writes into, without
  any communication between the ranks: ``$OPSCOPE_RUN_DIR`` when set (``opscope profile
  --nproc`` creates the folder and sets it), else a name every rank derives alike from the
  launch: ``TORCHELASTIC_RUN_ID`` when the launcher gave one (``torchrun --rdzv-id`` or
  ``--standalone``), else the Slurm job and step, else (one node) the start time of the launcher
  process that is every rank's parent, plus ``MASTER_PORT``.
- :func:`process_groups` describes the initialised ``torch.distributed`` world (backend, size,
  process groups) for ``run.json``; :func:`wait_for_ranks` lets rank 0 wait for the others'
  run documents before it reports on the folder.
- :func:`launcher_command` is the ``python -m torch.distributed.run`` command behind ``opscope
  profile --nproc N``: one node, rendezvous on 127.0.0.1.

Nothing here imports torch at module level.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opscope.capture.runfolder import rank_run_json, safe_label

#: Environment variable naming the run folder all ranks share.
RUN_DIR_ENV = "OPSCOPE_RUN_DIR"

# torchrun's rendezvous id when none was given: not unique to a launch
_NO_RUN_ID = ("", "none")


@dataclass(frozen=True)
class World:
    """This process's place in a distributed run, as the launcher described it."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int | None = None
    run_id: str | None = None
    master_addr: str | None = None
    master_port: str | None = None

    @property
    def multi(self) -> bool:
        """More than one rank: the run folder is shared and traces are per rank."""
        return self.world_size > 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "local_rank": self.local_rank,
            "local_world_size": self.local_world_size,
            "run_id": self.run_id,
            "master_addr": self.master_addr,
            "master_port": self.master_port,
        }


def _int(env: Mapping[str, str], key: str) -> int | None:
    text = env.get(key, "").strip()
    return int(text) if text.isdigit() else None


def detect(env: Mapping[str, str] | None = None) -> World | None:
    """The :class:`World` the launcher set up (``RANK`` and ``WORLD_SIZE`` both set), or None."""
    env = os.environ if env is None else env
    rank, world_size = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is None or world_size is None or world_size < 1 or rank >= world_size:
        return None
    local_rank = _int(env, "LOCAL_RANK")
    return World(
        rank=rank,
        world_size=world_size,
        local_rank=rank if local_rank is None else local_rank,
        local_world_size=_int(env, "LOCAL_WORLD_SIZE"),
        run_id=env.get("TORCHELASTIC_RUN_ID"),
        master_addr=env.get("MASTER_ADDR"),
        master_port=env.get("MASTER_PORT"),
    )


def _process_start(pid: int) -> float | None:
    """Wall-clock start time of process ``pid`` (Linux ``/proc``), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        # the command name (field 2) may hold spaces: count fields after its closing paren
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = float(fields[19])  # field 22 of the whole line: starttime, in clock ticks
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def launch_name(label: str | None, world: World, env: Mapping[str, str] | None = None) -> str:
    """The run folder name every rank of this launch derives alike (see the module docstring)."""
    env = os.environ if env is None else env
    lab = safe_label(label)
    run_id = (world.run_id or "").strip()
    if run_id.lower() not in _NO_RUN_ID:
        return f"{lab}-rdzv-{safe_label(run_id)[:48]}"
    job = env.get("SLURM_JOB_ID")
    if job:
        return f"{lab}-slurm{safe_label(job)}-{safe_label(env.get('SLURM_STEP_ID', '0'))}"
    port = safe_label(world.master_port or "0")
    parent = os.getppid()
    started = _process_start(parent)
    if started is None:
        return f"{lab}-ppid{parent}-port{port}"
    # the launcher (every rank's parent on this node) started once: its start time is shared
    return f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(started))}-{lab}-port{port}"


def agreed_run_dir(
    out: str | os.PathLike[str],
    label: str | None,
    world: World,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The run folder shared by all ranks of this launch (not created here)."""
    env = os.environ if env is None else env
    explicit = env.get(RUN_DIR_ENV, "").strip()
    if explicit:
        return Path(explicit)
    return Path(out) / launch_name(label, world, env)


def process_groups() -> dict[str, Any] | None:
    """The initialised ``torch.distributed`` world for ``run.json``, or None when there is none.

    ``process_groups`` lists each group (name, description, backend, size, ranks) as torch's
    profiler records it in a trace's ``distributedInfo``; it comes from a private torch
    function, so it is left out when that function is missing or fails.  An initialised
    world whose backend, rank or size cannot be read gives ``{"error": "..."}`` saying why.
    """
    try:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            return None
    except Exception:  # torch without a usable distributed package: no world to describe
        return None
    try:
        info: dict[str, Any] = {
            "backend": str(dist.get_backend()),
            "rank": dist.get_rank(),
            "world_size": dist.get_world_size(),
        }
    except Exception as exc:  # an initialised world that cannot be read: say why
        return {"error": f"{type(exc).__name__}: {exc}"}
    with contextlib.suppress(Exception):  # get_pg_count is not in every torch version
        info["pg_count"] = int(dist.get_pg_count())
    try:
        from torch.distributed import distributed_c10d

        configs = distributed_c10d._get_all_pg_configs()
        info["process_groups"] = [dict(c) for c in configs]
    except Exception as exc:  # private API: record why it is missing instead of failing
        info["process_groups_error"] = f"{type(exc).__name__}: {exc}"
    return info


def wait_for_ranks(
    run_dir: Path, world_size: int, timeout_s: float, poll_s: float = 0.2
) -> list[int]:
    """Wait until every rank's run document ``ranks/rank<N>.json`` exists; the ranks still
    missing when ``timeout_s`` ran out (empty when all are there)."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        missing = [r for r in range(world_size) if not (run_dir / rank_run_json(r)).is_file()]
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(poll_s)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (for the launcher's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def launcher_command(
    nproc: int,
    opscope_args: Sequence[str],
    program_args: Sequence[str],
    *,
    port: int,
    python: str | None = None,
) -> list[str]:
    """``python -m torch.distributed.run`` running ``opscope profile`` on ``nproc`` local ranks.

    ``opscope_args`` are the ``opscope profile`` options for each rank, ``program_args`` the
    program (``script.py args…`` or ``-m module args…``).  The rendezvous is static on
    127.0.0.1 (one node), so nothing listens beyond this host's loopback by our choice.
    """
    if nproc < 1:
        raise ValueError(f"nproc must be >= 1, got {nproc}")
    return [
        python or sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        "-m",
        "opscope",
        "profile",
        *opscope_args,
        "--",
        *program_args,
    ]


__all__ = [
    "RUN_DIR_ENV",
    "World",
    "agreed_run_dir",
    "detect",
    "free_port",
    "launch_name",
    "launcher_command",
    "process_groups",
    "wait_for_ranks",
]
