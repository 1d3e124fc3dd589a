"""The explorer's HTTP API: endpoints, level of detail, chains, and the server's security
(127.0.0.1 only, Host check, no path traversal, strict CSP, trace strings only ever as JSON)."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opscope.explorer.data import Session, Side
from opscope.explorer.server import ENDPOINTS, ExplorerServer
from opscope.trace import Trace, load_document

EVIL = '<img src=x onerror=alert("pwned")>'


def gpu_doc(steps: int = 2, ops: int = 3) -> dict[str, Any]:
    """ProfilerStep > EVIL op > aten::mm > cudaLaunchKernel -> kernel (correlation)."""
    ev: list[dict[str, Any]] = []
    t, corr = 1000.0, 0
    for s in range(steps):
        t0 = t
        for i in range(ops):
            corr += 1
            ev += [
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": EVIL,
                    "pid": 1,
                    "tid": 1,
                    "ts": t,
                    "dur": 30.0,
                    "args": {"External id": corr, "Input Dims": [[4, 8], [8, 4]]},
                },
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": "aten::mm",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 2,
                    "dur": 20.0,
                    "args": {"External id": corr},
                },
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": t + 5,
                    "dur": 6.0,
                    "args": {"correlation": corr},
                },
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": f"gemm_{i}",
                    "pid": 0,
                    "tid": 7,
                    "ts": t + 15,
                    "dur": 10.0 + i,
                    "args": {"correlation": corr, "stream": 7},
                },
            ]
            t += 40
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s}",
                "pid": 1,
                "tid": 1,
                "ts": t0 - 1,
                "dur": t - t0,
                "args": {},
            }
        )
        t += 100
    return {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "Test GPU"}]}


@pytest.fixture(scope="module")
def trace() -> Trace:
    return load_document(gpu_doc(), "evil.json")


@pytest.fixture(scope="module")
def server(trace: Trace) -> Iterator[ExplorerServer]:
    b = load_document(gpu_doc(steps=3), "b.json")
    srv = ExplorerServer(Session(Side.from_trace(trace), Side.from_trace(b)))
    srv.start_background()
    yield srv
    srv.stop()


def get(srv: ExplorerServer, path: str, host: str | None = None, method: str = "GET") -> Any:
    port = srv.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Host": host if host is not None else f"127.0.0.1:{port}"}
    conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
    for k, v in headers.items():
        conn.putheader(k, v)
    conn.endheaders()
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res, body


def api(srv: ExplorerServer, path: str) -> Any:
    res, body = get(srv, path)
    assert res.status == 200, (path, body)
    assert res.getheader("Content-Type") == "application/json"
    return orjson.loads(body)


def test_binds_loopback_by_default(server: ExplorerServer) -> None:
    assert server.server_address[0] == "127.0.0.1"
    assert server.url.startswith("http://127.0.0.1:")


def test_app_page_and_assets_with_strict_csp(server: ExplorerServer) -> None:
    res, body = get(server, "/")
    assert res.status == 200
    csp = res.getheader("Content-Security-Policy")
    assert "script-src 'self'" in csp and "default-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert res.getheader("X-Content-Type-Options") == "nosniff"
    page = body.decode()
    assert '<script type="module" src="app.js"></script>' in page
    assert "<!--" not in page.split("<body>")[0]  # placeholders all filled
    for path, ctype in (("/app.js", "text/javascript"), ("/style.css", "text/css")):
        res, body = get(server, path)
        assert res.status == 200 and res.getheader("Content-Type").startswith(ctype)
        assert len(body) > 1000


@pytest.mark.parametrize(
    "path",
    [
        "/../pyproject.toml",
        "/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/static/../server.py",
        "/app.js/../server.py",
        "/server.py",
        "/static/app.js",
        "//etc/passwd",
        "/api/../data.py",
        "/..%2f..%2fpyproject.toml",
        "/index.html%00.py",
    ],
)
def test_no_path_traversal(server: ExplorerServer, path: str) -> None:
    res, body = get(server, path)
    assert res.status == 404
    assert b"import" not in body and b"root:" not in body


def test_host_header_checked(server: ExplorerServer) -> None:
    res, _ = get(server, "/api/report", host="attacker.example:80")
    assert res.status == 403
    res, _ = get(server, "/api/report", host=f"localhost:{server.server_address[1]}")
    assert res.status == 200


def test_read_only(server: ExplorerServer) -> None:
    res, _ = get(server, "/api/report", method="POST")
    assert res.status == 405


def test_report_has_relative_evidence_times(server: ExplorerServer) -> None:
    r = api(server, "/api/report")
    assert r["schema"] == "opscope.report/1"
    assert r["explorer"]["compare"] is True
    origin = int(r["explorer"]["origin_ns"])
    for f in r["findings"]:
        for e in f["evidence"]:
            if "start_ns" in e:
                assert e["t0"] == e["start_ns"] - origin


def test_lanes_grouped(server: ExplorerServer) -> None:
    lanes = api(server, "/api/lanes")
    groups = [(ln["group"], ln["lane"]) for ln in lanes["lanes"]]
    assert groups == [
        ("framework", "thread 1"),
        ("runtime", "thread 1"),
        ("hardware", "stream 7"),
    ]
    fw = lanes["lanes"][0]
    assert fw["rows"] == 3  # ProfilerStep > op > aten::mm
    assert lanes["events"] == 2 * (3 * 4 + 1)


def test_events_level_of_detail(server: ExplorerServer) -> None:
    lanes = api(server, "/api/lanes")
    span = lanes["span_ns"]
    full = api(server, f"/api/events?t0=0&t1={span}&px=100000")
    n_full = sum(len(ln["ev"]["id"]) for ln in full["lanes"])
    assert n_full == lanes["events"] and full["aggregated"] == 0
    # 5 pixels: nearly everything is narrower than a pixel and summed into cells
    lod = api(server, f"/api/events?t0=0&t1={span}&px=5")
    n_ev = sum(len(ln["ev"]["id"]) for ln in lod["lanes"])
    n_agg = sum(sum(ln["agg"]["n"]) for ln in lod["lanes"])
    assert n_ev + n_agg == lanes["events"] and lod["aggregated"] == n_agg > 0
    assert all(len(ln["agg"]["t"]) <= 5 * 3 + 3 for ln in lod["lanes"])
    # a window and a lane filter
    one = api(server, f"/api/events?lanes=2&t0=0&t1={span // 2}&px=2000")
    assert [ln["lane"] for ln in one["lanes"]] == [2]
    assert 0 < len(one["lanes"][0]["ev"]["id"]) < 6
    # launch flows: runtime -> device
    assert len(full["flows"]["to_id"]) == 6


def test_event_details_keep_trace_strings_as_data(server: ExplorerServer, trace: Trace) -> None:
    evil_id = trace.sql(f"select min(id) i from events where name = '{EVIL}'").to_pylist()[0]["i"]
    res, body = get(server, f"/api/event?id={evil_id}")
    assert res.status == 200 and res.getheader("Content-Type") == "application/json"
    assert res.getheader("X-Content-Type-Options") == "nosniff"
    rec = orjson.loads(body)
    assert rec["name"] == EVIL
    assert rec["args"]["Input Dims"] == [[4, 8], [8, 4]]


def test_chain_from_kernel_and_back(server: ExplorerServer, trace: Trace) -> None:
    kid = trace.sql("select min(id) i from events where name = 'gemm_0'").to_pylist()[0]["i"]
    chain = api(server, f"/api/chain?id={kid}")
    (path,) = chain["paths"]
    assert [h["role"] for h in path] == ["framework op", "runtime launch", "device execution"]
    assert [h["name"] for h in path] == ["aten::mm", "cudaLaunchKernel", "gemm_0"]
    # op at +2 µs, launch at +5 µs (ends +11), kernel at +15 µs
    assert path[1]["offset_ns"] == 3_000 and path[1]["gap_ns"] == 3_000 - 20_000
    assert path[2]["offset_ns"] == 10_000 and path[2]["gap_ns"] == 4_000
    assert [s["name"] for s in chain["stack"]] == ["ProfilerStep#0", EVIL]
    assert chain["device_executions"] == 1 and chain["device_ns"] == 10_000


def test_chain_from_outer_op_covers_children_launches(server: ExplorerServer, trace: Trace) -> None:
    step = trace.sql("select id from events where name = 'ProfilerStep#1'").to_pylist()[0]["id"]
    chain = api(server, f"/api/chain?id={step}")
    assert len(chain["paths"]) == 3
    assert {p[-1]["name"] for p in chain["paths"]} == {"gemm_0", "gemm_1", "gemm_2"}
    assert chain["device_ns"] == 10_000 + 11_000 + 12_000


def test_occurrences(server: ExplorerServer) -> None:
    occ = api(server, "/api/occurrences?name=aten::mm")
    assert occ["count"] == 6 and len(occ["ids"]) == 6
    assert occ["t"] == sorted(occ["t"])


def test_bad_requests(server: ExplorerServer) -> None:
    assert get(server, "/api/event?id=99999999")[0].status == 404
    assert get(server, "/api/chain?id=99999999")[0].status == 404
    assert get(server, "/api/events?t0=abc&t1=5")[0].status == 400
    assert get(server, "/api/event")[0].status == 400
    assert get(server, "/api/nothing")[0].status == 404


def test_diff(server: ExplorerServer) -> None:
    d = api(server, "/api/diff")
    assert d["schema"] == "opscope.diff/1"
    mm = next(o for o in d["ops"] if o["name"] == "aten::mm")
    assert (mm["a"]["calls"], mm["b"]["calls"], mm["delta_calls"]) == (6, 9, 3)


def test_no_diff_with_one_trace(trace: Trace) -> None:
    srv = ExplorerServer(Session(Side.from_trace(trace)))
    srv.start_background()
    try:
        assert get(srv, "/api/diff")[0].status == 404
        assert api(srv, "/api/report")["explorer"]["compare"] is False
    finally:
        srv.stop()


def test_summary_sections_come_from_the_api_once_analysed(server: ExplorerServer) -> None:
    """The page is served without waiting for the analysis; its Summary sections (roofline,
    study, Neuron engines) are the renderer's escaped HTML, asked for separately."""
    res, page = get(server, "/")
    assert res.status == 200 and b'id="summary-sections"' in page
    sec = api(server, "/api/sections")
    assert isinstance(sec["html"], str)
    assert "<script" not in sec["html"].lower()
    assert "Roofline" in sec["html"]


@pytest.mark.parametrize(
    "query",
    [
        "/api/event?id=99999999999999999999",
        "/api/event?id=1e400",
        "/api/event?id=-1e400",
        "/api/event?id=nan",
        "/api/chain?id=99999999999999999999",
        "/api/collective?event=99999999999999999999",
        "/api/events?t0=0&t1=1e30&px=10",
        "/api/events?lanes=99999999999999999999&t0=0&t1=5&px=10",
        "/api/events?lanes=-1&t0=0&t1=5&px=10",
    ],
)
def test_out_of_range_parameters_are_answered(server: ExplorerServer, query: str) -> None:
    # every request gets an answer: a bad parameter is a 400 (or 404), never a dropped
    # connection
    res, body = get(server, query)
    assert res.status in (400, 404), (res.status, body)
    assert orjson.loads(body)["error"]


_PARAM_VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=12),
    st.sampled_from(["", "0", "1", "-1", "1e400", "nan", "inf", "1,2,3", "a,b", ",", "b"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    endpoint=st.sampled_from(sorted(ENDPOINTS)),
    params=st.dictionaries(
        st.sampled_from(["id", "event", "t0", "t1", "px", "lanes", "name", "side", "x"]),
        _PARAM_VALUES,
        max_size=5,
    ),
)
def test_every_endpoint_answers_every_request(
    server: ExplorerServer, endpoint: str, params: dict[str, str]
) -> None:
    # generated parameters on every endpoint: an answer each time (200, 400 or 404 with a
    # JSON error), never a dropped connection or a 500
    res, body = get(server, endpoint + ("?" + urlencode(params) if params else ""))
    assert res.status in (200, 400, 404), (endpoint, params, res.status, body[:200])
    if res.status != 200:
        assert orjson.loads(body)["error"]


def test_the_report_leaves_the_paths_segments_to_their_own_endpoint(server: ExplorerServer) -> None:
    r = api(server, "/api/report")
    cp = r["critical_path"]
    assert cp["segments"] == []
    drawn = api(server, "/api/critical_path")
    assert cp["segments_total"] == drawn["segments_total"] > 0
