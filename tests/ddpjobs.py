"""Real DDP jobs profiled the way a user profiles them: ``opscope profile --nproc N`` runs a
training script on the CPU (gloo over the loopback), every rank records the same steps.

:func:`run_ddp_job` writes the script and runs it.  The script trains a small MLP under
``DistributedDataParallel`` on batches of a ``DataLoader`` (``num_workers=0``).  One rank can
be slowed, as the ground truth of what bounds the job:

* ``mode="sleep"`` - rank ``slow_rank`` sleeps ``sleep_s`` per step inside a
  ``record_function("slow_rank_sleep")`` range just before its forward;
* ``mode="loader"`` - rank ``slow_rank``'s dataset sleeps ``sleep_s / batch`` in each
  ``__getitem__`` (I/O, decoding), so its ``DataLoader.__next__`` takes ``sleep_s`` longer.

The run folder's ``traces/rank<r>.json.gz`` are the job.  (No tests here.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

BATCH = 16

SCRIPT = """
import os, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
mode, slow = os.environ["JOB_MODE"], int(os.environ["JOB_SLOW_RANK"])
sleep_s = float(os.environ["JOB_SLEEP_S"])
torch.manual_seed(0)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 64)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        if mode == "loader" and rank == slow:
            time.sleep(sleep_s / BATCH)
        return torch.randn(64), torch.randn(64)


loader = iter(torch.utils.data.DataLoader(Data(), batch_size=BATCH, num_workers=0))
for _ in range(int(os.environ["JOB_STEPS"])):
    x, y = next(loader)
    if mode == "sleep" and rank == slow:
        with torch.profiler.record_function("slow_rank_sleep"):
            time.sleep(sleep_s)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
# every rank leaves together: a slow rank that tore its group down after its peers had
# exited aborted twice under load ("terminate called without an active exception", SIGABRT)
dist.barrier()
dist.destroy_process_group()
"""


class DDPJobError(RuntimeError):
    """The profiled job failed or ran past its timeout."""


def _aborted_at_exit(done: subprocess.CompletedProcess[str], world: int) -> bool:
    """Whether the job failed only as its ranks exited: every rank recorded its steps and a
    rank then aborted in C++ teardown ("terminate called without an active exception")."""
    err = done.stderr
    return (
        done.returncode != 0
        and "terminate called without an active exception" in err
        and err.count("recorded steps") == world
    )


def run_ddp_job(
    folder: Path,
    *,
    world: int = 4,
    mode: str = "none",
    slow_rank: int = -1,
    sleep_s: float = 0.0,
    active: int = 5,
    timeout: float = 300.0,
) -> Path:
    """Profile the script with ``opscope profile --nproc world`` (``active`` steps after the
    default wait and warm-up) into ``folder``; returns the run folder (``traces/`` holds the
    rank traces)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "train.py"
    script.write_text(textwrap.dedent(SCRIPT).replace("BATCH", str(BATCH)), encoding="utf-8")
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MASTER_ADDR": "127.0.0.1",
        "JOB_MODE": mode,
        "JOB_SLOW_RANK": str(slow_rank),
        "JOB_SLEEP_S": str(sleep_s),
        "JOB_STEPS": str(active + 6),
    }
    args = ["--nproc", str(world), "--active", str(active), "--out", "runs", "--no-report"]
    for attempt in (1, 2):
        try:
            done = subprocess.run(
                [sys.executable, "-m", "opscope", "profile", *args, "--", "train.py"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise DDPJobError(f"the job ran past {timeout} s") from exc
        if attempt == 1 and _aborted_at_exit(done, world):
            # torch's gloo teardown still aborts a rank now and then on a loaded machine,
            # after every rank recorded its trace (the barrier above made it rarer): the job
            # is run once more, from a clean folder; any other failure is the test's
            shutil.rmtree(folder / "runs", ignore_errors=True)
            continue
        break
    if done.returncode != 0:
        # the ranks' own messages come before the launcher's summary of their failures
        raise DDPJobError(f"the job failed ({done.returncode}): {done.stderr[-8000:]}")
    runs = [p for p in (folder / "runs").iterdir() if p.is_dir()]
    if len(runs) != 1:
        raise DDPJobError(f"expected one run folder, got {runs}")
    return runs[0]
