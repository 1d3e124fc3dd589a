"""The report's JSON written in pieces: the same bytes as in one piece (one rank, a job of
several ranks, segments cut anywhere), and a file the write could not finish is removed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from opscope.analysis.critical import path as cp
from opscope.analysis.pipeline import analyze
from opscope.cli.output import write_output
from opscope.errors import OpscopeError
from opscope.render.json_render import render_json_bytes, render_json_chunks
from opscope.trace import load_document


def _op(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _trace(n: int, rank: int | None = None) -> dict[str, Any]:
    """A CPU trace of ``n`` nested op pairs (a path of many segments)."""
    events: list[dict[str, Any]] = []
    for i in range(n):
        t = 1000.0 + 20 * i
        events += [_op(f"outer{i % 3}", t, 12.0), _op("aten::mul", t + 2, 5.0)]
    doc: dict[str, Any] = {"traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": 2}
    return doc


@pytest.mark.parametrize("per_chunk", [1, 2, 7, 10_000])
def test_pieces_join_to_the_one_piece_bytes(
    per_chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = analyze(load_document(_trace(40))).to_dict(lazy=True)
    segments = data["critical_path"]["segments"]
    assert len(segments) > 10
    whole = render_json_bytes(data)
    monkeypatch.setattr(cp, "JSON_CHUNK", per_chunk)
    chunks = list(render_json_chunks(data))
    assert b"".join(chunks) == whole
    assert orjson.loads(whole)["critical_path"]["segments"] == list(segments)
    if per_chunk < len(segments):
        assert len(chunks) > 3  # the segments came in several pieces


def test_a_report_without_segments_is_one_piece() -> None:
    data = {"schema": "x", "ops": [{"name": "a", "calls": 1}]}
    assert list(render_json_chunks(data)) == [render_json_bytes(data)]


def test_a_job_of_two_ranks_gives_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for r in (0, 1):
        (tmp_path / f"rank{r}.json").write_bytes(orjson.dumps(_trace(15 + 5 * r, rank=r)))
    data = analyze(tmp_path, cache=False).to_dict(lazy=True)
    whole = render_json_bytes(data)
    monkeypatch.setattr(cp, "JSON_CHUNK", 3)
    assert b"".join(render_json_chunks(data)) == whole


def test_segments_of_several_blocks_in_pieces() -> None:
    a = analyze(load_document(_trace(9))).to_dict(lazy=True)["critical_path"]["segments"]
    b = analyze(load_document(_trace(4))).to_dict(lazy=True)["critical_path"]["segments"]
    both = cp.Segments.of_blocks([*a.blocks, *b.blocks])
    assert len(both.blocks) == 2
    want = orjson.dumps([*a, *b])
    for per_chunk in (1, 4, 1000):
        assert b"".join(both.json_chunks(per_chunk)) == want


def test_a_write_that_fails_leaves_no_half_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"

    def broken() -> Any:
        yield b"{"
        raise OpscopeError("the document failed")

    with pytest.raises(OpscopeError, match="the document failed"):
        write_output(broken(), str(out))
    assert not out.exists()
    write_output(iter([b"{", b"}"]), str(out))
    assert out.read_bytes() == b"{}"
