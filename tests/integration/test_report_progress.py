"""`opscope report` shows its stages (reading, linking, analysing) on a terminal's stderr,
and nothing where stderr is not a terminal or the format is JSON."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a Linux pty")

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _trace(path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"aten::op{i % 5}",
            "pid": 1,
            "tid": 1,
            "ts": 10 * i,
            "dur": 5,
        }
        for i in range(3000)
    ]
    path.write_text(json.dumps({"traceEvents": events}))


def _report(tmp_path: Path, *extra: str, tty: bool) -> str:
    trace = tmp_path / "t.json"
    _trace(trace)
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", "OPSCOPE_CACHE_DIR": str(tmp_path)}
    env.pop("NO_COLOR", None)
    cmd = [sys.executable, "-m", "opscope", "report", str(trace), *extra]
    if not tty:
        done = subprocess.run(cmd, capture_output=True, timeout=120, env=env, check=True)
        return done.stderr.decode()
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return ANSI.sub(b"", out).decode(errors="replace")


def test_a_terminal_sees_the_stages(tmp_path: Path) -> None:
    err = _report(tmp_path, "-o", str(tmp_path / "r.txt"), tty=True)
    assert "reading t.json" in err
    assert "analysing 3,000 events" in err
    assert (tmp_path / "r.txt").stat().st_size > 0


def test_json_and_a_pipe_see_none(tmp_path: Path) -> None:
    err = _report(tmp_path, "--format", "json", "-o", str(tmp_path / "r.json"), tty=True)
    assert "reading" not in err and "analysing" not in err
    err = _report(tmp_path, "-o", str(tmp_path / "r.txt"), "--no-cache", tty=False)
    assert "reading" not in err and "analysing" not in err
