"""Paging is exact: walking every paged tool by ``next_offset`` (ops, ops by shapes, kernels,
roofline, findings, lanes, events, sql, compare's tables) returns the rows of one unpaged
query, none lost or repeated, on every shared trace; each page's ``next_offset`` is its
``offset`` plus the rows it returned, however the size cap cut it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")

from golden_reports import SHARED, trace_files
from opscope.mcp.budget import MAX_STRUCTURED_BYTES, clip_strings, plain, size
from opscope.mcp.registry import Session
from opscope.mcp.server import answer, registry
from opscope.service import Workspace
from opscope.service import queries as service_queries
from opscope.service.queries import EventsRequest, PageRequest

REG = registry()
EVERYTHING = 10**9


def walk(session: Session, name: str, args: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every page of one paged call, by next_offset; each page checked."""
    offset = 0
    for _ in range(100_000):
        result, is_error = answer(REG, session, name, {**args, "offset": offset})
        assert not is_error, (name, args, offset, result.text)
        page = result.data
        assert size(page) <= MAX_STRUCTURED_BYTES, (name, offset)
        rows = page["rows"]
        assert page["offset"] == offset
        nxt = page["next_offset"]
        if nxt is None:
            assert page["truncated"] is False or name == "sql", (name, offset)
            yield page
            return
        assert rows, (name, offset)  # a page that is not the last holds rows
        assert nxt == offset + len(rows), (name, args, offset, len(rows), nxt)
        assert page["truncated"] is True
        yield page
        offset = nxt
    raise AssertionError(f"{name}: more than 100,000 pages")


def walked(session: Session, name: str, args: dict[str, Any]) -> list[Any]:
    return [row for page in walk(session, name, args) for row in page["rows"]]


def as_sent(rows: list[Any]) -> list[Any]:
    """Rows as a tool sends them (plain JSON, long strings cut)."""
    out: list[Any] = clip_strings(plain(rows))
    return out


def check_trace_pages(session: Session, ws: Workspace, handle: str) -> None:
    tables = [
        ("ops", {"limit": 200}, "ops", None),
        ("ops", {"limit": 200, "by_shapes": True}, "op_shapes", None),
        ("ops", {"limit": 37, "by_shapes": True, "sort": "calls"}, "op_shapes", "calls"),
        ("kernels", {"limit": 200}, "kernels", None),
        ("roofline", {"limit": 200}, "roofline", None),
    ]
    for tool, args, table, sort in tables:
        want = ws.table(table, handle, request=PageRequest(sort=sort, limit=EVERYTHING))["rows"]
        assert walked(session, tool, args) == as_sent(want), (tool, args)
    want = ws.findings(handle, limit=EVERYTHING)["rows"]
    assert walked(session, "findings", {"limit": 50}) == as_sent(want)
    lanes = ws.get(handle).index.lanes_dict()["lanes"]
    assert walked(session, "lanes", {"limit": 1000}) == as_sent(lanes)
    for args in ({"limit": 500}, {"t0": 0, "t1": 400_000, "limit": 500}):
        req = EventsRequest(
            t0_ns=None if "t0" not in args else round(args["t0"] * 1e3),
            t1_ns=None if "t1" not in args else round(args["t1"] * 1e3),
            limit=EVERYTHING,
        )
        want = ws.events(handle, request=req)["rows"]
        assert walked(session, "events", args) == as_sent(want), args
    q = "SELECT id, name, dur_ns FROM events ORDER BY id"
    want = ws.get(handle).trace.query(q, limit=None).json_rows()
    assert walked(session, "sql", {"query": q, "limit": 1000}) == as_sent(want)


@pytest.fixture
def unpaged_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's events without its page limit: the unpaged query to compare with."""
    monkeypatch.setattr(service_queries, "MAX_EVENT_ROWS", EVERYTHING)


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.usefixtures("unpaged_events")
@pytest.mark.parametrize("relative", trace_files() or ["(no shared traces)"])
def test_walking_every_paged_tool_returns_every_row_once(relative: str) -> None:
    path = SHARED / "traces" / relative
    if not path.exists():
        pytest.skip("../shared/traces not present")
    ws = Workspace()
    session = Session(ws)
    result, is_error = answer(REG, session, "open_trace", {"path": str(path)})
    if is_error:
        pytest.skip(f"not a trace the server opens: {result.text}")
    check_trace_pages(session, ws, result.data["trace"])


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.usefixtures("unpaged_events")
def test_wide_rows_cut_by_the_cap_are_paged_exactly() -> None:
    """Rows wide enough that the byte cap, not the limit, ends every page."""
    path = SHARED / "traces" / "rocm" / "mi300x_models" / "owlv2_large.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces not present")
    ws = Workspace()
    session = Session(ws)
    answer(REG, session, "open_trace", {"path": str(path)})
    q = "SELECT * FROM events WHERE id < 20000 ORDER BY id"
    pages = list(walk(session, "sql", {"query": q, "limit": 1000}))
    assert len(pages) > 20 and all(len(p["rows"]) < 1000 for p in pages)
    rows = [r for p in pages for r in p["rows"]]
    assert rows == as_sent(ws.get().trace.query(q, limit=None).json_rows())


PAIRS = [
    ("cuda/diff_pair/control_a100.json.gz", "cuda/diff_pair/test_v100.json.gz"),
    (
        "cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz",
        "cuda/dataloader_pair/resnet50_workers4.pt.trace.json.gz",
    ),
    ("cuda/et_pair/linear_kineto.json.gz", "rocm/mi300x_models/owlv2_large.json.gz"),
]


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_walking_compare_tables_returns_every_row_once(a: str, b: str) -> None:
    pa, pb = SHARED / "traces" / a, SHARED / "traces" / b
    if not (pa.exists() and pb.exists()):
        pytest.skip("../shared/traces not present")
    ws = Workspace()
    session = Session(ws)
    result, is_error = answer(REG, session, "compare", {"a": str(pa), "b": str(pb)})
    assert not is_error, result.text
    ha, hb = result.data["traces"]["a"], result.data["traces"]["b"]
    full = ws.diff(ha, hb)
    for table in ("ops", "kernels"):
        # the first answer's table is the first page of the walk
        shown = result.data[table]
        assert shown == as_sent(full[table])[: len(shown)]
        nxt = result.data["tables"][table]["next_offset"]
        assert nxt == (len(shown) if len(shown) < len(full[table]) else None)
        rows = walked(session, "compare", {"a": ha, "b": hb, "table": table, "limit": 200})
        assert rows == as_sent(full[table]), table
