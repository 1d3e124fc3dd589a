"""`opscope profile` end to end: real scripts written into tmp_path, run in subprocesses."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from opscope.cli.main import main
from schema_checks import check_document

PY = sys.executable

MLP = """
import json, sys
import torch

print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
                  "file": __file__}), flush=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 16), torch.randn(8, 1)
for i in range(int(sys.argv[1])):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    {after_step}
print("trained", flush=True)
sys.stderr.write("program stderr line\\n")
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def mlp(tmp_path: Path, after_step: str = "pass", name: str = "train.py") -> Path:
    return write(tmp_path, name, MLP.replace("{after_step}", after_step))


def _ctrl_c_as_in_a_terminal() -> None:
    """SIGINT's default action in the child, as a terminal's foreground job has it: a test run
    in the background of a shell inherits SIGINT ignored, and then Python installs no
    KeyboardInterrupt handler (the Ctrl-C test failed so, exit 0, in such a run)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def opscope(
    args: list[str], cwd: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "opscope", "profile", *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )


def only_run_dir(out: Path) -> Path:
    dirs = [p for p in out.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def events(trace: Path) -> list[dict[str, Any]]:
    with gzip.open(trace) as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def step_names(trace: Path) -> list[str]:
    return sorted(e["name"] for e in events(trace) if e["name"].startswith("ProfilerStep#"))


def report_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`opscope report PATH --format json`, in this process (it needs no torch)."""
    capsys.readouterr()
    assert main(["report", str(path), "--format", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert data["schema"] == "opscope.report/1"
    return data


def test_training_loop_default_steps_and_pass_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = mlp(tmp_path)
    done = opscope(["--active", "2", "--out", "runs", "--", "train.py", "6"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    # the program's stdout is its own, byte for byte: its JSON line and its last line
    lines = done.stdout.splitlines()
    assert lines[-1] == "trained" and len(lines) == 2
    seen = json.loads(lines[0])
    assert seen["argv"] == ["train.py", "6"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(tmp_path.resolve())
    assert seen["file"] == str(script.resolve())
    assert "program stderr line" in done.stderr
    assert f"kill -USR2 {done.stderr.split('(pid ')[1].split(')')[0]}" in done.stderr
    assert "Ops by" in done.stderr  # the report, on stderr

    run_dir = only_run_dir(tmp_path / "runs")
    assert run_dir.name.endswith("-train")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "ok"
    assert run["steps"]["run"] == 5  # the session closes once the schedule is complete
    assert run["program"]["steps_marked"] == 6
    assert run["program"]["step_source"] == "optimizer"
    assert run["program"]["exit_code"] == 0
    assert run["capture"]["argv"] == ["train.py", "6"]
    check_document(run, "run")

    trace = run_dir / "trace.json.gz"
    assert step_names(trace) == ["ProfilerStep#3", "ProfilerStep#4"]
    # each optimizer step lies wholly inside its profiler step: the step is marked after
    # torch's Optimizer.step range closed, not from inside it
    evs = events(trace)
    steps = [e for e in evs if e["name"].startswith("ProfilerStep#")]
    opt_steps = [e for e in evs if e["name"].startswith("Optimizer.step#")]
    assert len(opt_steps) == 2
    for o in opt_steps:
        assert any(
            s["ts"] <= o["ts"] and o["ts"] + o["dur"] <= s["ts"] + s["dur"] for s in steps
        ), o

    data = report_json(run_dir, capsys)
    assert any(op["name"] == "aten::addmm" for op in data["ops"])


def test_step_fn_marks_an_inference_loop(tmp_path: Path) -> None:
    write(
        tmp_path,
        "infer.py",
        """
        import torch

        model = torch.nn.Linear(16, 16)

        @torch.no_grad()
        def run_batch(x):
            return model(x).relu().sum()

        def main():
            x = torch.randn(4, 16)
            for _ in range(7):
                run_batch(x)
            print("calls done")

        if __name__ == "__main__":
            main()
        """,
    )
    done = opscope(
        ["--no-report", "--out", "runs", "--step-fn", "infer.py:run_batch", "--", "infer.py"],
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "calls done\n"
    run_dir = only_run_dir(tmp_path / "runs")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "ok"
    assert run["program"]["step_source"] == "step_fn"
    assert run["program"]["steps_marked"] == 7
    assert step_names(run_dir / "trace.json.gz") == ["ProfilerStep#3"]
    names = {e["name"] for e in events(run_dir / "trace.json.gz")}
    assert "aten::addmm" in names or "aten::linear" in names
    assert "Ops by" not in done.stderr  # --no-report


def test_step_fn_in_an_imported_module_with_dash_m(tmp_path: Path) -> None:
    write(
        tmp_path,
        "helpers.py",
        """
        import torch

        def work(n):
            a = torch.randn(n, n)
            return (a @ a).sum()
        """,
    )
    write(
        tmp_path,
        "app/__main__.py",
        """
        import sys
        import helpers

        print(sys.argv[1:], __name__, sys.argv[0].endswith("__main__.py"), flush=True)
        for _ in range(5):
            helpers.work(16)
        sys.exit(3)
        """,
    )
    write(tmp_path, "app/__init__.py", "")
    done = opscope(
        ["--no-report", "--out", "runs", "--step-fn", "helpers:work", "-m", "app", "--x", "1"],
        cwd=tmp_path,
    )
    assert done.returncode == 3, done.stderr  # SystemExit's code passes through
    assert done.stdout == "['--x', '1'] __main__ True\n"
    run_dir = only_run_dir(tmp_path / "runs")
    assert run_dir.name.endswith("-app")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["program"]["steps_marked"] == 5
    assert run["program"]["exit_code"] == 3
    assert run["status"] == "ok"  # the window was complete before the program exited
    assert "aten::mm" in {e["name"] for e in events(run_dir / "trace.json.gz")}


def test_crashing_program_keeps_its_exit_code_and_the_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = 1
    mlp(tmp_path, after_step="if i == 4: raise ValueError('boom at step 4')")
    done = opscope(
        ["--no-report", "--active", "3", "--out", "runs", "--", "train.py", "9"], tmp_path
    )
    assert done.returncode == code, done.stderr
    assert "trained" not in done.stdout
    run_dir = only_run_dir(tmp_path / "runs")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "error"
    assert run["program"]["exit_code"] == code
    # steps 3 and 4 completed inside the window (3..5) before the program stopped
    assert step_names(run_dir / "trace.json.gz")[:2] == ["ProfilerStep#3", "ProfilerStep#4"]
    # the traceback reads as if the program ran alone: it starts at the script
    tb = done.stderr[done.stderr.index("Traceback (most recent call last):") :]
    first_frame = tb.splitlines()[1]
    assert "train.py" in first_frame and "opscope" not in first_frame
    assert tb.rstrip().endswith("ValueError: boom at step 4")
    report_json(run_dir, capsys)


def test_ctrl_c_exports_what_was_recorded_and_exits_130(tmp_path: Path) -> None:
    mlp(tmp_path, after_step="if i == 4: import os, signal; os.kill(os.getpid(), signal.SIGINT)")
    done = opscope(
        ["--no-report", "--active", "3", "--out", "runs", "--", "train.py", "9"], tmp_path
    )
    assert done.returncode == 130, done.stderr
    assert "KeyboardInterrupt" in done.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "error"
    assert step_names(run_dir / "trace.json.gz")[:2] == ["ProfilerStep#3", "ProfilerStep#4"]


def test_sigusr2_captures_the_next_steps(tmp_path: Path) -> None:
    write(
        tmp_path,
        "long.py",
        """
        import os, signal
        import torch
        from opscope.capture.active import step

        for i in range(12):
            a = torch.randn(32, 32)
            (a @ a).sum()
            if i == 5:
                os.kill(os.getpid(), signal.SIGUSR2)
            step()
        """,
    )
    done = opscope(
        [
            "--no-report",
            "--on-demand",
            "--warmup",
            "1",
            "--active",
            "2",
            "--out",
            "runs",
            "--",
            "long.py",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "kill -USR2" in done.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["program"]["step_source"] == "api"  # the program's own step() calls
    assert run["capture"]["trigger"] == "signal"
    # the signal came during step 5; the capture starts with step 6: warmup 6, records 7-8
    assert run["capture"]["first_program_step"] == 6
    assert step_names(run_dir / "trace.json.gz") == ["ProfilerStep#1", "ProfilerStep#2"]
    assert "recorded steps 7–8" in done.stderr


def test_time_window_records_the_steps_that_start_inside_it(tmp_path: Path) -> None:
    write(
        tmp_path,
        "timed.py",
        """
        import time
        from opscope.capture.active import step

        for i in range(24):
            time.sleep(0.04)
            step()
        """,
    )
    done = opscope(
        ["--no-report", "--delay", "0.2", "--duration", "0.3", "--out", "runs", "--", "timed.py"],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["capture"]["trigger"] == "time"
    assert run["schedule"]["until_stop"] is True
    assert run["capture"]["first_program_step"] >= 3  # nothing before 0.2 s
    recorded = run["steps"]["run"]
    # about 0.3 s / 0.04 s = 8 steps; wide bounds for a busy machine, well below all 24
    assert 2 <= recorded <= 14
    assert len(step_names(run_dir / "trace.json.gz")) == recorded


@pytest.mark.slow
def test_two_ranks_with_gloo_share_one_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        tmp_path,
        "ddp.py",
        """
        import sys

        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo")
        torch.manual_seed(0)
        model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 1)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(16, 32), torch.randn(16, 1)
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        # one write per line: torchrun runs the ranks unbuffered (-u), where print's text and
        # its newline are two writes that the other rank's line can fall between
        sys.stdout.write(f"rank {dist.get_rank()} done\\n")
        sys.stdout.flush()
        dist.destroy_process_group()
        """,
    )
    done = opscope(
        ["--nproc", "2", "--active", "2", "--out", "runs", "--", "ddp.py"],
        tmp_path,
        timeout=300,  # --nproc puts the rendezvous on 127.0.0.1 and gloo on the loopback
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.split("\n")[:-1]) == ["rank 0 done", "rank 1 done"]
    run_dir = only_run_dir(tmp_path / "runs")
    assert sorted(p.name for p in (run_dir / "traces").iterdir()) == [
        "rank0.json.gz",
        "rank1.json.gz",
    ]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["rank"] == 0 and run["status"] == "ok"
    assert run["distributed"]["world_size"] == 2
    groups = run["distributed"]["torch_distributed"]
    assert groups["backend"] == "gloo" and groups["world_size"] == 2
    check_document(run, "run")
    for rank in (0, 1):
        doc = json.loads((run_dir / "ranks" / f"rank{rank}.json").read_text())
        assert doc["rank"] == rank and doc["status"] == "ok"
        check_document(doc, "run")
        trace = run_dir / "traces" / f"rank{rank}.json.gz"
        assert step_names(trace) == ["ProfilerStep#3", "ProfilerStep#4"]
        assert any(e["name"].startswith("c10d::") for e in events(trace))
    assert "Ops by" in done.stderr  # one report, from the launching process
    data = report_json(run_dir, capsys)
    assert data["source"]["ranks"] == [0, 1]
    check_document(data, "report")


def test_a_program_that_records_nothing_is_no_success(tmp_path: Path) -> None:
    """No step marked: the reason on stderr, exit status 1, and no run folder without a
    trace left behind; the program's own output still reaches the user."""
    script = write(tmp_path, "noop.py", "print('hello from the program')\n")
    out = tmp_path / "runs"
    r = opscope(["--out", str(out), "--", str(script)], cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "hello from the program" in r.stdout
    assert "nothing was recorded" in r.stderr and "no trace was recorded" in r.stderr
    assert not out.exists() or not any(out.iterdir())


def test_the_profilers_start_stop_lines_stay_out_of_stderr(tmp_path: Path) -> None:
    """torch's `USDT: ... profiler_start/stop` lines are dropped; the program's own stderr -
    Python's, a raw write to descriptor 2, a line that merely starts with USDT - all pass."""
    mlp(
        tmp_path,
        after_step=(
            "import os as _os; _os.write(2, b'raw fd2 line\\n'); "
            "print('USDT: the program says this', file=sys.stderr)"
        ),
    )
    done = opscope(["--active", "2", "--out", "runs", "--", "train.py", "4"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "profiler_start" not in done.stderr and "profiler_stop" not in done.stderr
    assert "raw fd2 line" in done.stderr
    assert "USDT: the program says this" in done.stderr
    assert "program stderr line" in done.stderr
