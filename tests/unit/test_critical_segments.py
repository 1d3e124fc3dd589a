"""The critical path's segments kept columnar: the JSON written in one C pass is the JSON of
the dicts, and the lazy sequence reads like a list."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from test_findings_kit import Doc

from opscope.analysis.critical import path as P
from opscope.analysis.report import analyze
from opscope.render import json_render


def _doc() -> Doc:
    d = Doc()
    d.op('aten::mul "quoted" \\ é', 0, 100)
    d.launch(10, 10, "k\nnewline", 30, 170)
    d.op("aten::add", 300, 12.345)
    return d


def test_lazy_segments_read_like_the_plain_list() -> None:
    rep = analyze(_doc().trace())
    lazy = rep.to_dict(lazy=True)["critical_path"]["segments"]
    plain = rep.to_dict()["critical_path"]["segments"]
    assert isinstance(lazy, P.Segments) and isinstance(plain, list)
    assert len(lazy) == len(plain) and list(lazy) == plain and lazy[0] == plain[0]
    assert lazy == plain


def test_the_c_writer_matches_orjson_of_the_dicts(monkeypatch: pytest.MonkeyPatch) -> None:
    rep = analyze(_doc().trace())
    seg = rep.to_dict(lazy=True)["critical_path"]["segments"]
    assert orjson.loads(seg.json()) == list(seg)
    assert seg.json() == orjson.dumps(list(seg))
    monkeypatch.setattr(P, "_pieces", None)  # without the extension: the same bytes
    assert seg.json() == orjson.dumps(list(seg))


@pytest.mark.skipif(P._pieces is None, reason="the C writer is not built")
def test_durations_are_written_as_round_trip_floats() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    dur = np.concatenate([rng.integers(0, 10**13, n), [0, 1, 10, 100, 1000, 1001, 999_999]])
    m = len(dur)
    out = P._pieces.dumps(
        np.zeros(m, np.int64),
        np.zeros(m, np.int64),
        np.full(m, -1, np.int64),
        np.arange(m, dtype=np.int64) - 1,
        np.arange(m, dtype=np.int64) * -7,
        dur.astype(np.int64),
        (b'"cpu"',),
        (),
    )
    got = orjson.loads(out)
    assert [g["dur_us"] for g in got] == np.round(dur / 1000.0, 3).tolist()
    assert out == orjson.dumps(got)
    assert got[0]["event_id"] is None and got[0]["name"] is None


def test_the_report_json_holds_every_segment() -> None:
    rep = analyze(_doc().trace())
    text = json_render.render_bytes(rep.to_dict(lazy=True))
    assert (
        orjson.loads(text)["critical_path"]["segments"]
        == rep.to_dict()["critical_path"]["segments"]
    )


def test_take_builds_only_the_chosen_segments() -> None:
    rep = analyze(_doc().trace())
    seg = rep.to_dict(lazy=True)["critical_path"]["segments"]
    pos = np.asarray([len(seg) - 1, 0])
    items = list(seg)
    assert seg.take(pos) == [items[-1], items[0]]
    assert seg.durations_us().tolist() == [s["dur_us"] for s in seg]
