"""``opscope profile`` records enough steps of a job of several ranks by default to tell a
straggler or an imbalance from noise (3 collectives per group, 3 steps), one otherwise."""

from __future__ import annotations

import pytest

from opscope.analysis.lateness import MIN_INSTANCES
from opscope.cli.profile_cmd import child_options, default_active


def test_a_job_of_several_ranks_records_five_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert default_active(None) == 1 and default_active(1) == 1
    assert default_active(4) == 5 >= MIN_INSTANCES
    monkeypatch.setenv("WORLD_SIZE", "8")  # under torchrun
    assert default_active(None) == 5


def test_nproc_passes_the_default_to_every_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from opscope.cli import profile_cmd

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    p = argparse.ArgumentParser()
    profile_cmd.add_arguments(p)
    args = p.parse_args(["--nproc", "4", "--", "train.py"])
    assert args.active is None  # not given: the run decides
    args.active = default_active(args.nproc)
    opts = child_options(args, "train")
    assert opts[opts.index("--active") + 1] == "5"
