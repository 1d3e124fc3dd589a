"""A large trace in the explorer: its head read as a preview (``ByteStream(stop_after=)``,
``kineto.load_head``) and served as ``side=preview`` at once while the whole trace loads in a
thread (``Session.open(preview_bytes=)``, ``/api/status``); every other answer waits for the
whole trace.  The whole load is held back by a gate here, so that "before" and "after" are
certain, not a race."""

from __future__ import annotations

import gzip
import http.client
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from opscope.explorer.data import Session, wants_preview
from opscope.explorer.server import ExplorerServer
from opscope.trace import load
from opscope.trace.formats.kineto import load_head
from opscope.trace.readers import ByteStream

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
NCCL = SHARED / "cuda" / "a100_nccl_rank0_of2.json.gz"  # 0.75 MB gzipped, 9.8 MB of JSON
HEAD = 1 << 20


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not present (../shared/traces is not part of a user's clone)")
    return path


def test_a_stream_stops_after_its_preview_bytes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40_000  # 10 MB
    plain = tmp_path / "t.json"
    plain.write_bytes(data)
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(data))
    for path in (plain, packed):
        s = ByteStream(path, block=1 << 16, stop_after=1_000_003)
        got = b"".join(s)
        assert got == data[:1_000_003]
        assert s.cut is not None and "preview" in s.cut
        whole = ByteStream(path, stop_after=len(data))  # all of it: nothing is cut
        assert b"".join(whole) == data and whole.cut is None


def test_the_head_is_the_files_first_events_and_says_it_is_a_preview() -> None:
    full = load(_need(NCCL), cache=False)
    head = load_head(NCCL, HEAD)
    assert 0 < len(head) < len(full) / 4
    assert any("preview" in w for w in head.meta.warnings)

    def keys(t: Any) -> Counter[tuple[Any, ...]]:
        cols = [t.events.column(c).to_pylist() for c in ("name", "pid", "tid", "dur_ns")]
        return Counter(zip(*cols, strict=True))

    # every event of the head is an event of the file (times aside: the head has no
    # baseTimeNanoseconds, written after the events)
    assert not keys(head) - keys(full)
    whole = load_head(NCCL, 64 << 20)  # more than the file: the file
    assert len(whole) == len(full)
    assert not any("preview" in w for w in whole.meta.warnings)


def test_which_traces_get_a_preview(tmp_path: Path) -> None:
    assert wants_preview(_need(NCCL), HEAD)  # 0.75 MB gzipped, guessed 6 MB of JSON
    assert not wants_preview(NCCL, 4 << 20)  # not more than twice the head
    assert not wants_preview(NCCL, 0)
    assert not wants_preview(NCCL.parent, HEAD)  # a folder: loaded whole
    assert not wants_preview(tmp_path / "missing.json", HEAD)


def _get(server: ExplorerServer, path: str) -> tuple[int, Any]:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), port, timeout=60)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read()
        return resp.status, orjson.loads(body)
    finally:
        conn.close()


def test_the_preview_is_served_before_the_whole_trace_then_the_whole_trace(
    load_gate: threading.Event,
) -> None:
    full = load(_need(NCCL), cache=False)
    loaded: list[Session] = []
    session = Session.open(NCCL, preview_bytes=HEAD, on_loaded=loaded.append)
    assert session.preview is not None
    server = ExplorerServer(session, "127.0.0.1", 0)
    server.start_background()
    try:
        # before: the head answers, the trace is not loaded
        code, st = _get(server, "/api/status")
        assert code == 200 and st["loaded"] is False and st["error"] is None
        assert st["preview"]["bytes"] == HEAD and 0 < st["preview"]["events"] < len(full)
        code, lanes = _get(server, "/api/lanes?side=preview")
        assert code == 200 and lanes["events"] == st["preview"]["events"]
        assert lanes["preview"] == st["preview"]
        ids = ",".join(str(ln["id"]) for ln in lanes["lanes"])
        span = lanes["span_ns"]
        code, win = _get(server, f"/api/events?side=preview&lanes={ids}&t0=0&t1={span}&px=800")
        assert code == 200 and win["lanes"]
        first = next(ln for ln in win["lanes"] if ln["ev"]["id"])["ev"]["id"][0]
        code, ev = _get(server, f"/api/event?side=preview&id={first}")
        assert code == 200 and ev["id"] == first
        code, _chain = _get(server, f"/api/chain?side=preview&id={first}")
        assert code == 200
        assert not loaded and not session.wait_loaded(0.2)

        # a question of the whole trace waits for it; let it load
        answers: list[tuple[int, Any]] = []
        asker = threading.Thread(target=lambda: answers.append(_get(server, "/api/lanes")))
        asker.start()
        asker.join(0.5)
        assert asker.is_alive() and not answers  # still waiting
        load_gate.set()
        asker.join(60)
        assert answers and answers[0][0] == 200
        assert answers[0][1]["events"] == len(full) and "preview" not in answers[0][1]
        assert session.wait_loaded(60) and loaded == [session]

        # after: loaded, the report is the whole trace's, the head still answers as itself
        code, st = _get(server, "/api/status")
        assert st["loaded"] is True and st["load_s"] is not None
        code, report = _get(server, "/api/report")
        assert code == 200 and report["source"]["events"] == len(full)
        code, lanes_after = _get(server, "/api/lanes?side=preview")
        assert lanes_after["events"] == st["preview"]["events"]
    finally:
        server.stop()


def test_a_failed_whole_load_is_told_not_hung(load_gate: threading.Event, tmp_path: Path) -> None:
    # a file whose head reads but whose whole load fails (here: it is gone by then)
    path = tmp_path / "big.json.gz"
    path.write_bytes(_need(NCCL).read_bytes())
    session = Session.open(path, preview_bytes=HEAD)
    path.unlink()
    load_gate.set()
    assert session.wait_loaded(60)
    st = session.status()
    assert st["loaded"] is False and st["error"] and "big.json.gz" in st["error"]
    with pytest.raises(Exception, match=r"big\.json\.gz"):
        _ = session.a


def test_no_preview_for_a_small_trace_or_two_traces() -> None:
    s = Session.open(_need(NCCL), preview_bytes=16 << 20)
    assert s.preview is None and s.status()["loaded"] is True
    with pytest.raises(KeyError):
        s.lanes("preview")
    two = Session.open(NCCL, NCCL, preview_bytes=HEAD)
    assert two.preview is None
