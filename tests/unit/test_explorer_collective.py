"""The collective of a selected event across the ranks of a job: ``Workspace.collective`` and
``GET /api/collective`` on a synthetic 2-rank NCCL job (rank 1 arrives 120 us late at every
all_reduce), on one rank of it, and the error cases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_explorer_api import get

from distjobs import write_nccl_job
from opscope.explorer.data import Session, Side
from opscope.explorer.server import ExplorerServer
from opscope.service import ServiceError, Workspace

LATE_US = 120.0
KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage)"


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("nccljob")
    write_nccl_job(folder, 2, n=3, late_rank=1, late_us=LATE_US)
    return folder


@pytest.fixture(scope="module")
def ws(job: Path) -> Workspace:
    w = Workspace()
    w.open(job, handle="job")
    w.open(job / "trace_rank_0.json", handle="one")
    return w


def _ids(ws: Workspace, handle: str) -> dict[tuple[int, str], list[int]]:
    """(rank, name) -> event ids, in id order."""
    ev = ws.get(handle).trace.events
    out: dict[tuple[int, str], list[int]] = {}
    for r, n, i in zip(
        ev.column("rank").to_pylist(),
        ev.column("name").to_pylist(),
        ev.column("id").to_pylist(),
        strict=True,
    ):
        out.setdefault((int(r), str(n)), []).append(int(i))
    return out


def test_the_instance_of_a_c10d_op(ws: Workspace) -> None:
    ids = _ids(ws, "job")
    got = ws.collective(ids[(0, "c10d::allreduce_")][1], "job")
    assert (got["name"], got["pg"], got["seq"], got["bytes"]) == ("all_reduce", "0", 1, 4096)
    assert got["matched"] is True and got["rank"] == 0
    assert got["last_rank"] == 1
    assert got["start_skew_us"] == pytest.approx(LATE_US)
    assert got["dur_us"] == pytest.approx(300.0 - LATE_US)
    r0, r1 = got["ranks"]
    assert (r0["rank"], r1["rank"]) == (0, 1)
    assert r0["wait_us"] == pytest.approx(LATE_US) and r1["wait_us"] == 0.0
    assert r1["arrival_ns"] - r0["arrival_ns"] == int(LATE_US * 1000)
    assert r0["end_ns"] == r1["end_ns"]
    # each rank's record names its anchor and its kernel, placed for drawing
    for r, part in ((0, r0), (1, r1)):
        assert part["event_id"] == ids[(r, "c10d::allreduce_")][1]
        assert part["work_event_ids"] == [ids[(r, KERNEL)][1]]
        (drawn,) = part["drawn"]
        assert drawn["id"] == ids[(r, KERNEL)][1]
        assert drawn["t"] == part["t0"] and drawn["t"] + drawn["dur_ns"] == part["t1"]
        lane = ws.lanes("job")["lanes"][drawn["lane_id"]]
        assert (lane["rank"], lane["group"]) == (r, "hardware")


def test_every_event_of_the_call_gives_the_same_instance(ws: Workspace) -> None:
    ids = _ids(ws, "job")
    want = ws.collective(ids[(1, KERNEL)][2], "job")
    assert want["seq"] == 2 and want["rank"] == 1
    # nested host events, the kernel, its launch: on either rank
    launches = ids[(1, "cudaLaunchKernel")]
    for eid in (
        ids[(0, "c10d::allreduce_")][2],
        ids[(0, "record_param_comms")][2],
        ids[(0, "nccl:all_reduce")][2],
        ids[(1, "c10d::allreduce_")][2],
        launches[5],  # rank 1's launch of its third NCCL kernel (odd launches: comm)
    ):
        got = ws.collective(eid, "job")
        assert (got["seq"], got["ranks"]) == (want["seq"], want["ranks"])


def test_no_collective_and_unknown_ids(ws: Workspace) -> None:
    ids = _ids(ws, "job")
    with pytest.raises(ServiceError, match="part of no collective"):
        ws.collective(ids[(0, "aten::mm")][0], "job")
    with pytest.raises(ServiceError, match="part of no collective"):
        ws.collective(ids[(1, "gemm_kernel")][0], "job")
    with pytest.raises(KeyError):
        ws.collective(10**9, "job")


def test_one_rank_answers_its_record_alone(ws: Workspace) -> None:
    ids = _ids(ws, "one")
    got = ws.collective(ids[(0, KERNEL)][0], "one")
    assert got["matched"] is False and got["last_rank"] == 0
    assert (got["seq"], got["start_skew_us"], got["dur_us"]) == (0, 0.0, pytest.approx(300.0))
    (only,) = got["ranks"]
    assert only["wait_us"] == 0.0 and only["work_event_ids"] == [ids[(0, KERNEL)][0]]


def test_the_lookup_is_built_once(ws: Workspace) -> None:
    opened = ws.get("job")
    assert opened.collectives is opened.collectives


@pytest.fixture(scope="module")
def server(job: Path) -> Iterator[ExplorerServer]:
    srv = ExplorerServer(Session(Side.of(Workspace().open(job, handle="a"))), "127.0.0.1", 0)
    srv.start_background()
    yield srv
    srv.stop()


def _json(srv: ExplorerServer, path: str) -> tuple[int, Any]:
    res, body = get(srv, path)
    assert res.getheader("Content-Type") == "application/json"
    return res.status, orjson.loads(body)


def test_api_collective(server: ExplorerServer) -> None:
    ev = server.session.side("a").opened.trace.events
    names, ids = ev.column("name").to_pylist(), ev.column("id").to_pylist()
    kernel, mm = ids[names.index(KERNEL)], ids[names.index("aten::mm")]
    status, got = _json(server, f"/api/collective?event={kernel}")
    assert status == 200
    assert got["matched"] is True and [r["rank"] for r in got["ranks"]] == [0, 1]
    assert [r["wait_us"] for r in got["ranks"]] == [pytest.approx(LATE_US), 0.0]
    status, err = _json(server, f"/api/collective?event={mm}")
    assert status == 404 and "part of no collective" in err["error"]
    status, err = _json(server, "/api/collective?event=999999999")
    assert status == 404
    status, err = _json(server, "/api/collective")
    assert status == 400 and "event" in err["error"]
    status, err = _json(server, "/api/collective?event=x")
    assert status == 400
