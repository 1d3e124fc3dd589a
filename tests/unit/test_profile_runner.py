"""`opscope profile` in this process: program loading, the command line, the runner's
messages, and the rank-aware session options."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from opscope.capture.distributed import (
    RUN_DIR_ENV,
    World,
    agreed_run_dir,
    detect,
    launch_name,
    launcher_command,
    wait_for_ranks,
)
from opscope.capture.program import Program, _exit_code, load_program
from opscope.capture.runner import RunnerOptions, device_for_rank, profile_program
from opscope.capture.schedule import Schedule
from opscope.capture.session import profile
from opscope.cli import profile_cmd
from opscope.cli.main import build_parser, main
from opscope.errors import OpscopeError, ScheduleError

# -- the program --------------------------------------------------------------------------------


def test_program_sees_argv_name_path_and_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "sub" / "prog.py"
    script.parent.mkdir()
    script.write_text(
        "import sys\nprint(sys.argv, __name__, sys.path[0], __file__)\n"
        "if sys.argv[1] == 'exit': sys.exit(int(sys.argv[2]))\n"
        "if sys.argv[1] == 'raise': raise KeyError('k')\n"
    )
    argv, path0 = list(sys.argv), sys.path[0]
    main_mod = sys.modules["__main__"]
    loaded = load_program(Program("script", str(script), ("ok",)))
    assert loaded.execute().exit_code == 0
    assert capsys.readouterr().out.split() == [
        f"['{script}',",
        "'ok']",
        "__main__",
        str(script.parent.resolve()),
        str(script.resolve()),
    ]
    # the launcher's own state is back
    assert sys.argv == argv and sys.path[0] == path0 and sys.modules["__main__"] is main_mod

    assert load_program(Program("script", str(script), ("exit", "4"))).execute().exit_code == 4
    out = load_program(Program("script", str(script), ("raise",))).execute()
    assert out.exit_code == 1 and isinstance(out.exception, KeyError)
    assert [_exit_code(c) for c in (None, 0, 7, False, True)] == [0, 0, 7, 0, 1]
    assert _exit_code("bye") == 1 and "bye" in capsys.readouterr().err
    with pytest.raises(OpscopeError, match="no such file"):
        load_program(Program("script", str(tmp_path / "missing.py")))
    with pytest.raises(OpscopeError, match="no module named"):
        load_program(Program("module", "surely_not_a_module_xyz"))


def test_program_labels() -> None:
    assert Program("script", "a/b/train.py").label == "train"
    assert Program("module", "pkg.train").label == "pkg.train"


# -- the command line ---------------------------------------------------------------------------


def parse(argv: list[str]) -> argparse.Namespace:
    parser, _ = build_parser()
    return parser.parse_args(["profile", *argv])


@pytest.mark.parametrize(
    ("argv", "kind", "target", "args"),
    [
        (["--", "train.py", "--lr", "1"], "script", "train.py", ("--lr", "1")),
        (["train.py", "x"], "script", "train.py", ("x",)),
        (["--active", "3", "-m", "pkg.mod", "--flag", "-m", "y"], "module", "pkg.mod",
         ("--flag", "-m", "y")),
        (["--", "-m", "pkg", "a"], "module", "pkg", ("a",)),
    ],
)  # fmt: skip
def test_program_from_args(argv: list[str], kind: str, target: str, args: tuple[str]) -> None:
    program = profile_cmd.program_from_args(parse(argv))
    assert (program.kind, program.target, program.args) == (kind, target, args)


def test_neuron_config_values() -> None:
    got = profile_cmd.parse_neuron_config(
        [["max_events_per_nc=100000", "modes=device,runtime"], ["flag=true", "dir=/tmp/x"]]
    )
    assert got == {
        "max_events_per_nc": 100000,
        "modes": ["device", "runtime"],
        "flag": True,
        "dir": "/tmp/x",
    }
    assert profile_cmd.parse_neuron_config(None) is None
    with pytest.raises(profile_cmd.UsageError, match="KEY=VALUE"):
        profile_cmd.parse_neuron_config([["train.py"]])


def test_child_options_round_trip() -> None:
    args = parse(
        ["--wait", "0", "--warmup", "2", "--active", "3", "--step-fn", "m:f", "--delay", "1.5",
         "--no-record-shapes", "--memory", "--neuron-config", "a=1", "--nproc", "2", "--",
         "t.py"]
    )  # fmt: skip
    child = parse([*profile_cmd.child_options(args, "lab"), "--", "t.py"])
    for name in ("wait", "warmup", "active", "repeat", "skip_first", "step_fn", "delay",
                 "record_shapes", "memory", "with_stack", "neuron_config"):  # fmt: skip
        assert getattr(child, name) == getattr(args, name), name
    assert child.label == "lab" and child.report is False and child.nproc is None


def test_bad_command_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile"]) == 2
    assert "no program given" in capsys.readouterr().err
    assert main(["profile", "--active", "0", "--", "x.py"]) == 2
    assert "active must be >= 1" in capsys.readouterr().err
    assert main(["profile", "--neuron-config", "x", "--", "x.py"]) == 2
    script = tmp_path / "t.py"
    script.write_text("print('never runs')\n")
    out = str(tmp_path / "runs")
    assert main(["profile", "--out", out, "--step-fn", f"{script}:nope", "--", str(script)]) == 1
    captured = capsys.readouterr()
    assert "no `def nope`" in captured.err and "never runs" not in captured.out
    assert main(["profile", "--out", out, "--on-demand", "--delay", "1", "--", str(script)]) == 1
    assert "--on-demand" in capsys.readouterr().err
    assert not Path(out).exists()


# -- the runner, in this process -----------------------------------------------------------------


def run_here(tmp_path: Path, source: str, **options: Any) -> Any:
    script = tmp_path / "prog.py"
    script.write_text(source)
    logged: list[str] = []
    result = profile_program(
        Program("script", str(script)),
        RunnerOptions(device="cpu", out=tmp_path / "runs", signals=False, **options),
        logged.append,
    )
    return result, logged


def test_runner_too_short_for_the_schedule(tmp_path: Path) -> None:
    result, _ = run_here(
        tmp_path,
        "from opscope.capture.active import step\nfor _ in range(2):\n    step()\n",
        schedule=Schedule(wait=2, warmup=1, active=1),
    )
    assert result.exit_code == 0 and result.steps == 2
    [message] = result.messages
    assert "the profiler's active window starts at step 3" in message
    assert "the program ran 2" in message and "--wait/--warmup" in message
    [capture] = result.captures
    assert capture.status == "schedule_error" and not capture.recorded
    run = json.loads((capture.run_dir / "run.json").read_text())
    assert run["status"] == "schedule_error" and run["program"]["steps_marked"] == 2


def test_runner_without_steps_says_how_to_mark_them(tmp_path: Path) -> None:
    result, _ = run_here(tmp_path, "x = 1\n")
    assert result.exit_code == 0 and result.steps == 0
    [message] = result.messages
    assert "without marking a step" in message
    assert "--step-fn" in message and "opscope.step()" in message


def test_runner_delay_never_reached(tmp_path: Path) -> None:
    result, _ = run_here(
        tmp_path,
        "from opscope.capture.active import step\nstep()\nstep()\n",
        delay_s=60.0,
    )
    assert result.captures == []
    assert "before the capture window opened at --delay 60 s" in result.messages[0]


def test_runner_marks_claimed_by_the_first_source(tmp_path: Path) -> None:
    source = """
import torch
from opscope.capture.active import step
p = torch.nn.Parameter(torch.ones(2))
opt = torch.optim.SGD([p], lr=0.1)
other = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
for _ in range(6):
    p.grad = torch.ones(2)
    opt.step()
    other.step()   # a second optimizer: not a second step
    step()         # the optimizer claimed the run first: ignored
"""
    result, _ = run_here(tmp_path, source, schedule=Schedule(wait=1, warmup=1, active=2))
    assert result.steps == 6 and result.step_source == "optimizer"
    assert result.ignored_marks == {"api": 6, "optimizer (another optimizer)": 6}
    assert result.captures[0].status == "ok"


def test_device_for_rank() -> None:
    one = World(rank=0, world_size=1, local_rank=0)
    two = World(rank=1, world_size=2, local_rank=1)
    assert device_for_rank(None, one) is None
    assert device_for_rank("cuda:3", two) == "cuda:3"
    assert device_for_rank("cpu", two) == "cpu"
    if not torch.cuda.is_available():
        assert device_for_rank(None, two) is None  # the CPU: nothing to pick


# -- distributed --------------------------------------------------------------------------------


def test_detect_world() -> None:
    assert detect({}) is None
    assert detect({"RANK": "0"}) is None
    assert detect({"RANK": "2", "WORLD_SIZE": "2"}) is None  # rank out of range
    w = detect({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "j"})
    assert w is not None and w.multi and (w.rank, w.world_size, w.local_rank) == (1, 4, 1)
    assert w.run_id == "j"
    single = detect({"RANK": "0", "WORLD_SIZE": "1"})
    assert single is not None and not single.multi


def test_ranks_agree_on_the_run_folder(tmp_path: Path) -> None:
    env0 = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "29500"}
    env1 = {**env0, "RANK": "1", "LOCAL_RANK": "1"}
    w0, w1 = detect(env0), detect(env1)
    assert w0 is not None and w1 is not None
    # no run id: both derive the name from their shared parent (this process's parent here)
    assert launch_name("train", w0, env0) == launch_name("train", w1, env1)
    assert launch_name("train", w0, env0).endswith("-train-port29500")
    with_id = World(rank=0, world_size=2, local_rank=0, run_id="job 7")
    assert launch_name("t", with_id, {}) == "t-rdzv-job-7"
    assert launch_name("t", w0, {"SLURM_JOB_ID": "55", "SLURM_STEP_ID": "2"}) == "t-slurm55-2"
    shared = tmp_path / "shared"
    assert agreed_run_dir(tmp_path, "t", w1, {RUN_DIR_ENV: str(shared)}) == shared
    assert agreed_run_dir(tmp_path, "t", with_id, {}) == tmp_path / "t-rdzv-job-7"


def test_launcher_command() -> None:
    cmd = launcher_command(2, ["--active", "2"], ["-m", "pkg", "x"], port=1234, python="py")
    assert cmd[:3] == ["py", "-m", "torch.distributed.run"]
    assert cmd[cmd.index("--nproc-per-node") + 1] == "2"
    assert cmd[cmd.index("--master-addr") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--master-port") + 1] == "1234"
    assert cmd[-8:] == ["opscope", "profile", "--active", "2", "--", "-m", "pkg", "x"]
    with pytest.raises(ValueError):
        launcher_command(0, [], ["t.py"], port=1)


def test_wait_for_ranks(tmp_path: Path) -> None:
    (tmp_path / "ranks").mkdir()
    (tmp_path / "ranks" / "rank0.json").write_text("{}")
    assert wait_for_ranks(tmp_path, 2, timeout_s=0.05, poll_s=0.01) == [1]
    (tmp_path / "ranks" / "rank1.json").write_text("{}")
    assert wait_for_ranks(tmp_path, 2, timeout_s=0.0) == []


# -- the session's options for opscope profile ---------------------------------------------------


def work() -> None:
    a = torch.randn(16, 16)
    (a @ a).sum()


@pytest.mark.filterwarnings("ignore:Warning. Profiler clears events")
def test_session_rank_layout_in_a_shared_folder(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    for rank in (1, 0):
        with profile(device="cpu", wait=0, warmup=1, active=1, repeat=2, run_dir=shared,
                     rank=rank) as p:  # fmt: skip
            for _ in range(p.steps):
                work()
                p.step()
        assert p.run_dir == shared
        assert p.trace_path == shared / "traces" / f"rank{rank}.json.gz"
    assert sorted(f.name for f in (shared / "traces").iterdir()) == [
        "cycle2",
        "rank0.json.gz",
        "rank1.json.gz",
    ]
    assert (shared / "traces" / "cycle2" / "rank1.json.gz").is_file()
    assert not list(shared.glob(".partial*"))
    run = json.loads((shared / "run.json").read_text())  # written by rank 0 only
    assert run["rank"] == 0
    assert run["traces"] == ["traces/rank0.json.gz", "traces/cycle2/rank0.json.gz"]
    assert json.loads((shared / "ranks" / "rank1.json").read_text())["rank"] == 1
    with pytest.raises(ValueError, match="rank"):
        profile(device="cpu", rank=-1)


@pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")
def test_session_until_stop_and_annotate(tmp_path: Path) -> None:
    with profile(device="cpu", wait=0, warmup=0, active=1, out=tmp_path, until_stop=True) as p:
        p.annotate("capture", {"why": "test"})
        with pytest.raises(ValueError, match="written by the session"):
            p.annotate("status", "x")
        for _ in range(3):
            work()
            p.step()
        work()
        p.stop()  # the 4th step counts, no empty ProfilerStep after it
        assert p.status == "ok"
    run = json.loads((p.run_dir / "run.json").read_text())
    assert run["steps"]["run"] == 4 and run["steps"]["active"] == [0, 1, 2, 3]
    assert run["schedule"]["until_stop"] is True
    assert run["capture"] == {"why": "test"}
    import gzip

    with gzip.open(p.run_dir / "trace.json.gz") as fh:
        names = {e.get("name") for e in json.load(fh)["traceEvents"]}
    assert {f"ProfilerStep#{i}" for i in range(4)} <= names
    assert "ProfilerStep#4" not in names
    p.annotate("program", {"exit_code": 0})  # after the end: run.json is rewritten
    assert json.loads((p.run_dir / "run.json").read_text())["program"] == {"exit_code": 0}

    with (
        pytest.raises(ScheduleError, match="before its first recorded step"),
        profile(device="cpu", wait=1, warmup=0, active=1, out=tmp_path, until_stop=True) as q,
    ):
        q.step()
    assert q.status == "schedule_error"
