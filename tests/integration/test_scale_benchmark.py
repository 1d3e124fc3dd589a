"""benchmarks/scale.py at tiny sizes: every figure it prints is there and sane.

A ~20k-event trace tiled from a shared one (plain and gzipped) and jobs of 2 and 4 tiled
ranks on a LocalCluster of two workers.  Times are never checked (noisy machine): only
that the events the report counts are the events tiled, that the peak RSS figures are
measured and consistent, that each rank count is reported, and that the cluster's report
is the one-process report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "scale.py"
SEED = "cuda/sampled_world128/rank0.json.gz"  # 4,811 complete events

pytestmark = [
    pytest.mark.shared,
    pytest.mark.slow,
    pytest.mark.skipif(
        not (ROOT.parent / "shared" / "traces" / SEED).is_file(),
        reason=f"../shared/traces/{SEED} absent",
    ),
]


def _scale(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPT), "--trace", SEED, "--tmp", str(tmp / "files"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("scale")
    out = tmp / "figures.json"
    done = _scale("--events", "20000", "--gzip", "--ranks", "2,4", "--json", str(out), tmp=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, json.loads(out.read_text())


def test_events_counted_are_the_events_tiled(run: tuple[str, dict[str, Any]]) -> None:
    text, doc = run
    files = doc["events"]["files"]
    assert [f["format"] for f in files] == ["json", "gzip"]
    for f in files:
        assert 15_000 <= f["events"] <= 25_000  # about --events: whole copies of the seed
        # the seed's complete events times its copies: every one is a row of the event table
        assert f["reported_events"] == f["events"]
        assert f["rss_mib"] > 20 and f["wall_s"] > 0
        assert f["bytes_per_event"] == pytest.approx(f["rss_mib"] * 2**20 / f["reported_events"])
        assert f["us_per_event"] == pytest.approx(f["wall_s"] * 1e6 / f["reported_events"])
        assert Path(f["path"]).name in text
    plain, gz = files
    assert gz["reported_events"] == plain["reported_events"]
    assert gz["json_bytes"] == plain["json_bytes"] > gz["file_bytes"] > 0  # the same JSON
    assert Path(gz["path"]).suffix == ".gz"
    assert doc["events"]["json_bytes_per_event"] == plain["bytes_per_event"]
    for fmt in ("json", "gzip"):
        assert f"{fmt}: peak RSS at {plain['reported_events']:,} events:" in text
    assert ("goal met" in text) or ("goal missed" in text)


def test_ranks_reported_and_the_cluster_report_is_the_one_process_one(
    run: tuple[str, dict[str, Any]],
) -> None:
    text, doc = run
    ranks = doc["ranks"]
    rows = [(r["ranks"], r["path"]) for r in ranks["rows"]]
    assert rows == [(2, "one process"), (2, "cluster"), (4, "cluster")]
    for r in ranks["rows"]:
        assert r["reported_ranks"] == r["ranks"]
        assert r["coordinator_rss_mib"] > 20 and r["wall_s"] > 0
        assert r["s_per_rank"] == pytest.approx(r["wall_s"] / r["ranks"])
    one, two, four = ranks["rows"]
    assert one["events"] == two["events"] and four["events"] == 2 * two["events"]
    assert two["worker_rss_mib"] > 20  # the LocalCluster's workers were measured
    assert ranks["s_per_rank_ratio"] == pytest.approx(four["s_per_rank"] / two["s_per_rank"])
    assert ranks["same_report"] is True and ranks["difference"] is None
    assert "(source.engine dropped): same report" in text


def test_bad_sizes_and_a_missing_trace_are_one_line_errors(tmp_path: Path) -> None:
    bad = _scale("--events", "1e6", "--ranks", "", tmp=tmp_path)
    assert bad.returncode == 2 and "--events '1e6': expected comma-separated" in bad.stderr
    gone = subprocess.run(
        [sys.executable, str(SCRIPT), "--trace", "no/such.json.gz", "--ranks", ""],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert gone.returncode == 1
    assert gone.stderr.strip().endswith("no/such.json.gz: not there (the shared traces are needed)")


def test_the_explorer_part_says_when_there_is_no_browser(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import explorer
    import scale

    monkeypatch.setattr(explorer, "CHROMIUM", "/nonexistent/chromium")
    files = [{"format": "json", "events": 10, "reported_events": 10, "path": "x.json"}]
    got = scale.explorer_part(files)
    assert got == {"events": 10, "error": "no Chromium at /nonexistent/chromium"}
    assert "explorer: not measured, no Chromium at /nonexistent/chromium" in capsys.readouterr().out
