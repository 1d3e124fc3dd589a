"""The service layer every front-end uses: open traces by handle and ask the core."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opscope.service import ServiceError, Workspace
from trace_checks import KINETO_LIKE


@pytest.fixture
def trace_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    p = tmp_path / "t.json"
    p.write_text(json.dumps(KINETO_LIKE))
    return p


def test_open_and_ask_the_last_opened_by_default(trace_file: Path) -> None:
    ws = Workspace()
    first = ws.open(trace_file)
    second = ws.open(trace_file)
    assert (first.handle, second.handle) == ("t1", "t2")
    assert [h["handle"] for h in ws.handles()] == ["t1", "t2"]
    assert ws.get() is second and ws.get("t1") is first
    rep = ws.report()
    assert rep["schema"] == "opscope.report/1"
    assert {o["name"] for o in rep["ops"]} >= {"aten::mm"}
    assert ws.report("t1") == rep  # same trace, same answer
    assert ws.analysis() is second.report  # computed once, kept


def test_events_chains_and_occurrences(trace_file: Path) -> None:
    ws = Workspace()
    ws.open(trace_file)
    occ = ws.occurrences("aten::mm")
    assert occ["count"] == 1
    (mm_id,) = [int(i) for i in occ["ids"]]
    ev = ws.event(mm_id)
    assert ev is not None and ev["name"] == "aten::mm"
    assert ws.event(10**12) is None
    chain = ws.chain_of_op("aten::mm")
    assert chain == ws.chain(mm_id)
    assert "gemm" in json.dumps(chain)
    with pytest.raises(ServiceError, match="occurs 1 times"):
        ws.chain_of_op("aten::mm", occurrence=3)
    with pytest.raises(ServiceError, match="no event named"):
        ws.chain_of_op("aten::nothing")


def test_sql_rows_are_capped_and_say_so(trace_file: Path) -> None:
    ws = Workspace()
    ws.open(trace_file)
    out = ws.sql("SELECT name FROM events ORDER BY id", limit=2)
    assert out["columns"] == ["name"]
    assert len(out["rows"]) == 2 and out["truncated"] is True
    assert out["row_count"] == 2  # the rows returned: the total is never computed
    assert (out["offset"], out["next_offset"]) == (0, 2)
    last = ws.sql("SELECT name FROM events ORDER BY id", limit=2, offset=4)
    assert (last["row_count"], last["truncated"], last["next_offset"]) == (1, False, None)
    assert ws.sql("SELECT count(*) AS n FROM kernels")["rows"] == [{"n": 1}]
    with pytest.raises(ServiceError, match="limit"):
        ws.sql("SELECT 1", limit=0)


def test_diff_and_errors_that_say_what_to_do(trace_file: Path) -> None:
    ws = Workspace()
    with pytest.raises(ServiceError, match="no trace is open"):
        ws.report()
    ws.open(trace_file, handle="a")
    ws.open(trace_file, handle="b")
    d = ws.diff("a", "b")
    assert d["schema"] == "opscope.diff/1"
    assert ws.diff("a", "b") is d
    with pytest.raises(ServiceError, match=r"no open trace 'c' \(open: a, b\)"):
        ws.get("c")
    ws.close("b")
    assert ws.get().handle == "a"
    with pytest.raises(ServiceError):
        ws.close("b")


def test_timeline_answers_do_not_wait_for_the_analysis(
    trace_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import opscope.analysis.pipeline as report_mod

    release = threading.Event()
    real = report_mod.analyze

    def slow(*args: object, **kwargs: object) -> object:
        assert release.wait(10)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(report_mod, "analyze", slow)
    ws = Workspace()
    opened = ws.open(trace_file, prefetch=True)
    lanes = ws.lanes()  # answered while the analysis waits
    assert lanes["lanes"]
    assert opened._report is None
    release.set()
    assert ws.report()["schema"] == "opscope.report/1"


def test_an_analysis_error_reaches_whoever_asks(
    trace_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import opscope.analysis.pipeline as report_mod

    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("analysis broke")

    monkeypatch.setattr(report_mod, "analyze", broken)
    ws = Workspace()
    ws.open(trace_file, prefetch=True).prefetch().join(10)
    with pytest.raises(RuntimeError, match="analysis broke"):
        ws.report()


def test_adopt_keeps_what_was_computed(trace_file: Path) -> None:
    first = Workspace()
    opened = first.open(trace_file)
    report = opened.report
    other = Workspace()
    assert other.adopt(opened, "a") is opened
    assert other.get() is opened and other.analysis("a") is report
    assert opened.handle == "t1"  # its name where it was opened
    assert other.lanes("a") == first.lanes("t1")
