"""The MCP server through the SDK's in-memory client: every tool, output schemas, hostile
trace strings shown inert, SQL escapes refused, bad calls answered as tool errors."""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import jsonschema
from mcp import Client

from mcp_threads import run_apart
from mcp_traces import HOSTILE, LEAKS, write_hostile
from opscope.mcp.budget import MAX_STRUCTURED_BYTES, MAX_TEXT_CHARS, size
from opscope.mcp.server import build_server

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def session(body: Callable[[Call, dict[str, Any]], Awaitable[None]], **server: Any) -> None:
    """Run ``body(call, schemas)`` against a fresh server; ``call`` checks every result's
    size, and every success's structured content against the tool's output schema."""

    async def main() -> None:
        async with Client(build_server(**server)) as client:
            listed = await client.list_tools()
            schemas = {t.name: t for t in listed.tools}

            async def call(name: str, args: dict[str, Any]) -> Any:
                r = await client.call_tool(name, args)
                text = r.content[0].text
                assert len(text) <= MAX_TEXT_CHARS + 200, (name, len(text))
                if not r.is_error:
                    assert size(r.structured_content) <= MAX_STRUCTURED_BYTES, name
                    jsonschema.Draft202012Validator(schemas[name].output_schema).validate(
                        r.structured_content
                    )
                return r

            await body(call, schemas)

    run_apart(main)


@pytest.fixture()
def hostile(tmp_path: Path) -> Path:
    return write_hostile(tmp_path)


def outside_quotes(text: str) -> str:
    """The text with trace-data fences and inline code spans removed."""
    text = re.sub(r"```trace-data\n.*?\n```", "", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", "", text)


EVERY_TOOL: list[tuple[str, dict[str, Any]]] = [
    ("summary", {}),
    ("list_traces", {}),
    ("findings", {"limit": 5}),
    ("finding", {"id": "F1"}),
    ("ops", {"limit": 50}),
    ("ops", {"by_shapes": True, "sort": "calls"}),
    ("ops", {"name_filter": "mm"}),
    ("kernels", {"sort": "max_us"}),
    ("roofline", {}),
    ("lanes", {}),
    ("events", {"t0": 0, "t1": 5000, "limit": 50}),
    ("events", {"lanes": [0], "name_filter": "cuda"}),
    ("event", {"event_id": 0}),
    ("chain", {"op": "aten::mm", "occurrence": 2}),
    ("chain", {"event_id": 1}),
    ("critical_path", {"limit": 10}),
    ("what_if", {"changes": ["aten::mm=0.5", "launch_overhead=0"]}),
    ("tables", {}),
    ("sql", {"query": "SELECT name, count(*) AS n FROM events GROUP BY name ORDER BY n DESC"}),
]


def test_every_tool_answers_with_its_schema_and_inert_text(hostile: Path) -> None:
    async def body(call: Call, schemas: dict[str, Any]) -> None:
        r = await call("open_trace", {"path": str(hostile)})
        assert not r.is_error, r.content[0].text
        assert r.structured_content["trace"] == "t1"
        seen = set()
        for name, args in EVERY_TOOL:
            r = await call(name, args)
            assert not r.is_error, (name, r.content[0].text)
            seen.add(name)
            text = r.content[0].text
            free = outside_quotes(text)
            for leak in LEAKS:
                assert leak not in free, (name, leak, text)
            assert "\u202e" not in text and "\u200b" not in text  # escaped even when quoted
            # no quoted string spans lines: every fence and span closes on its own line
            assert text.count("```") % 2 == 0, name
        assert {n for n, _ in EVERY_TOOL} == seen

    session(body)


def test_hostile_strings_stay_exact_in_structured_content(hostile: Path) -> None:
    async def body(call: Call, schemas: dict[str, Any]) -> None:
        await call("open_trace", {"path": str(hostile)})
        r = await call("ops", {"limit": 200})
        names = {row["name"] for row in r.structured_content["rows"]}
        for value in HOSTILE.values():
            assert value in names  # data kept exactly, only the text quotes it
        assert any(n.endswith("chars]") for n in names)  # the 300k-char name was cut

    session(body)


def test_sql_escapes_refused(hostile: Path, tmp_path: Path) -> None:
    stolen = tmp_path / "stolen.csv"
    escapes = [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM '/etc/passwd'",
        f"COPY events TO '{stolen}'",
        f"COPY (SELECT 1) TO '{stolen}' (FORMAT csv)",
        f"ATTACH '{tmp_path / 'x.db'}' AS x",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "SELECT 1; SELECT 2",
        "CREATE TABLE t AS SELECT 1",
        "DROP TABLE events",
    ]

    async def body(call: Call, schemas: dict[str, Any]) -> None:
        await call("open_trace", {"path": str(hostile)})
        for q in escapes:
            r = await call("sql", {"query": q})
            assert r.is_error, q
        assert not stolen.exists()
        assert not (tmp_path / "x.db").exists()
        r = await call("sql", {"query": "SELECT nosuch FROM events"})
        assert r.is_error and "tables" in r.content[0].text  # the hint names the tool
        r = await call("sql", {"query": "SELECT count(*) AS n FROM kernels"})
        assert not r.is_error and r.structured_content["rows"][0]["n"] > 0

    session(body)


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("ops", {"bogus": 1}, "unknown argument 'bogus'"),
    ("ops", {"sort": "fastest"}, "is not one of"),
    ("ops", {"limit": 0}, "below the minimum"),
    ("ops", {"limit": 100_000}, "above the maximum"),
    ("ops", {"limit": "10"}, "expected integer"),
    ("ops", {"by_shapes": 1}, "expected boolean"),
    ("finding", {}, "missing required argument 'id'"),
    ("finding", {"id": "F999"}, "no finding 'F999'"),
    ("finding", {"id": "'; DROP"}, "does not match"),
    ("findings", {"min_severity": "urgent"}, "is not one of"),
    ("findings", {"kind": "nosuch"}, "no finding of kind"),
    ("chain", {}, "give event_id, or op"),
    ("chain", {"event_id": 1, "op": "aten::mm"}, "not both"),
    ("chain", {"op": "aten::nosuch"}, "no event named"),
    ("chain", {"op": "aten::mm", "occurrence": 10_000}, "occurrence is 0.."),
    ("event", {"event_id": 10**9}, "no event"),
    ("events", {"t0": 50, "t1": 10}, "t1 must be after t0"),
    ("events", {"lanes": [999]}, "no lane 999"),
    ("what_if", {"changes": ["nonsense"]}, ""),
    ("summary", {"trace": "t9"}, "no open trace 't9'"),
    ("open_trace", {"path": "/nonexistent/trace.json"}, "no such file"),
    ("open_trace", {"path": "/etc/passwd"}, ""),
    ("open_trace", {"path": "/dev/zero"}, ""),
    ("open_trace", {"path": "x", "steps": "a:b"}, "does not match"),
    ("nosuch_tool", {}, "no tool 'nosuch_tool'"),
]


def test_bad_calls_are_tool_errors_that_say_what_to_do(hostile: Path) -> None:
    async def body(call: Call, schemas: dict[str, Any]) -> None:
        await call("open_trace", {"path": str(hostile)})
        for name, args, message in BAD_CALLS:
            r = await call(name, args)
            assert r.is_error, (name, args)
            assert message in r.content[0].text, (name, args, r.content[0].text)
            assert "internal error" not in r.content[0].text, (name, args)
        r = await call("summary", {})
        assert not r.is_error

    session(body)


def test_a_burst_of_malformed_calls_leaves_the_server_answering(hostile: Path) -> None:
    rng = random.Random(7)
    values: list[Any] = [
        None,
        -1,
        0,
        2**63,
        1.5,
        "",
        "x" * 5000,
        [],
        [1, "a"],
        {},
        {"a": 1},
        True,
        "\x00",
        "F1",
        "aten::mm",
        "../../etc/passwd",
    ]

    async def body(call: Call, schemas: dict[str, Any]) -> None:
        await call("open_trace", {"path": str(hostile)})
        names = [n for n in schemas if n not in ("open_trace", "compare", "close_trace")]
        for _ in range(300):
            name = rng.choice(names)
            props = [*list(schemas[name].input_schema.get("properties", {})), "junk"]
            args = {rng.choice(props): rng.choice(values) for _ in range(rng.randint(0, 3))}
            r = await call(name, args)
            assert "internal error" not in r.content[0].text, (name, args, r.content[0].text)
        r = await call("findings", {})
        assert not r.is_error and r.structured_content["rows"]

    session(body)


def test_handles_default_close_and_compare(tmp_path: Path) -> None:
    a = write_hostile(tmp_path, "a.json", steps=2)
    b = write_hostile(tmp_path, "b.json", steps=4)
    c = write_hostile(tmp_path, "c.json", steps=3)

    async def body(call: Call, schemas: dict[str, Any]) -> None:
        assert not (await call("open_trace", {"path": str(c)})).is_error  # t1, the default
        r = await call("compare", {"a": str(a), "b": str(b)})  # paths are opened
        assert not r.is_error, r.content[0].text
        assert r.structured_content["schema"] == "opscope.diff/1"
        assert r.structured_content["traces"] == {"a": "t2", "b": "t3"}
        r = await call("list_traces", {})
        assert [t["handle"] for t in r.structured_content["traces"]] == ["t1", "t2", "t3"]
        assert r.structured_content["default"] == "t1"  # compare left the default alone
        r = await call("compare", {"a": "t3", "b": "t2"})  # handles too
        assert not r.is_error
        r2 = await call("summary", {"trace": "t2"})
        r3 = await call("summary", {"trace": "t3"})
        assert r2.structured_content["events"] < r3.structured_content["events"]
        assert (await call("summary", {})).structured_content["trace"] == "t1"
        r = await call("compare", {"a": "t2", "b": "t3", "offset": 5})
        assert r.is_error and "table" in r.content[0].text
        assert not (await call("close_trace", {})).is_error  # closes t1, the default
        r = await call("summary", {})
        assert r.structured_content["trace"] == "t3"

    session(body)


def test_compare_opens_without_changing_a_missing_default(tmp_path: Path) -> None:
    a = write_hostile(tmp_path, "a.json", steps=2)
    b = write_hostile(tmp_path, "b.json", steps=4)

    async def body(call: Call, schemas: dict[str, Any]) -> None:
        assert not (await call("compare", {"a": str(a), "b": str(b)})).is_error
        # none was open: the first opened is the default, as open_trace would have made it
        assert (await call("list_traces", {})).structured_content["default"] == "t1"

    session(body)


def test_roots_confine_what_open_trace_reads(tmp_path: Path) -> None:
    inside = tmp_path / "in"
    inside.mkdir()
    ok = write_hostile(inside)
    out = write_hostile(tmp_path, "out.json")

    async def body(call: Call, schemas: dict[str, Any]) -> None:
        r = await call("open_trace", {"path": str(out)})
        assert r.is_error and "outside the folders" in r.content[0].text
        r = await call("open_trace", {"path": str(inside / ".." / "out.json")})
        assert r.is_error  # no way out through ..
        r = await call("open_trace", {"path": str(ok)})
        assert not r.is_error

    session(body, roots=(inside.resolve(),))


def test_no_trace_open_says_to_open_one() -> None:
    async def body(call: Call, schemas: dict[str, Any]) -> None:
        r = await call("summary", {})
        assert r.is_error and "open one first" in r.content[0].text

    session(body)


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize(
    "relative",
    [
        "rocm/mi300x_models/owlv2_large.json.gz",  # the largest file (103k events)
        "cuda/a100_cudagraph_rank0_of16.json.gz",  # the largest CUDA trace
    ],
)
def test_result_sizes_on_the_largest_shared_traces(
    shared: Callable[[str], Path], relative: str
) -> None:
    path = shared(relative)
    big = [
        ("ops", {"limit": 200, "by_shapes": True}),
        ("kernels", {"limit": 200}),
        ("roofline", {"limit": 200}),
        ("events", {"limit": 500}),
        ("lanes", {"limit": 1000}),
        ("sql", {"query": "SELECT * FROM events", "limit": 1000}),
        ("critical_path", {"limit": 200}),
        ("finding", {"id": "F1", "events": 50}),
        ("findings", {"limit": 50}),
        ("summary", {}),
        ("tables", {}),
    ]

    async def body(call: Call, schemas: dict[str, Any]) -> None:
        r = await call("open_trace", {"path": str(path)})
        assert not r.is_error, r.content[0].text
        for name, args in big:
            r = await call(name, args)  # call() asserts the caps and the schema
            assert not r.is_error, (name, r.content[0].text)
        q = "SELECT * FROM events ORDER BY id"
        r = await call("sql", {"query": q, "limit": 1000})
        assert r.structured_content["truncated"] is True
        nxt = r.structured_content["next_offset"]
        assert 0 < nxt < 1000  # the cap, not the limit, ended the page
        r2 = await call("sql", {"query": q, "limit": 1000, "offset": nxt})
        assert r2.structured_content["rows"][0]["id"] > r.structured_content["rows"][-1]["id"]
        r = await call("ops", {"limit": 200, "by_shapes": True})
        if r.structured_content["total"] > len(r.structured_content["rows"]):
            assert r.structured_content["next_offset"] == len(r.structured_content["rows"])

    session(body)


def test_job_tools_on_a_three_rank_job(tmp_path: Path) -> None:
    from distjobs import write_nccl_job

    folder = tmp_path / "job"
    folder.mkdir()
    write_nccl_job(folder, world=3, late_rank=1, late_us=200.0)

    async def body(call: Call, schemas: dict[str, Any]) -> None:
        r = await call("open_trace", {"path": str(folder)})
        assert not r.is_error, r.content[0].text
        assert r.structured_content["brief"]["distributed"]["world_size"] == 3
        r = await call("distributed", {})
        assert not r.is_error, r.content[0].text
        dist = r.structured_content["distributed"]
        assert [s["rank"] for s in dist["stragglers"]] == [1]  # the late rank
        r = await call(
            "sql",
            {"query": "SELECT id FROM kernels WHERE name LIKE 'nccl%' ORDER BY id LIMIT 1"},
        )
        assert not r.is_error, r.content[0].text
        kernel = r.structured_content["rows"][0]["id"]
        r = await call("collective", {"event_id": kernel})
        assert not r.is_error, r.content[0].text
        col = r.structured_content["collective"]
        assert col["matched"] is True and len(col["ranks"]) == 3
        assert col["last_rank"] == 1
        r = await call("critical_path", {})
        assert not r.is_error and r.structured_content["critical_path"]["scope"] == "job"
        r = await call("findings", {"kind": "straggler"})
        assert not r.is_error and r.structured_content["rows"], r.content[0].text
        r = await call("findings", {"rank": 1, "limit": 50})
        rows = r.structured_content["rows"]
        assert not r.is_error and rows and {f["rank"] for f in rows} == {1}
        r = await call("findings", {"rank": -1, "limit": 50})  # the job's own
        rows = r.structured_content["rows"]
        assert not r.is_error and rows and all(f.get("rank") is None for f in rows)
        assert "straggler" in {f["kind"] for f in rows}
        r = await call("findings", {"rank": 7})
        assert r.is_error and "ranks with findings: 0, 1, 2" in r.content[0].text

    session(body)


def test_open_trace_reports_progress_to_a_client_that_asks(hostile: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async def main() -> None:
        async with Client(build_server()) as client:
            r = await client.call_tool(
                "open_trace", {"path": str(hostile)}, progress_callback=on_progress
            )
            assert not r.is_error, r.content[0].text
            r = await client.call_tool("summary", {})  # no callback: no progress, no error
            assert not r.is_error

    run_apart(main)
    assert [s[0] for s in seen] == [0, 1, 2] and all(s[1] == 2 for s in seen)
    assert seen[0][2] == "loading hostile.json" and "events" in str(seen[1][2])
