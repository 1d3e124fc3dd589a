"""A real DataLoader with two worker processes, each profiled by
``opscope.capture.profile_loader_workers``: the report reads their traces from
``loader_traces/`` beside the main trace and breaks the path's data_loading down by them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

# real jobs whose findings rest on the relative times of their work: run alone (Makefile)
pytestmark = pytest.mark.timing

pytest.importorskip("torch")

#: each item sleeps this long in the worker, inside record_function("decode")
DECODE_S = 0.015

#: the scripts' dataset: ``{items}`` items, each decoded (slept) in a worker
IMAGES = textwrap.dedent(
    f"""
    class Images(torch.utils.data.Dataset):
        def __len__(self):
            return {{items}}
        def __getitem__(self, i):
            with record_function("decode"):
                time.sleep({DECODE_S})
            return torch.randn(64).sin()
    """
)

SCRIPT = (
    textwrap.dedent(
        """
    import sys, time
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule
    from opscope.capture import profile_loader_workers
    """
    )
    + IMAGES.replace("{items}", "64")
    + textwrap.dedent(
        """
    out = sys.argv[1]
    torch.set_num_threads(1)
    loader = torch.utils.data.DataLoader(Images(), batch_size=2, num_workers=2)
    profile_loader_workers(loader, out + "/loader_traces")
    model = torch.nn.Linear(64, 64)
    sched = schedule(wait=1, warmup=1, active=4, repeat=1)
    def ready(p):
        p.export_chrome_trace(out + "/trace.json")
    with profile(
        activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=ready
    ) as prof:
        for i, x in enumerate(loader):
            model(x).sum().backward()
            prof.step()
            if i == 7:
                break
    del loader  # the workers leave their loop and write their traces
    """
    )
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("loader")
    script = out / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(out)}
    subprocess.run(
        [sys.executable, str(script), str(out)],
        check=True,
        timeout=180,
        env=env,
        capture_output=True,
    )
    return out


def _report(*args: str) -> tuple[int, dict[str, Any] | None, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "opscope", "report", *args, "--format", "json", "--no-cache"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    data = json.loads(proc.stdout) if proc.returncode == 0 else None
    return proc.returncode, data, proc.stderr


def test_the_workers_traces_are_written(run_dir: Path) -> None:
    files = sorted((run_dir / "loader_traces").glob("loader_worker*.pt.trace.json"))
    assert [f.name.split(".")[0] for f in files] == ["loader_worker0", "loader_worker1"]


def test_data_loading_on_the_path_is_the_workers_decode(run_dir: Path) -> None:
    rc, data, err = _report(str(run_dir / "trace.json"))
    assert rc == 0, err
    assert data is not None
    cp = data["critical_path"]
    loading = cp["data_loading"]
    # a breakdown of the label the path has: the same total, every microsecond once
    assert loading["on_path_us"] == pytest.approx(cp["bound_by_us"]["data_loading"], abs=0.01)
    assert loading["on_path_us"] > 0
    shared = sum(w["on_path_us"] for w in loading["workers"])
    assert shared == pytest.approx(loading["in_workers_us"], abs=0.01)
    assert loading["in_workers_us"] + loading["not_in_workers_us"] == pytest.approx(
        loading["on_path_us"], abs=0.01
    )
    assert len(loading["workers"]) == 2
    # the workers sleep in decode: most of the wait on the main thread is theirs
    assert loading["top"][0]["name"] == "decode"
    assert loading["top"][0]["share"] >= 0.6
    assert any("loader workers' traces: decode" in n for n in cp["notes"])


def test_the_path_itself_does_not_change(run_dir: Path) -> None:
    trace = str(run_dir / "trace.json")
    _, with_workers, _ = _report(trace)
    rc, without, err = _report(trace, "--no-loader-traces")
    assert rc == 0, err
    assert with_workers is not None and without is not None
    assert "data_loading" not in without["critical_path"]
    for key in ("length_us", "bound_by_us", "steps"):
        assert with_workers["critical_path"][key] == without["critical_path"][key]
    assert with_workers["findings"] == without["findings"]


def test_explicit_globs_and_refusals(run_dir: Path) -> None:
    trace = str(run_dir / "trace.json")
    rc, data, err = _report(trace, "--loader-traces", str(run_dir / "loader_traces" / "*.json"))
    assert rc == 0, err
    assert data is not None and len(data["critical_path"]["data_loading"]["workers"]) == 2
    # the main trace (it has steps) is not a worker's
    rc, _, err = _report(trace, "--loader-traces", trace)
    assert rc == 1 and "main trace itself" in err
    other = run_dir / "copy_of_main.json"
    other.write_text((run_dir / "trace.json").read_text())
    rc, _, err = _report(trace, "--loader-traces", str(other))
    assert rc == 1 and "training steps" in err
    rc, _, err = _report(trace, "--loader-traces", str(run_dir / "nothing*.json"))
    assert rc == 1 and "no file matches" in err
    rc, _, err = _report(trace, "--loader-traces", "x.json", "--no-loader-traces")
    assert rc == 2


def test_a_job_refuses_loader_traces(tmp_path: Path) -> None:
    import opscope
    from opscope.errors import OpscopeError

    shared = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "cuda"
    job = shared / "sampled_world128"
    if not job.is_dir():
        pytest.skip(f"{job}: the shared traces are absent")
    work = tmp_path / "w.json"
    work.write_text('{"traceEvents": []}')
    with pytest.raises(OpscopeError, match="not a job"):
        opscope.analyze(str(job), loader_traces=[str(work)], cache=False)


def test_mcp_critical_path_shows_the_breakdown(run_dir: Path) -> None:
    pytest.importorskip("mcp")
    import jsonschema
    from mcp import Client

    from mcp_threads import run_apart
    from opscope.mcp.server import build_server

    async def main() -> None:
        async with Client(build_server()) as client:
            schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
            r = await client.call_tool("open_trace", {"path": str(run_dir / "trace.json")})
            assert not r.is_error, r.content[0].text
            r = await client.call_tool("critical_path", {"limit": 20})
            assert not r.is_error, r.content[0].text
            jsonschema.Draft202012Validator(schemas["critical_path"]).validate(r.structured_content)
            loading = r.structured_content["critical_path"]["data_loading"]
            assert loading["top"][0]["name"] == "decode"
            assert "loader workers' traces: decode" in r.content[0].text

    run_apart(main, timeout_s=300)


PROFILED = (
    textwrap.dedent(
        """
    import time
    import torch
    from torch.profiler import record_function
    """
    )
    + IMAGES.replace("{items}", "24")
    + textwrap.dedent(
        """
    torch.set_num_threads(1)
    workers = {workers}
    loader = torch.utils.data.DataLoader(Images(), batch_size=2, num_workers=workers)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x in loader:  # one epoch: the workers leave their loop at its end
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    """
    )
)


def _profile(tmp_path: Path, workers: int) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "train.py"
    script.write_text(PROFILED.replace("{workers}", str(workers)))
    out = tmp_path / "runs"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "opscope",
            "profile",
            "--loader-workers",
            "--no-report",
            "--out",
            str(out),
            "--",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)},
    )
    return proc, out


def test_opscope_profile_loader_workers_records_them_where_the_report_reads(
    tmp_path: Path,
) -> None:
    proc, out = _profile(tmp_path, workers=2)
    assert proc.returncode == 0, proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    files = sorted((run / "loader_traces").glob("loader_worker*.pt.trace.json"))
    assert [f.name.split(".")[0] for f in files] == ["loader_worker0", "loader_worker1"]
    assert "--loader-workers: 2 loader worker trace(s) in" in proc.stderr
    assert not list(tmp_path.glob("opscope-loader-*")), "the staging folder is left behind"
    rc, data, err = _report(str(run))
    assert rc == 0, err
    assert data is not None
    loading = data["critical_path"]["data_loading"]
    assert len(loading["workers"]) == 2
    assert loading["in_workers_us"] > 0
    assert loading["top"][0]["name"] == "decode"


def test_opscope_profile_loader_workers_says_when_there_are_none(tmp_path: Path) -> None:
    proc, out = _profile(tmp_path, workers=0)
    assert proc.returncode == 0, proc.stderr
    assert "--loader-workers: no DataLoader with num_workers > 0 was iterated" in proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    assert not (run / "loader_traces").exists()


def test_the_loader_folder_is_the_one_the_report_reads() -> None:
    from opscope.capture import loader_workers
    from opscope.trace.loader_work import LOADER_FOLDER

    assert loader_workers.LOADER_FOLDER == LOADER_FOLDER


def test_the_patch_wraps_each_loader_once_and_goes_away(tmp_path: Path) -> None:
    import torch
    from torch.utils.data import DataLoader

    from opscope.capture.loader_workers import LoaderWorkerPatch, _ProfiledWorker

    original = DataLoader.__iter__
    patch = LoaderWorkerPatch(tmp_path / "staging")
    patch.install()
    try:
        assert DataLoader.__iter__ is not original
        data = torch.arange(4.0)
        plain = DataLoader(data, batch_size=2)
        assert [b.tolist() for b in plain] == [[0.0, 1.0], [2.0, 3.0]]
        assert plain.worker_init_fn is None and patch.loaders == 0
        loader = DataLoader(data, batch_size=2, num_workers=1)
        for _ in range(2):  # a second epoch: wrapped once, the user's batches unchanged
            assert [b.tolist() for b in loader] == [[0.0, 1.0], [2.0, 3.0]]
        assert isinstance(loader.worker_init_fn, _ProfiledWorker)
        assert loader.worker_init_fn.inner is None
        assert patch.loaders == 1
    finally:
        patch.uninstall()
    assert DataLoader.__iter__ is original
    names = sorted(f.name.split(".")[0] for f in patch.traces())
    assert names == ["loader_worker0", "loader_worker0"]  # one worker, one per epoch
