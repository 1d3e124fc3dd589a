"""benchmarks/fresh_memory.py: what the machine charges for memory touched the first time.

Times are never compared with a bound (they are the machine's); only that each run fills the
memory it says (with 4 KiB pages, one fault per page at least), that cold and warm runs are
both there, and that a size it cannot measure is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "fresh_memory.py"

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="page faults from getrusage on Linux"
)


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def test_each_size_is_filled_cold_and_warm(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    done = _run(tmp_path, "--gb", "0.05", "0.1", "--pause", "0", "--no-huge", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [r["gb"] for r in rows] == [0.05, 0.1]
    for r in rows:
        pages = r["gb"] * 2**30 / 4096
        for state in ("cold", "warm"):
            run = r[state]
            assert run["huge"] is False
            assert run["faults"] >= 0.95 * pages  # every 4 KiB page touched
            assert run["s_per_gb"] == pytest.approx(run["wall_s"] / r["gb"])
    assert "cold over warm" in done.stdout


def test_a_size_it_cannot_measure_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, "--gb", "0", "--pause", "0")
    assert done.returncode == 2 and "no size to measure" in done.stderr
