"""The critical path on real runs of this CPU: a gloo job with one slow rank (the job path must
run through the slow rank's delay, not through the others' waits) and a training loop whose
data loader does the heavy work.  Times are checked loosely: two cores run everything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distjobs import run_gloo_job
from opscope.analysis.pipeline import analyze

# real jobs whose findings rest on the relative times of their work: run alone (Makefile)
pytestmark = pytest.mark.timing

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

WORLD = 2
SLOW = 1
DELAY_S = 0.05
ACTIVE = 2
CONTRACT = {"scope", "length_us", "bound_by_us", "steps", "segments"}
SEGMENT = {"rank", "label", "name", "event_id", "start_ns", "dur_us"}
STEP = {"step", "rank", "length_us", "bound_by_us"}


@pytest.fixture(scope="module")
def slow_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("no gloo backend")
    folder = tmp_path_factory.mktemp("gloo-cp")
    run_gloo_job(folder, WORLD, active=ACTIVE, slow_rank=SLOW, delay_s=DELAY_S)
    return folder


@pytest.fixture(scope="module")
def job_doc(slow_job: Path) -> dict[str, Any]:
    return analyze(slow_job).to_dict()


@pytest.mark.slow
def test_the_job_path_runs_through_the_slow_rank(job_doc: dict[str, Any]) -> None:
    cp = job_doc["critical_path"]
    assert set(cp) >= CONTRACT and cp["scope"] == "job"
    for s in cp["segments"]:
        assert set(s) >= SEGMENT
    for s in cp["steps"]:
        assert set(s) >= STEP
    # the slow rank holds most of the path, and its delay (untraced sleep) is on it
    by_rank = cp["by_rank_us"]
    assert by_rank[str(SLOW)] > by_rank[str(1 - SLOW)]
    delay_us = DELAY_S * 1e6
    on_slow_untraced = sum(
        s["dur_us"] for s in cp["segments"] if s["rank"] == SLOW and s["event_id"] is None
    )
    assert on_slow_untraced >= 0.8 * ACTIVE * delay_us
    # nobody's wait is on the job path; the path jumps from the slow rank at its collectives
    assert cp["bound_by_us"]["wait_for_peer"] == 0.0
    assert any(j["from_rank"] == SLOW and j["last_rank"] == SLOW for j in cp["jumps"])
    # the job path is about as long as the job's window, never longer
    assert cp["length_us"] <= cp["wall_us"] * 1.001
    assert cp["length_us"] >= 0.8 * cp["wall_us"]


@pytest.mark.slow
def test_the_fast_rank_path_shows_its_wait_for_the_peer(job_doc: dict[str, Any]) -> None:
    fast = next(r for r in job_doc["ranks"] if r["rank"] == 1 - SLOW)
    slow = next(r for r in job_doc["ranks"] if r["rank"] == SLOW)
    wait_fast = fast["critical_path"]["bound_by_us"]["wait_for_peer"]
    wait_slow = slow["critical_path"]["bound_by_us"]["wait_for_peer"]
    assert wait_fast >= 0.8 * ACTIVE * DELAY_S * 1e6
    assert wait_slow < 0.2 * wait_fast


@pytest.mark.slow
def test_report_cli_critical_path_and_what_if(slow_job: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "opscope",
            "report",
            str(slow_job),
            "--critical-path",
            "--what-if",
            "gpu_comm=0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "job critical path" in out
    assert "Where the job path crosses ranks" in out
    assert "what-if gpu_comm ×0" in out
    bad = subprocess.run(
        [sys.executable, "-m", "opscope", "report", str(slow_job), "--what-if", "nonsense"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert bad.returncode != 0
    assert "NAME=FACTOR" in bad.stderr and "Traceback" not in bad.stderr


def test_a_slow_data_loader_bounds_the_steps(tmp_path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule
    from torch.utils.data import DataLoader, Dataset

    torch.set_num_threads(1)

    class Slow(Dataset[Any]):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> Any:
            x = torch.randn(256, 256)
            for _ in range(4):  # heavy work inside the loader, traced as ops
                x = torch.tanh(x @ x) / 16
            return x[0]

    model = torch.nn.Linear(256, 16)
    loader = DataLoader(Slow(), batch_size=4, num_workers=0)
    path = tmp_path / "loader.json"
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for i, batch in enumerate(loader):
            model(batch).sum().backward()
            prof.step()
            if i >= 4:
                break
    cp = analyze(path).to_dict()["critical_path"]
    b = cp["bound_by_us"]
    assert b["data_loading"] > 0.5 * cp["length_us"], b
    assert b["data_loading"] > b["cpu"]
    assert len(cp["steps"]) == 3
    json.dumps(cp)  # JSON-ready


@pytest.mark.slow
def test_job_what_if_removes_the_slow_ranks_delay(slow_job: Path) -> None:
    from opscope.service import Workspace

    ws = Workspace()
    ws.open(slow_job)
    answer = ws.what_if("untraced=0")
    assert answer["scope"] == "job"
    # the slow rank's delay (a sleep no event records) is untraced host time on the job path:
    # without it the delay is gone
    assert answer["saved_us"] >= 0.8 * ACTIVE * DELAY_S * 1e6
    assert answer["projected_us"] < answer["length_us"]
    assert {r["rank"] for r in answer["ranks"]} == {0, 1}
    # the projected path's time per rank is its projected weight (it was the weights before
    # the change: their sum exceeded the projected length)
    assert sum(answer["by_rank_us"].values()) == pytest.approx(answer["projected_us"], abs=0.01)


@pytest.mark.slow
def test_the_job_segments_json_is_the_plain_list(slow_job: Path) -> None:
    import orjson

    from opscope.render import json_render

    rep = analyze(slow_job)
    lazy = rep.to_dict(lazy=True)["critical_path"]
    plain = rep.to_dict()["critical_path"]
    assert len(lazy["segments"]) == len(plain["segments"]) > 0
    out = orjson.loads(json_render.render_json_bytes(rep.to_dict(lazy=True)))["critical_path"]
    assert out["segments"] == plain["segments"]
    assert out["top"] == plain["top"]
    pos = np.asarray([len(plain["segments"]) - 1, 0])
    assert lazy["segments"].take(pos) == [plain["segments"][-1], plain["segments"][0]]


def test_the_host_chains_c_pass_and_numpy_agree_on_the_gloo_job(
    slow_job: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Here the threads wait for gloo's collectives: the resumed-edge rule is reached."""
    from opscope.analysis.collectives import collective_records
    from opscope.analysis.critical import host
    from opscope.analysis.critical.model import RESUME
    from opscope.analysis.critical.section import rank_graph
    from opscope.analysis.rank_split import rank_traces
    from opscope.trace import load

    if host._native is None:
        pytest.skip("built without a C compiler")
    graphs = {}
    for use_native in (True, False):
        monkeypatch.setattr(host, "_use_native", use_native)
        for t in rank_traces(load(slow_job, cache=False)):  # fresh: graphs are kept per index
            g = rank_graph(t, None, collective_records(t))
            graphs[use_native, int(t.meta.ranks[0])] = g
    resumed = 0
    for rank in range(WORLD):
        a, b = graphs[True, rank], graphs[False, rank]
        for f in ("src", "dst", "weight", "label", "edge_row", "kind"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), (rank, f)
        resumed += int((a.kind == RESUME).sum())
    assert resumed > 0
