"""benchmarks/memory_parts.py on a small tiled trace: its figures are the process's own.

Bytes are never compared with a bound (they vary with the allocator and the machine): only
that the parts are the analysis's, in order, that the event table it counts is the table a
load of the same file makes, that what it says is live grows where the ingest and the graph
are made, and that the whole report it measures beside them ran.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "memory_parts.py"
SEED = "cuda/sampled_world128/rank0.json.gz"  # 4,811 complete events

pytestmark = [
    pytest.mark.shared,
    pytest.mark.slow,
    pytest.mark.skipif(
        not (ROOT.parent / "shared" / "traces" / SEED).is_file(),
        reason=f"../shared/traces/{SEED} absent",
    ),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status"),
]


def test_parts_and_the_table_they_count(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    cmd = [sys.executable, str(SCRIPT), "--trace", SEED, "--sizes", "20000"]
    cmd += ["--tmp", str(tmp_path / "files"), "--json", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (fig,) = json.loads(out.read_text())
    parts = [r["part"] for r in fig["rows"]]
    assert parts[0] == "start" and parts[1] == "load (ingest)" and parts[-1] == "JSON written"
    assert parts[2:6] == ["pack args", "share codes", "hold links", "derived.ops"]
    assert parts.index("drop derived") < min(i for i, p in enumerate(parts) if p.startswith("rule"))
    assert parts.index("critical path graph") < parts.index("critical path section")
    assert any(p.startswith("rule ") for p in parts)

    from opscope.trace import load

    trace = load(fig["file"], cache=False)
    assert fig["events"] == len(trace) > 15_000
    full = trace.events.nbytes
    trace.compact()  # as the report holds it
    packed = trace.index.packed_args
    assert packed is not None and trace.events.nbytes < full
    assert fig["held"]["table"] == trace.events.nbytes + packed.nbytes
    assert fig["held"]["graph"] > 0 and fig["held"]["index"] > 0
    rows = {r["part"]: r for r in fig["rows"]}
    assert fig["report_peak_rss"] > 20 * 2**20
    for r in fig["rows"]:
        assert r["hwm"] >= r["anon"] > 0
    if "live" in rows["start"]:  # glibc 2.33+
        assert rows["load (ingest)"]["live"] - rows["start"]["live"] > full / 2
        graph_at = parts.index("critical path graph")
        assert fig["rows"][graph_at]["live"] > fig["rows"][graph_at - 1]["live"]
    name = Path(fig["file"]).name
    assert f"{name}: {len(trace):,} events" in done.stdout
    assert "event table" in done.stdout and "goal <= 400" in done.stdout
