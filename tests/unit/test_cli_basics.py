"""The command line: help, exit codes, one-line errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opscope.cli.main import main


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opscope", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_python(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``code`` run in a fresh interpreter (what it imports is its own)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out and "report" in out


def test_no_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2


def test_unknown_option_is_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "--no-such-option", "x"])
    assert exc.value.code == 2


def test_report_missing_file_is_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "/nonexistent/trace.json"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no such file" in err and "Traceback" not in err


def test_report_not_json_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "trace.json"
    bad.write_text("this is not json at all")
    assert main(["report", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err


def test_report_bad_steps_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = tmp_path / "t.json"
    t.write_text('{"traceEvents": []}')
    assert main(["report", str(t), "--steps", "4:2"]) == 1
    assert "--steps" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["demo", "--device", "warp-drive"], "warp-drive"),
        (["demo", "--shape", "4xabc"], "4xabc"),
        (["demo", "--shape", "4x512:int3"], "int3"),
        (["demo", "--shape", "4000000x4000000:fp32"], "does not fit"),
        (["demo", "--variants", "builtin"], "--variants"),
    ],
)
def test_demo_bad_input_exits_1_with_one_line(args: list[str], needle: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("USDT:")]
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr


def test_demo_unavailable_cuda_exits_1() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    proc = run_cli("demo", "--device", "cuda")
    assert proc.returncode == 1
    assert "not available" in proc.stderr


def test_help_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from opscope.cli.main import build_parser\n"
        "build_parser()\n"
        "assert 'torch' not in sys.modules, 'torch imported by --help'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.fixture
def trace_pair(tmp_path: Path) -> tuple[str, str]:
    import json

    from test_explorer_api import gpu_doc  # same folder (rootdir on sys.path)

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(gpu_doc(steps=2)))
    b.write_text(json.dumps(gpu_doc(steps=3)))
    return str(a), str(b)


def test_compare_is_a_deprecated_alias_of_diff(
    trace_pair: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    assert main(["diff", *trace_pair, "--format", "json"]) == 0
    new = capsys.readouterr()
    assert json.loads(new.out)["schema"] == "opscope.diff/1" and new.err == ""
    assert main(["compare", *trace_pair, "--format", "json"]) == 0
    old = capsys.readouterr()
    assert old.out == new.out
    note = "opscope compare: deprecated, use 'opscope diff' (same arguments)"
    assert old.err.splitlines() == [note]


@pytest.mark.parametrize("command", ["diff", "compare"])
def test_diff_help_has_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "  opscope diff before.json.gz after.json.gz" in out
    if command == "compare":
        assert "former name of 'opscope diff'" in out


def _stepped(tmp_path: Path) -> Path:
    from trace_checks import X

    events = [X("ProfilerStep#3", 0, 100, "user_annotation"), X("aten::mm", 10, 50)]
    events += [X("ProfilerStep#4", 200, 100, "user_annotation"), X("aten::mm", 210, 50)]
    path = tmp_path / "stepped.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_everyday_mistakes_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    path = _stepped(tmp_path)
    assert main(["report", str(path), "--steps", "9"]) == 1
    assert "--steps 9: no such step; the trace has steps 3, 4" in capsys.readouterr().err
    assert main(["report", str(path), "-o", str(tmp_path / "missing" / "r.txt")]) == 1
    err = capsys.readouterr().err
    assert "no folder" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exc:
        main(["report", str(path), "--top", "-3"])
    assert exc.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err
    assert (
        main(
            [
                "report",
                str(path),
                "--steps",
                "4",
                "--format",
                "json",
                "-o",
                str(tmp_path / "r.json"),
            ]
        )
        == 0
    )


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json", "Expecting value"),
        ('["a list"]', "expected {'devices'"),
        ('{"devices": [1, 2]}', "expected {'devices'"),
    ],
)
def test_a_junk_peaks_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, needle: str
) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    peaks = tmp_path / "peaks.json"
    peaks.write_text(content)
    with pytest.raises(SystemExit) as info:
        main(["report", str(trace), "--peaks", str(peaks)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --peaks" in err and needle in err
    with pytest.raises(SystemExit) as info:
        main(["report", str(trace), "--peaks", str(tmp_path / "none.json")])
    assert info.value.code == 2 and "no such file" in capsys.readouterr().err


def test_console_returns_mains_code_and_leaves_the_exit_no_collection_to_do() -> None:
    """The installed command (and ``python -m opscope``) runs ``main`` and gives its exit
    code; the objects alive then are frozen out of the exit's collections.  In a fresh
    interpreter: a caller of ``main`` itself keeps its collector untouched."""
    code = (
        "import gc, sys\n"
        "import opscope.cli.main as m\n"
        "assert gc.get_freeze_count() == 0\n"
        "m.main = lambda argv=None: 7\n"
        "assert m.console() == 7\n"
        "assert gc.get_freeze_count() > 0\n"
        "print('OK')\n"
    )
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "OK"
    # the module form exits with main's code too (a usage error: 2)
    r = run_cli("report", timeout=60)
    assert r.returncode == 2 and "usage" in r.stderr


def test_a_named_command_alone_is_built_and_imported() -> None:
    """``opscope report ...`` builds the report's parser alone (the other commands' modules
    are not imported); a former name builds its command; --help, no command or a misspelt
    one build them all (argparse lists them and suggests)."""
    from opscope.cli.main import COMMANDS, build_parser, named_command

    assert named_command(["report", "x.json", "--format", "json"]) == "report"
    assert named_command(["--debug", "sql", "t.json", "SELECT 1"]) == "sql"
    assert named_command(["compare", "a", "b"]) == "diff"
    assert named_command(["--help"]) is None
    assert named_command(["reprt", "x"]) is None
    assert named_command([]) is None
    _, mods = build_parser("diff")
    assert sorted(mods) == ["compare", "diff"]
    _, mods = build_parser()
    assert set(COMMANDS) <= set(mods)
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules if m.endswith('_cmd'))))\n"
        "from opscope.cli.main import main\n"
        "main(['report', '--no-such-flag'])\n"
    )
    r = run_python(code)
    assert r.stdout.strip() == "['opscope.cli.report_cmd']", r.stdout
