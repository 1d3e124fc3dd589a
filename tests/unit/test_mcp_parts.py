"""The MCP server's parts: quoting of trace strings, the size cap, the argument checks (held
against jsonschema on generated calls) and the tools' schemas."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")

import jsonschema

from opscope.mcp import budget, untrusted
from opscope.mcp.registry import ToolError, check_arguments, hoist_defs
from opscope.mcp.server import registry

REG = registry()


# -- quoting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "a\nb",
        "x`y``z```",
        "\u202eevil\u2066",
        "zero\u200bwidth",
        "nul\x00del\x7f",
        "line\u2028sep",
        "tab\tcr\r",
    ],
)
def test_clean_is_one_line_without_backticks_or_hidden_characters(raw: str) -> None:
    out = untrusted.clean(raw)
    assert "\n" not in out and "\r" not in out and "`" not in out
    assert not re.search("[\x00-\x1f\x7f\u200b\u2028\u202e\u2066]", out)


def test_clean_cuts_and_says_by_how_much() -> None:
    out = untrusted.clean("a" * 500, 100)
    assert out == "a" * 100 + "...[+400 chars]"


@given(st.text(max_size=300))
def test_a_quoted_string_cannot_leave_its_code_span(raw: str) -> None:
    q = untrusted.quote(raw)
    assert q.startswith("`") and q.endswith("`") and q.count("`") == 2
    assert "\n" not in q


def test_block_is_fenced_as_trace_data() -> None:
    b = untrusted.block([untrusted.clean("```\nescape")])
    assert b.startswith("```trace-data\n") and b.endswith("\n```") and b.count("```") == 2


# -- the size cap ------------------------------------------------------------------------


def _page(n: int, width: int = 200) -> dict[str, Any]:
    return {
        "rows": [{"name": "x" * width, "i": i} for i in range(n)],
        "total": n,
        "offset": 10,
        "next_offset": None,
        "truncated": False,
    }


def test_fit_page_keeps_what_fits_and_points_at_the_rest() -> None:
    page = budget.fit_page(_page(2000), max_bytes=20_000)
    kept = len(page["rows"])
    assert 0 < kept < 2000
    assert budget.size(page) <= 20_000
    assert page["next_offset"] == 10 + kept and page["truncated"] is True
    # one more row would not have fitted
    assert budget.size({**page, "rows": _page(kept + 1)["rows"]}) > 20_000


def test_fit_result_cuts_a_page_by_rows_never_by_halving() -> None:
    # the server's last check: a page it must cut keeps next_offset = offset + rows kept
    # (halving its rows as any other list would leave next_offset pointing past them)
    out = budget.fit_result({"trace": "t1", **_page(2000)}, max_bytes=20_000)
    assert out["next_offset"] == 10 + len(out["rows"]) and "trimmed" not in out
    assert budget.size(out) <= 20_000


def test_cutting_twice_counts_what_the_first_cut_left_out() -> None:
    once = budget.clip_strings("a" * 200_000, limit=1000)
    assert once.endswith("...[+199000 chars]")
    assert budget.clip_strings(once, limit=1000) == once  # idempotent
    assert untrusted.clean(once, 100) == "a" * 100 + "...[+199900 chars]"
    assert untrusted.cut("b" * 50 + "...[+7 chars]", 60) == "b" * 50 + "...[+7 chars]"


def test_fit_page_leaves_a_small_page_alone() -> None:
    page = _page(3)
    assert budget.fit_page(page) == page


def test_fit_halves_the_largest_lists_and_names_them() -> None:
    data = {"a": list(range(50_000)), "b": {"c": ["y" * 50] * 10}, "d": 1}
    out = budget.fit(data, max_bytes=30_000)
    assert budget.size(out) <= 30_000
    assert out["truncated"] is True and out["trimmed"] == ["a"]
    assert out["b"]["c"] == data["b"]["c"] and out["d"] == 1
    assert len(data["a"]) == 50_000  # the input is not changed


def test_clip_strings_cuts_keys_and_values() -> None:
    out = budget.clip_strings({"k" * 2000: ["v" * 2000]}, limit=10)
    (key,) = out
    assert key == "k" * 10 + "...[+1990 chars]" and out[key] == ["v" * 10 + "...[+1990 chars]"]


def test_fit_text_cuts_at_a_line_and_closes_an_open_fence() -> None:
    text = "head\n```trace-data\n" + "\n".join(f"row {i}" for i in range(5000)) + "\n```"
    out = budget.fit_text(text, limit=2000)
    assert len(out) <= 2000 and out.count("```") % 2 == 0 and "text cut" in out


def test_plain_makes_numpy_plain() -> None:
    import numpy as np

    assert budget.plain({"a": np.arange(3), "b": np.int64(4)}) == {"a": [0, 1, 2], "b": 4}


# -- arguments ---------------------------------------------------------------------------


def test_defaults_are_filled_in() -> None:
    got = check_arguments(REG.get("ops"), {})
    assert got == {
        "trace": None,
        "sort": None,
        "limit": 20,
        "offset": 0,
        "name_filter": None,
        "by_shapes": False,
    }


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("ops", {"x": 1}, "unknown argument 'x'; it takes: trace, sort"),
        ("ops", {"limit": True}, "expected integer, got bool"),
        ("ops", {"limit": 1.5}, "expected integer"),
        ("ops", {"offset": -1}, "below the minimum 0"),
        ("sql", {}, "missing required argument 'query'"),
        ("sql", {"query": None}, "'query' must not be null"),
        ("finding", {"id": "G1"}, "does not match"),
        ("what_if", {"changes": []}, "at least 1 items"),
        ("what_if", {"changes": [3]}, "changes[0]: expected string"),
        ("events", {"t0": "soon"}, "expected number"),
    ],
)
def test_refusals_name_the_argument_and_the_fix(
    tool: str, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match=re.escape(message)):
        check_arguments(REG.get(tool), args)


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=2_000_000_000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["F1", "5:8", "device_us", "high", "aten::mm=0.5", "t1", "calls"]),
    st.lists(st.one_of(st.integers(-2, 2000), st.text(max_size=4)), max_size=3),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(REG.specs)),
    st.dictionaries(
        st.sampled_from(
            [*sorted({k for s in REG.specs.values() for k in s.input_schema["properties"]}), "junk"]
        ),
        _VALUES,
        max_size=4,
    ),
)
def test_the_checks_agree_with_jsonschema(tool: str, args: dict[str, Any]) -> None:
    """What the server refuses is exactly what the published schema refuses (a null for an
    optional argument counts as leaving it out)."""
    spec = REG.get(tool)
    required = set(spec.input_schema.get("required", []))
    known = set(spec.input_schema["properties"])
    published = {k: v for k, v in args.items() if v is not None or k in required or k not in known}
    valid = jsonschema.Draft202012Validator(spec.input_schema).is_valid(published)
    try:
        check_arguments(spec, args)
        accepted = True
    except ToolError:
        accepted = False
    assert accepted == valid, (tool, args)


# -- schemas -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REG.specs))
def test_input_schemas_are_closed_and_valid(name: str) -> None:
    schema = REG.get(name).input_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    for prop in schema["properties"].values():
        assert "type" in prop and prop.get("description"), prop


@pytest.mark.parametrize("name", sorted(REG.specs))
def test_output_schemas_are_valid_and_their_refs_resolve(name: str) -> None:
    schema = REG.get(name).output_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    text = str(schema)
    for ref in re.findall(r"#/\$defs/([A-Za-z0-9_]+)", text):
        assert ref in schema.get("$defs", {}), (name, ref)
    assert "trace" in schema["properties"]


def test_hoist_defs_moves_nested_defs_to_the_root() -> None:
    inner = {"$ref": "#/$defs/Row", "$defs": {"Row": {"type": "object"}}}
    out = hoist_defs({"type": "object", "properties": {"rows": {"items": inner}}})
    assert out["$defs"] == {"Row": {"type": "object"}}
    assert out["properties"]["rows"]["items"] == {"$ref": "#/$defs/Row"}


def test_every_tool_is_described_and_titled() -> None:
    for spec in REG.specs.values():
        assert len(spec.description) > 40 and spec.title
    wanted = {
        "open_trace",
        "summary",
        "ops",
        "kernels",
        "findings",
        "finding",
        "chain",
        "events",
        "sql",
        "compare",
        "roofline",
    }
    assert wanted <= set(REG.specs)
