"""The commands that read traces take Arrow's buffers from the C allocator; the commands that
run the user's program, and a user's own choice, are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import sys
from opscope.cli.main import main
code = main(sys.argv[1:])
import os, pyarrow as pa
print(code, os.environ.get("ARROW_DEFAULT_MEMORY_POOL"), pa.default_memory_pool().backend_name)
"""


def run(*args: str, env: dict[str, str] | None = None) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**base, **(env or {})},
    )
    return out.stdout.strip().splitlines()[-1].split()


def test_a_report_uses_the_system_pool(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",'
        ' "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}'
    )
    assert run("report", str(trace), "--format", "json", "-o", str(tmp_path / "o.json")) == [
        "0",
        "system",
        "system",
    ]


def test_the_users_choice_is_kept(tmp_path: Path) -> None:
    code, var, pool = run(
        "report", "/nonexistent.json", env={"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
    )
    assert (code, var, pool) == ("1", "jemalloc", "jemalloc")


def test_a_command_that_runs_the_users_program_is_left_alone() -> None:
    code, var, pool = run("profile", "/nonexistent_script.py")
    assert code != "0"
    assert var == "None" and pool != "system"  # Arrow's own default (mimalloc in its wheels)


class FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


def test_glibc_keeps_the_freed_memory_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    from opscope.cli import main as cli

    fake = FakeLibc()
    monkeypatch.setattr(ctypes, "CDLL", lambda _name: fake)
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "system")
    monkeypatch.delenv("OPSCOPE_MALLOPT", raising=False)
    cli.trace_reader_memory(heap_only=True)
    kept = {-3: 32 << 20, -1: 1 << 30, -2: 64 << 20}
    if sys.platform.startswith("linux"):
        # a whole-trace analysis that ends after its answer: no mmap at all, one arena
        assert dict(fake.calls) == {**kept, -4: 0, -8: 1}
    fake.calls.clear()
    cli.trace_reader_memory()
    if sys.platform.startswith("linux"):
        # the others give their large blocks back when they are freed
        assert dict(fake.calls) == kept
    fake.calls.clear()
    monkeypatch.setenv("OPSCOPE_MALLOPT", "0")
    cli.trace_reader_memory()
    assert fake.calls == []


RECORD = """
import sys
from opscope.cli import main as cli
cli._keep_freed_memory = lambda *, heap_only: print("heap_only", heap_only)
cli.main(sys.argv[1:])
"""


@pytest.mark.parametrize(
    ("argv", "heap_only"),
    [
        (["report", "/nonexistent.json"], True),
        (["diff", "/nonexistent_a.json", "/nonexistent_b.json"], True),
        (["sql", "/nonexistent.json", "select 1"], False),
        (["explore", "/nonexistent.json"], False),
    ],
)
def test_only_a_whole_trace_analysis_that_ends_after_its_answer_keeps_every_block(
    argv: list[str], heap_only: bool
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", RECORD, *argv],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "OPSCOPE_MALLOPT"},
    )
    assert f"heap_only {heap_only}" in out.stdout.splitlines()
