"""The cluster path (opscope.analysis.cluster) on a LocalCluster of two worker processes: the
same report as the local path, a corrupt rank named, a worker killed mid-run."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import opscope
from clusterjobs import kill_once
from distjobs import write_nccl_job
from opscope.analysis.cluster import ClusterError, analyze_on_cluster
from opscope.analysis.cluster import Options as ClusterOptions
from opscope.analysis.critical.path import plain
from opscope.analysis.report import Report
from opscope.documents import Report as ReportDoc
from schema_checks import undeclared

distributed = pytest.importorskip("distributed")

TIMEOUT_S = 120


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    local = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        memory_limit="1GiB",
        dashboard_address=None,
    )
    try:
        yield local
    finally:
        local.close()


@pytest.fixture(autouse=True)
def deadline() -> Iterator[None]:
    """Each test fails, rather than hangs, past TIMEOUT_S."""

    def expire(_sig: int, _frame: Any) -> None:
        raise TimeoutError(f"test ran past {TIMEOUT_S} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _without_paths(section: Any) -> Any:
    return {k: v for k, v in (section or {}).items() if k != "segments"}


def assert_same(local: Report, remote: Report, workers: int = 2) -> None:
    """The whole documents equal but for what docs/scale.md says differs, ``source.engine``:
    the job's critical path (its pieces included), the job findings' savings and ranking,
    and the ranks' own paths equal."""
    a, b = local.to_dict(), remote.to_dict()
    engine = b["source"].pop("engine")
    assert engine == {"name": "dask", "workers": workers, "scheduler": engine["scheduler"]}
    job_a, job_b = plain(a.pop("critical_path")), plain(b.pop("critical_path"))
    assert job_a["scope"] == "job" and job_a["length_us"] is not None
    assert job_a == job_b
    assert a == b
    assert [r.rank for r in local.ranks] == [r.rank for r in remote.ranks]
    for x, y in zip(local.ranks, remote.ranks, strict=True):
        assert _without_paths(x.extra.get("critical_path")) == _without_paths(
            y.extra.get("critical_path")
        ), x.rank
        assert x.collectives == y.collectives
    assert not undeclared(remote.to_dict(), ReportDoc)


def test_synthetic_nccl_job_same_report(cluster: Any, tmp_path: Path) -> None:
    # each step ends in a sync on the device, so the late arrival is on the job path
    write_nccl_job(tmp_path, 3, late_rank=1, late_us=200.0, sync=True, comm_stream=8)
    local = opscope.analyze(tmp_path)
    remote = opscope.analyze(tmp_path, cluster=cluster.scheduler_address)
    assert_same(local, remote)
    assert remote.to_dict()["distributed"]["stragglers"][0]["rank"] == 1
    [straggler] = [f for f in remote.findings if f["kind"] == "straggler"]
    assert straggler["step_savings_us"] == 200.0  # its lateness, measured on the job path


def test_steps_and_a_glob_same_report(cluster: Any, tmp_path: Path) -> None:
    write_nccl_job(tmp_path, 2)
    local = opscope.analyze(tmp_path, (1, 1))
    remote = opscope.analyze(str(tmp_path / "*.json"), (1, 1), cluster=cluster.scheduler_address)
    assert_same(local, remote)


@pytest.mark.parametrize(
    ("spec", "steps"),
    [("gpu_comm=0", None), ("untraced=0,gpu_comm=0.5", None), ("nccl:all_reduce=0.5", (1, 1))],
)
def test_what_if_on_a_cluster_is_the_local_answer(
    cluster: Any, tmp_path: Path, spec: str, steps: tuple[int, int] | None
) -> None:
    from opscope.service import Workspace

    write_nccl_job(tmp_path, 3, late_rank=1, late_us=200.0, sync=True, comm_stream=8)
    ws = Workspace()
    ws.open(tmp_path, steps=steps)
    local = ws.what_if(spec)
    remote = opscope.analyze(tmp_path, steps, cluster=cluster.scheduler_address, what_if=spec)
    doc = remote.to_dict()
    assert doc["what_if"] == local  # the job path's projection and every rank's own
    assert local["scope"] == "job" and [r["rank"] for r in local["ranks"]] == [0, 1, 2]
    assert local["saved_us"] > 0 and local["projected_us"] < local["length_us"]
    # the API's local path answers the same, and the rest of the report is the plain one
    here = opscope.analyze(tmp_path, steps, what_if=spec)
    assert here.to_dict()["what_if"] == local
    plain_remote = opscope.analyze(tmp_path, steps, cluster=cluster.scheduler_address)
    doc.pop("what_if")
    assert doc == plain_remote.to_dict()
    assert not undeclared(remote.to_dict(), ReportDoc)


def test_what_if_errors_on_a_cluster_are_the_local_ones(cluster: Any, tmp_path: Path) -> None:
    write_nccl_job(tmp_path, 2)
    for spec, says in (
        ("aten::nope=0.5", "no event named 'aten::nope'"),  # found on the workers
        ("nonsense", "expected NAME=FACTOR"),  # before any work
        ("gpu_comm=-1", "is not a time scale"),
    ):
        here = _cli("report", str(tmp_path), "--what-if", spec, "--format", "json")
        there = _cli(
            "report", str(tmp_path), "--what-if", spec, "--format", "json",
            "--cluster", cluster.scheduler_address,
        )  # fmt: skip
        assert here.returncode == there.returncode == 1, (spec, there.stderr)
        assert says in there.stderr and "Traceback" not in there.stderr, there.stderr
        assert there.stderr.strip() == here.stderr.strip()


def test_cli_what_if_on_a_cluster(cluster: Any, tmp_path: Path) -> None:
    write_nccl_job(tmp_path, 2, late_rank=1, late_us=200.0, sync=True)
    here = _cli("report", str(tmp_path), "--what-if", "gpu_comm=0", "--format", "json")
    there = _cli(
        "report", str(tmp_path), "--what-if", "gpu_comm=0", "--format", "json",
        "--cluster", cluster.scheduler_address,
    )  # fmt: skip
    assert here.returncode == there.returncode == 0, there.stderr
    assert json.loads(there.stdout)["what_if"] == json.loads(here.stdout)["what_if"]
    text = _cli(
        "report", str(tmp_path), "--what-if", "gpu_comm=0", "--cluster", cluster.scheduler_address
    )
    assert text.returncode == 0, text.stderr
    assert "what-if gpu_comm ×0" in text.stdout and "(job path)" in text.stdout


@pytest.mark.shared
def test_shared_multi_rank_folder_same_report(cluster: Any, shared: Any) -> None:
    job = shared("cuda/sampled_world128")
    local = opscope.analyze(job)
    remote = opscope.analyze(job, cluster=cluster.scheduler_address)
    assert_same(local, remote)
    # a what-if on a real job: the cluster's answer is the local one
    spec = "untraced=0,gpu_comm=0.5"
    here = opscope.analyze(job, what_if=spec).to_dict()["what_if"]
    there = opscope.analyze(job, cluster=cluster.scheduler_address, what_if=spec)
    assert there.to_dict()["what_if"] == here
    assert here["scope"] == "job" and here["saved_us"] > 0


@pytest.mark.slow
def test_gloo_job_same_report(cluster: Any, tmp_path: Path) -> None:
    torch_dist = pytest.importorskip("torch.distributed")
    if not (torch_dist.is_available() and torch_dist.is_gloo_available()):
        pytest.skip("no gloo backend")
    from distjobs import run_gloo_job

    run_gloo_job(tmp_path, 2, active=2, slow_rank=1, delay_s=0.05)
    local = opscope.analyze(tmp_path)  # first: the CPU's peaks are measured once and cached
    remote = opscope.analyze(tmp_path, cluster=cluster.scheduler_address)
    assert_same(local, remote)


def test_corrupt_rank_named_and_the_job_goes_on(cluster: Any, tmp_path: Path) -> None:
    paths = write_nccl_job(tmp_path, 3)
    paths[1].write_bytes(b"\x1f\x8b not really gzip")
    local = opscope.analyze(tmp_path)
    remote = opscope.analyze(tmp_path, cluster=cluster.scheduler_address)
    assert_same(local, remote)
    doc = remote.to_dict()
    assert doc["source"]["ranks"] == [0, 2]
    assert doc["distributed"]["missing_ranks"] == [1]
    assert [u["rank"] for u in doc["source"]["unreadable"]] == [1]
    assert any("rank 1 left out" in w for w in doc["source"]["warnings"])


def test_every_rank_corrupt_is_one_error(cluster: Any, tmp_path: Path) -> None:
    for p in write_nccl_job(tmp_path, 2):
        p.write_text("not json")
    with pytest.raises(opscope.errors.TraceError, match="none of its 2 trace files"):
        opscope.analyze(tmp_path, cluster=cluster.scheduler_address)


def test_a_worker_killed_mid_run_is_retried(cluster: Any, tmp_path: Path) -> None:
    job = tmp_path / "job"
    write_nccl_job(job, 3, late_rank=2, late_us=150.0)
    marker = tmp_path / "killed"
    task = functools.partial(kill_once, rank=1, marker=str(marker))
    remote = analyze_on_cluster(job, cluster.scheduler_address, ClusterOptions(), rank_task=task)
    assert marker.exists()  # a worker did die on rank 1
    assert_same(opscope.analyze(job), remote)
    with distributed.Client(cluster.scheduler_address, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)  # the nanny restarted it: the next tests have 2


def test_the_only_worker_dies_holding_the_jobs_meta_and_the_run_goes_on(tmp_path: Path) -> None:
    """The rank tasks share the job's meta, held on a worker: when that worker dies (here the
    only one, its nanny starting it again) the meta is made again from its task and every
    rank runs; scattered data would have been lost and every rank task cancelled."""
    job = tmp_path / "job"
    write_nccl_job(job, 3, late_rank=2, late_us=150.0)
    marker = tmp_path / "killed"
    task = functools.partial(kill_once, rank=1, marker=str(marker))
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        memory_limit="1GiB",
        dashboard_address=None,
    ) as one:
        remote = analyze_on_cluster(job, one.scheduler_address, ClusterOptions(), rank_task=task)
    assert marker.exists()  # the worker did die, with the meta
    assert_same(opscope.analyze(job), remote, workers=1)


def test_a_cancelled_rank_task_is_a_cluster_error_naming_it(cluster: Any) -> None:
    import time

    from opscope.analysis.cluster.coordinator import _each

    with distributed.Client(cluster.scheduler_address, timeout=30) as client:
        fut = client.submit(time.sleep, 30, pure=False)
        fut.cancel()
        with pytest.raises(ClusterError, match=r"cancelled task 1 of 1 \(analyse\)"):
            list(_each([fut], "analyse", None))


def test_store_writes_each_rank_as_parquet(cluster: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    write_nccl_job(tmp_path / "job", 2)
    store = tmp_path / "store"
    local = opscope.load(tmp_path / "job")
    opscope.analyze(tmp_path / "job", cluster=cluster.scheduler_address, store=store)
    tables = [pq.read_table(store / f"rank{r}.parquet") for r in (0, 1)]
    assert sum(t.num_rows for t in tables) == len(local)
    ids = sorted(i for t in tables for i in t.column("id").to_pylist())
    assert ids == sorted(local.events.column("id").to_pylist())  # the job's ids, not each file's
    assert [set(t.column("rank").to_pylist()) for t in tables] == [{0}, {1}]
    # the store reads back as the job's table, ids as written, and opscope sql queries it
    back = opscope.load(store)
    assert back.meta.format == "event_store" and back.meta.ranks == [0, 1]
    assert back.column("id") == local.column("id") and back.column("rank") == local.column("rank")
    out = subprocess.run(
        [sys.executable, "-m", "opscope", "sql", str(store),
         "SELECT rank, count(*) AS n FROM events GROUP BY 1 ORDER BY 1", "--format", "json"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert json.loads(out) == [{"rank": r, "n": t.num_rows} for r, t in enumerate(tables)]
    # the store on the cluster: read rank by rank by its own format, the local store's report
    assert_same(opscope.analyze(store), opscope.analyze(store, cluster=cluster.scheduler_address))
    assert_same(
        opscope.analyze(store),
        opscope.analyze(str(store / "rank*.parquet"), cluster=cluster.scheduler_address),
    )


def test_a_profile_read_whole_is_refused_on_a_cluster(cluster: Any, tmp_path: Path) -> None:
    """A Neuron profile (here its legacy JSON) is one piece: --cluster says so and what to do."""
    (tmp_path / "system_profile.json").write_text('{"trace_events": []}')
    with pytest.raises(opscope.errors.OpscopeError, match="a neuron profile, read whole"):
        opscope.analyze(tmp_path, cluster=cluster.scheduler_address)


def test_progress_is_told_per_rank(cluster: Any, tmp_path: Path) -> None:
    write_nccl_job(tmp_path, 2)
    seen: list[tuple[str, int, int]] = []
    opscope.analyze(
        tmp_path,
        cluster=cluster.scheduler_address,
        progress=lambda stage, done, total: seen.append((stage, done, total)),
    )
    # "findings": the ranks' comm_exposed findings measured on the job path
    stages = {s for s, _d, _t in seen}
    assert stages == {"read", "analyse", "critical path", "job path", "findings"}
    assert ("analyse", 2, 2) in seen


def test_bad_and_unreachable_schedulers_are_one_line_errors(tmp_path: Path) -> None:
    write_nccl_job(tmp_path, 2)
    with pytest.raises(ClusterError, match="expected local, local:N"):
        opscope.analyze(tmp_path, cluster="http://nowhere")
    with pytest.raises(ClusterError, match="local:N needs a worker count"):
        opscope.analyze(tmp_path, cluster="local:0")
    from opscope.analysis import cluster as cluster_mod

    refused = cluster_mod.connect("tcp://127.0.0.1:9", timeout_s=1)
    with pytest.raises(ClusterError, match="no Dask scheduler answers") as exc, refused:
        pass
    assert "\n" not in str(exc.value)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opscope", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def test_cli_cluster_json_is_quiet_and_names_the_engine(cluster: Any, tmp_path: Path) -> None:
    paths = write_nccl_job(tmp_path, 3)
    paths[2].write_text("{")
    done = _cli("report", str(tmp_path), "--cluster", cluster.scheduler_address, "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["source"]["engine"]["name"] == "dask"
    assert doc["critical_path"]["scope"] == "job" and doc["critical_path"]["ranks"] == [0, 1]
    assert doc["critical_path"]["segments"]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("opscope report: warning: rank 2 left out")


def test_cli_env_scheduler_and_errors(cluster: Any, tmp_path: Path) -> None:
    import os

    write_nccl_job(tmp_path, 2)
    env = {**os.environ, "OPSCOPE_DASK_SCHEDULER": cluster.scheduler_address}
    done = subprocess.run(
        [sys.executable, "-m", "opscope", "report", str(tmp_path), "--cluster", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["source"]["engine"]["scheduler"] == cluster.scheduler_address
    bad = _cli("report", str(tmp_path), "--cluster", "nowhere")
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    store = _cli("report", str(tmp_path), "--store", str(tmp_path / "s"))
    assert store.returncode == 1 and "--store needs --cluster" in store.stderr


def test_rank_files_by_url(cluster: Any, tmp_path: Path) -> None:
    """A folder given by URL (fsspec; ``file://`` here, an object store the same way): the
    workers fetch the files; the report is the local one, the files named by their URLs."""
    write_nccl_job(tmp_path, 3, late_rank=1, late_us=200.0)
    local = opscope.analyze(tmp_path)
    remote = opscope.analyze(tmp_path.as_uri(), cluster=cluster.scheduler_address)
    a, b = local.to_dict(), remote.to_dict()
    urls = [p.as_uri() for p in sorted(tmp_path.glob("trace_rank_*.json"))]
    assert b["source"]["paths"] == urls
    assert [r["paths"] for r in b["ranks"]] == [[u] for u in urls]
    for doc in (a, b):
        doc["source"].pop("paths"), doc["source"].pop("engine", None)
        for r in doc["ranks"]:
            r.pop("paths")
    assert plain(a) == plain(b)
    at = cluster.scheduler_address
    glob = opscope.analyze(tmp_path.as_uri() + "/trace_rank_*.json", cluster=at)
    assert glob.to_dict()["source"]["paths"] == urls
    with pytest.raises(opscope.errors.TraceError, match="no such file or folder"):
        opscope.analyze(tmp_path.as_uri() + "/nothing/", cluster=at)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_local_cluster_with_a_worker_per_core_keeps_one_thread_per_rank(workers: int) -> None:
    """Workers on every core: the critical path does not start a second thread beside each
    rank's analysis (``analysis.beside``); fewer workers than cores leave it free."""
    import os

    from opscope.analysis import beside
    from opscope.analysis.cluster import connect

    with connect(f"local:{workers}") as (client, _name):
        seen = set(client.run(lambda: os.environ.get(beside.ENV)).values())
    one_thread = workers >= (os.cpu_count() or 1)
    assert seen == ({"1"} if one_thread else {None})


def test_a_local_cluster_does_not_contend_for_dasks_default_port() -> None:
    """With 8787 taken (a notebook's cluster), ``--cluster local`` neither warns nor moves
    there: its scheduler's HTTP routes take a free port on 127.0.0.1."""
    import socket
    import warnings

    from opscope.analysis.cluster import connect

    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8787))
        holder.listen()
    except OSError:
        pass  # taken already: the case under test
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with connect("local:1") as (client, _name):
                assert client.submit(sum, [1, 2]).result(timeout=60) == 3
        assert not [w for w in caught if "8787" in str(w.message)]
    finally:
        holder.close()
