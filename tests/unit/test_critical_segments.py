"""The critical path's segments kept columnar: the JSON written in one C pass is the JSON of
the dicts, and the lazy sequence reads like a list."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from test_findings_kit import Doc

from opscope.analysis.critical import path as P
from opscope.analysis.pipeline import analyze
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
    text = json_render.render_json_bytes(rep.to_dict(lazy=True))
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


class _Names:
    """What ``Pieces.top`` reads of an index: the name codes of the rows and their values."""

    def __init__(self, codes: np.ndarray, values: list[str]) -> None:
        class name:
            pass

        name.codes = codes  # type: ignore[attr-defined]
        name.values = np.array(values, dtype=object)  # type: ignore[attr-defined]
        self.name = name


@pytest.mark.parametrize(("n_names", "n_pieces"), [(3, 500), (50, 2000), (200_000, 300)])
def test_top_pieces_sum_per_label_and_name(n_names: int, n_pieces: int) -> None:
    """Summed per (label, name), the biggest first (ties: label, then name code), whether
    the keys are counted in place (few names) or sorted (more names than pieces)."""
    rng = np.random.default_rng(n_names)
    n_rows = 1000
    idx = _Names(rng.integers(-1, n_names, n_rows), [f"op{i}" for i in range(n_names)])
    row = rng.integers(-1, n_rows, n_pieces)
    label = rng.integers(0, len(P.LABELS), n_pieces)
    dur = rng.choice([0, 1000, 2500, 7], n_pieces)
    p = P.Pieces(np.zeros(n_pieces, np.int64), label, row, np.zeros(n_pieces, np.int64), dur)
    sums: dict[tuple[int, int], list[float]] = {}
    for r, lb, d in zip(row.tolist(), label.tolist(), dur.tolist(), strict=True):
        code = int(idx.name.codes[r]) if r >= 0 else -1  # type: ignore[attr-defined]
        got = sums.setdefault((lb, code), [0.0, 0])
        got[0] += d
        got[1] += 1
    order = sorted(sums, key=lambda k: (-sums[k][0], k))
    want = [
        {
            "label": P.LABELS[lb],
            "name": f"op{code}" if code >= 0 else None,
            "dur_us": round(sums[(lb, code)][0] / 1000.0, 3),
            "pieces": sums[(lb, code)][1],
        }
        for lb, code in order[:7]
    ]
    assert p.top(idx, 7) == want  # type: ignore[arg-type]
