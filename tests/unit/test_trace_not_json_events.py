"""An event that is not JSON (torch's export writes record_function names with their quotes
unescaped) is skipped and counted; every other event, and the keys after the array, are kept.

Before: everything after the broken event was lost and the file was reported as cut short.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.trace import load
from opscope.trace.jsonstream import EventStream
from opscope.trace.kineto import file as kineto_file
from opscope.trace.kineto.file import NOT_JSON
from opscope.trace.readers import ByteStream


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _events(n: int) -> list[dict[str, Any]]:
    return [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i}",
            "pid": 1,
            "tid": 1,
            "ts": i * 10,
            "dur": 5,
            # nested objects in a list: "},{" inside an event, a false boundary
            "args": {"External id": i, "l": [{"a": 1}, {"b": 2}]},
        }
        for i in range(n)
    ]


def _write(tmp_path: Path, n: int, broken: dict[int, str], form: str = "object") -> Path:
    doc: Any = {"traceEvents": _events(n), "baseTimeNanoseconds": 7000}
    if form == "array":
        doc = doc["traceEvents"]
    text = json.dumps(doc, indent=1)
    for i, name in broken.items():
        text = text.replace(f'"op{i}"', name, 1)
    path = tmp_path / f"t_{form}.json"
    path.write_text(text)
    return path


def _names(t: Any) -> list[str]:
    return [str(v) for v in t.sql("SELECT name FROM events ORDER BY id").column(0).to_pylist()]


@pytest.mark.parametrize("form", ["object", "array"])
@pytest.mark.parametrize(
    ("n", "bad"),
    [
        pytest.param(100, [50], id="small file (tail path)"),
        pytest.param(100, [0], id="first event"),
        pytest.param(100, [98], id="next to last event"),
        pytest.param(100, [10, 11, 60], id="two adjacent and one apart"),
        pytest.param(30000, [3, 15000, 29990], id="large file (runs and tail)"),
    ],
)
def test_broken_events_are_skipped_and_the_rest_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str, n: int, bad: list[int]
) -> None:
    # small blocks and runs so that the large file has many runs
    monkeypatch.setattr(EventStream.__init__, "__defaults__", (256 << 10,))
    monkeypatch.setattr(ByteStream.__init__, "__defaults__", (None, 128 << 10))
    broken = {i: f'"op{i} "quoted" name"' for i in bad}
    path = _write(tmp_path, n, broken, form)
    for workers in (0, 2):
        monkeypatch.setattr(kineto_file, "_workers", lambda w, k=workers: k)
        t = load(path, cache=False)
        want = [f"op{i}" for i in range(n) if i not in bad]
        assert _names(t) == want
        adjacent = sum(1 for i in bad if i - 1 in bad)  # two in a row read as one stretch
        assert t.meta.skipped[NOT_JSON] == len(bad) - adjacent
        warning = [w for w in t.meta.warnings if "not JSON" in w]
        assert len(warning) == 1 and f'op{bad[0]} "quoted' in warning[0]
        assert not any("cut short" in w for w in t.meta.warnings)
        if form == "object":
            assert t.meta.base_time_ns == 7000  # the keys after the array are not lost


def test_cut_short_file_is_still_reported_as_cut(tmp_path: Path) -> None:
    path = _write(tmp_path, 100, {})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    t = load(path, cache=False)
    assert 0 < len(t) < 100
    assert any("cut short" in w for w in t.meta.warnings)
    assert NOT_JSON not in t.meta.skipped


def test_bad_escape_and_invalid_utf8_events_are_skipped(tmp_path: Path) -> None:
    path = _write(tmp_path, 50, {20: '"op20 \\u00zz"'})
    data = path.read_bytes().replace(b'"op30"', b'"op30 \xff\xfe"', 1)
    path.write_bytes(data)
    t = load(path, cache=False)
    assert _names(t) == [f"op{i}" for i in range(50) if i not in (20, 30)]
    assert t.meta.skipped[NOT_JSON] == 2
