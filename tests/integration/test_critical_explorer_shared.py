"""The critical path placed on the timeline: ``Workspace.critical_path`` and
``GET /api/critical_path`` on a recorded CUDA trace (../shared: skipped where absent) and on a
synthetic 2-rank NCCL job (the job path, segments on both ranks' lanes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from distjobs import write_nccl_job
from opscope.explorer.data import Session, Side
from opscope.explorer.server import ExplorerServer
from opscope.service import ServiceError, Workspace
from opscope.trace import load

TRACE = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "traces"
    / "cuda"
    / "critical_path_event_sync.json.gz"
)
needs_shared = pytest.mark.skipif(
    not TRACE.exists(), reason=f"{TRACE} not present (../shared is not part of a user's clone)"
)
PLACED = {"i", "lane", "row", "t", "dur_ns"}
REPORT_KEYS = {"rank", "label", "name", "event_id", "start_ns", "dur_us"}


@pytest.fixture(scope="module")
def ws() -> Workspace:
    if not TRACE.exists():
        pytest.skip(f"{TRACE} not present (../shared is not part of a user's clone)")
    w = Workspace()
    w.open(TRACE, handle="gpu")
    return w


def _check_placed(ws: Workspace, handle: str, got: dict[str, Any]) -> None:
    """Every segment where the timeline draws its event: that event's lane and row, ``t`` on
    the events' relative clock, and the lane of the segment's rank."""
    index = ws.get(handle).index
    origin = index.origin_ns
    assert got["origin_ns"] == str(origin)
    for s in got["segments"]:
        assert set(s) >= REPORT_KEYS | PLACED
        assert s["t"] == s["start_ns"] - origin
        assert s["dur_ns"] == round(s["dur_us"] * 1000)
        if s["event_id"] is None:
            # untraced time: drawn at the top of the lane of the event its evidence names
            ev = s.get("evidence") or {}
            anchor = next(
                (ev[k] for k in ("after_event_id", "before_event_id") if ev.get(k) is not None),
                None,
            )
            if anchor is None:
                assert s["lane"] is None and s["row"] is None
            else:
                assert s["label"] == "untraced"
                assert s["lane"] == int(index.lane_of[index.row_of(anchor)]) and s["row"] == 0
            continue
        row = index.row_of(s["event_id"])
        assert row >= 0
        assert s["lane"] == int(index.lane_of[row]) and s["row"] == int(index.depth[row])
        assert index.lanes[s["lane"]].rank == s["rank"]
        rec = index.record(row)
        assert rec["name"] == s["name"] and rec["lane_id"] == s["lane"]


@needs_shared
def test_the_section_with_every_segment_placed(ws: Workspace) -> None:
    section = ws.report("gpu")["critical_path"]
    got = ws.critical_path("gpu")
    assert got["scope"] == "rank"
    assert got["bound_by_us"] == section["bound_by_us"]
    assert got["length_us"] == section["length_us"] > 0
    assert (got["segments_total"], got["truncated"]) == (len(section["segments"]), False)
    assert len(got["segments"]) == len(section["segments"]) > 10
    assert [s["i"] for s in got["segments"]] == list(range(len(section["segments"])))
    for placed, orig in zip(got["segments"], section["segments"], strict=True):
        assert {k: placed[k] for k in orig} == orig
    _check_placed(ws, "gpu", got)
    # the path runs over the host thread, the runtime and the device: lanes of every group
    groups = {ws.get("gpu").index.lanes[s["lane"]].group for s in got["segments"]}
    assert groups == {"framework", "runtime", "hardware"}
    # the report itself is left as it was
    assert "lane" not in section["segments"][0]


@needs_shared
def test_the_cap_keeps_the_longest_segments_in_path_order(ws: Workspace) -> None:
    full = ws.critical_path("gpu")["segments"]
    got = ws.critical_path("gpu", limit=5)
    assert (len(got["segments"]), got["truncated"]) == (5, True)
    assert got["segments_total"] == len(full)
    kept = [s["i"] for s in got["segments"]]
    assert kept == sorted(kept)
    dropped = [s["dur_us"] for s in full if s["i"] not in kept]
    assert min(s["dur_us"] for s in got["segments"]) >= max(dropped)
    _check_placed(ws, "gpu", got)


@needs_shared
def test_a_report_without_a_path_is_a_service_error(ws: Workspace) -> None:
    opened = ws.open(TRACE, handle="bare")
    opened._data = {k: v for k, v in opened.data.items() if k != "critical_path"}
    with pytest.raises(ServiceError, match="no critical path"):
        ws.critical_path("bare")


def test_the_job_path_is_placed_on_both_ranks(tmp_path: Path) -> None:
    # each step ends in a sync on the device, so the late arrival is on the job path
    write_nccl_job(tmp_path, 2, n=3, late_rank=1, late_us=120.0, sync=True, comm_stream=8)
    w = Workspace()
    w.open(tmp_path, handle="job")
    got = w.critical_path("job")
    assert got["scope"] == "job" and got["jumps"]
    _check_placed(w, "job", got)
    lanes = w.get("job").index.lanes
    ranks = {lanes[s["lane"]].rank for s in got["segments"] if s["lane"] is not None}
    assert ranks == {0, 1}


# -- the endpoint --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ExplorerServer]:
    if not TRACE.exists():
        pytest.skip(f"{TRACE} not present (../shared is not part of a user's clone)")
    srv = ExplorerServer(Session(Side.from_trace(load(TRACE))))
    srv.start_background()
    yield srv
    srv.stop()


def _get(srv: ExplorerServer, path: str) -> tuple[int, Any]:
    import http.client

    port = srv.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res.status, orjson.loads(body)


@needs_shared
def test_the_endpoint_answers_the_placed_path(server: ExplorerServer) -> None:
    status, got = _get(server, "/api/critical_path")
    assert status == 200
    want = server.session.workspace.critical_path("a")
    assert got == orjson.loads(orjson.dumps(want))
    _, lanes = _get(server, "/api/lanes")
    assert got["origin_ns"] == lanes["origin_ns"]
    n_lanes = len(lanes["lanes"])
    assert all(0 <= s["lane"] < n_lanes for s in got["segments"] if s["lane"] is not None)
    # no second trace: 404 with a message, as every other endpoint
    status, err = _get(server, "/api/critical_path?side=b")
    assert status == 404 and "error" in err
