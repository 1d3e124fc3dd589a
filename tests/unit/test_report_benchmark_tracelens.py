"""benchmarks/report.py's TraceLens side: a perf-report process run as TraceLens's command
line is (``-m MODULE --profile_json_path FILE --output_csvs_dir DIR``), its time and peak RSS
kept, and a run that fails or writes no CSV named as such (a stand-in module plays
TraceLens: the real one is not on PyPI)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE = """
import argparse, pathlib, sys
ap = argparse.ArgumentParser()
ap.add_argument("--profile_json_path", required=True)
ap.add_argument("--output_csvs_dir", required=True)
a = ap.parse_args()
mode = pathlib.Path(a.profile_json_path).read_text()
if mode == "fail":
    sys.exit("TraceLens broke")
out = pathlib.Path(a.output_csvs_dir)
out.mkdir(parents=True)
if mode != "nothing":
    (out / "ops_summary.csv").write_text("name,count\\n")
"""


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    pkg = tmp_path / "fake" / "FakeLens"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "report.py").write_text(FAKE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    spec = importlib.util.spec_from_file_location("report_bench", ROOT / "benchmarks" / "report.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _trace(tmp_path: Path, mode: str) -> Path:
    p = tmp_path / f"{mode}.json"
    p.write_text(mode)
    return p


def test_a_perf_report_is_timed_as_a_whole_process(bench: ModuleType, tmp_path: Path) -> None:
    got = bench.tracelens_process(
        _trace(tmp_path, "ok"), sys.executable, "FakeLens.report", 2, tmp_path
    )
    assert set(got) == {"tl_s", "tl_rss_mb"}, got
    assert got["tl_s"] > 0 and got["tl_rss_mb"] > 1
    assert (tmp_path / "tracelens1" / "ops_summary.csv").is_file()  # each run its own folder


@pytest.mark.parametrize(
    ("mode", "said"), [("fail", "TraceLens broke"), ("nothing", "wrote no CSV")]
)
def test_a_failed_or_empty_report_is_named(
    bench: ModuleType, tmp_path: Path, mode: str, said: str
) -> None:
    got = bench.tracelens_process(
        _trace(tmp_path, mode), sys.executable, "FakeLens.report", 2, tmp_path
    )
    assert "tl_s" not in got
    assert said in got["tl_error"], got
