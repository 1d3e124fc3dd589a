"""Every call a tool's text suggests is a valid call: each is parsed back (``tool(name=JSON,
...)``) and made, and must answer without an error.  The texts come from every tool on a
hostile trace, on the largest shared trace and on a job, from compare, and from refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp_hints import hints
from mcp_traces import write_hostile
from opscope.mcp.registry import Session
from opscope.mcp.server import answer, registry
from opscope.service import Workspace

REG = registry()
TOOLS = list(REG.specs)

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("summary", {}),
    ("brief", {}),
    ("findings", {"limit": 2}),
    ("finding", {"id": "F1"}),
    ("ops", {"limit": 3}),
    ("ops", {"by_shapes": True, "sort": "calls", "limit": 2, "name_filter": "a"}),
    ("kernels", {"limit": 2, "sort": "max_us"}),
    ("roofline", {"limit": 2}),
    ("lanes", {"limit": 1}),
    ("events", {"t0": 0, "t1": 5000, "limit": 2}),
    ("event", {"event_id": 1}),
    ("chain", {"event_id": 1}),
    ("critical_path", {"limit": 3}),
    ("what_if", {"changes": ["launch_overhead=0"]}),
    ("tables", {}),
    ("schema", {"name": "OpRow"}),
    ("sql", {"query": "SELECT id FROM events ORDER BY id", "limit": 5}),
    ("list_traces", {}),
]
REFUSALS: list[tuple[str, dict[str, Any]]] = [
    ("sql", {"query": "SELECT nosuch FROM events"}),
    ("finding", {"id": "F999"}),
    ("ops", {"bogus": 1}),
    ("what_if", {"changes": ["aten::mm=-1"]}),
    ("schema", {"name": "Nosuch"}),
    ("open_trace", {"path": "/etc/passwd"}),
]


class Checker:
    """Makes every call the texts suggest, following them ``depth`` levels."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.made: dict[str, str] = {}  # the call as written -> the tool answered

    def text_of(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        result, is_error = answer(REG, self.session, name, args)
        return result.text, is_error

    def follow(self, text: str, where: str, depth: int = 2) -> None:
        for tool, written, args in hints(text, TOOLS):
            assert args is not None, f"{where}: the hint {written!r} is not a call"
            if written in self.made:
                continue
            reply, is_error = self.text_of(tool, args)
            self.made[written] = tool
            assert not is_error, f"{where}: the hint {written!r} fails: {reply}"
            if depth > 1:
                self.follow(reply, f"{where} -> {written}", depth - 1)

    def run(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        for name, args in calls:
            text, is_error = self.text_of(name, args)
            assert not is_error, (name, args, text)
            self.follow(text, f"{name}({args})")


def test_every_hint_on_a_hostile_trace_is_a_valid_call(tmp_path: Path) -> None:
    check = Checker(Session(Workspace()))
    check.run([("open_trace", {"path": str(write_hostile(tmp_path))}), *CALLS])
    for name, args in REFUSALS:
        text, is_error = check.text_of(name, args)
        assert is_error, (name, args)
        check.follow(text, f"refusal {name}")
    # the texts did suggest calls, and each was made
    assert {"ops", "finding", "what_if", "brief"} <= set(check.made.values()), check.made


def test_every_hint_of_a_job_is_a_valid_call(tmp_path: Path) -> None:
    from distjobs import write_nccl_job

    folder = tmp_path / "job"
    folder.mkdir()
    write_nccl_job(folder, world=3, late_rank=1, late_us=200.0)
    check = Checker(Session(Workspace()))
    check.run(
        [
            ("open_trace", {"path": str(folder)}),
            *CALLS,
            ("distributed", {}),
            ("findings", {"rank": 1, "limit": 2}),
        ]
    )


@pytest.mark.shared
@pytest.mark.slow
def test_every_hint_on_shared_traces_and_compare_is_a_valid_call(
    shared: Callable[[str], Path],
) -> None:
    big = shared("rocm/mi300x_models/owlv2_large.json.gz")
    a = shared("cuda/diff_pair/control_a100.json.gz")
    b = shared("cuda/diff_pair/test_v100.json.gz")
    check = Checker(Session(Workspace()))
    check.run(
        [
            ("open_trace", {"path": str(big)}),
            *CALLS,
            ("ops", {"by_shapes": True, "limit": 200, "offset": 200}),
            ("events", {"limit": 500}),
            ("sql", {"query": "SELECT * FROM events ORDER BY id", "limit": 1000}),
            ("compare", {"a": str(a), "b": str(b), "limit": 5}),
        ]
    )
    assert {"compare", "what_if", "finding", "events", "sql"} <= set(check.made.values())


def _texts(node: Any) -> list[str]:
    """Every description in a schema, and the titles of the types it names."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                out.append(value)
            elif key == "title" and isinstance(value, str):
                out.append(f'schema(name="{value}")')  # a type named by title: the schema tool
            else:
                out += _texts(value)
    elif isinstance(node, list):
        for item in node:
            out += _texts(item)
    return out


def test_every_call_the_tool_list_and_instructions_name_is_valid(tmp_path: Path) -> None:
    """What a model reads before its first call: the server's instructions, each tool's
    description, the descriptions in its schemas and the types its output names by title
    (each given in full by ``schema``); and what a session with no trace open says."""
    from opscope.mcp.server import INSTRUCTIONS

    check = Checker(Session(Workspace()))
    for name, args in [("list_traces", {}), ("summary", {}), ("ops", {}), ("brief", {})]:
        text, _ = check.text_of(name, args)
        check.follow(text, f"{name} with no trace open")
    check.follow(INSTRUCTIONS, "instructions", depth=1)
    titles = 0
    for name, spec in REG.specs.items():
        check.follow(spec.description, f"{name}'s description", depth=1)
        for where, schema in (("input", spec.input_schema), ("output", spec.output_schema)):
            texts = _texts(schema)
            titles += sum(t.startswith("schema(") for t in texts)
            for text in texts:
                check.follow(text, f"{name}'s {where} schema", depth=1)
    assert titles > 10 and "schema" in check.made.values(), check.made


def test_op_rows_name_calls_device_calls_and_shapes(tmp_path: Path) -> None:
    """The ops text gives both counts under their field names, and by_shapes the shapes."""
    session = Session(Workspace())
    answer(REG, session, "open_trace", {"path": str(write_hostile(tmp_path))})
    result, _ = answer(REG, session, "ops", {"by_shapes": True, "limit": 50})
    rows = [r for r in result.data["rows"] if r.get("input_dims")]
    assert rows, result.data["rows"][:2]
    assert " device_calls | " in result.text and " calls | " in result.text
    assert rows[0]["input_dims"][:20] in result.text
