"""Every shared trace still gives the report frozen in ``tests/golden`` (see golden_reports)."""

from __future__ import annotations

import gzip

import orjson
import pytest

from golden_reports import (
    SHARED,
    cases,
    differences,
    golden_path,
    report_of,
    ties_in_one_order,
    without_new_findings,
)

CASES = cases()


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared not present (a user's clone)")
@pytest.mark.parametrize("pack_args", [False, True], ids=["args", "packed_args"])
@pytest.mark.parametrize("rel", CASES or ["<none>"])
def test_report_matches_golden(rel: str, pack_args: bool) -> None:
    """Also with the ``args`` text packed out of the event table, as ``opscope report`` runs
    the analysis: every reader of it goes through the index."""
    path = golden_path(rel)
    assert path.is_file(), f"no golden report for {rel}: python tests/golden_reports.py --write"
    want = orjson.loads(gzip.decompress(path.read_bytes()))
    got = report_of(rel, pack_args=pack_args)
    diffs = differences(
        ties_in_one_order(without_new_findings(want)), ties_in_one_order(without_new_findings(got))
    )
    assert not diffs, f"{rel}: the report changed:\n" + "\n".join(diffs)


def test_differences_sees_changes() -> None:
    a = {"x": [1, 2.0, {"y": "s", "event_ids": [1]}], "z": 1}
    assert differences(a, a) == []
    assert differences(a, {"x": [1, 2.0, {"y": "s", "event_ids": [9]}], "z": 1}) == []
    assert differences(a, {"x": [1, 2.0 + 1e-6, {"y": "s"}], "z": 1}) == ["$.x[1]: 2.0 -> 2.000001"]
    assert differences(a, {"x": [1, 2.0, {"y": "t"}], "z": 1}) == ["$.x[2].y: 's' -> 't'"]
    assert differences(a, {"x": [1, 2.0], "z": 1}) == ["$.x: 3 items, now 2"]
    assert differences(a, {"x": a["x"]}) == ["$.z: missing"]
    assert differences({"n": 1}, {"n": 1.0}) == []
    assert differences({"n": 1}, {"n": True}) == ["$.n: 1 -> True"]
    # a section added on purpose is allowed at the top level only
    assert differences({"a": {}}, {"a": {}, "neuron": {}}) == []
    assert differences({"a": {}}, {"a": {"neuron": 1}}) == ["$.a.neuron: new key"]


def test_ties_in_one_order_ignores_only_the_order_of_equals() -> None:
    a = {"name": "aten::add", "device_self_us": 1.0, "cpu_total_us": 2.0, "input_dims": "[1]"}
    b = {**a, "input_dims": "[2]"}
    c = {**a, "cpu_total_us": 3.0}
    doc = {"op_shapes": [c, a, b], "roofline": {"op_shapes": [a, b]}}
    swapped = {"op_shapes": [c, b, a], "roofline": {"op_shapes": [b, a]}}
    assert ties_in_one_order(doc) == ties_in_one_order(swapped)
    # a row ranked apart (another CPU total) still has its place
    moved = {"op_shapes": [a, b, c], "roofline": {"op_shapes": [a, b]}}
    assert differences(ties_in_one_order(doc), ties_in_one_order(moved))
    # a tied row that changed is still a change
    changed = {"op_shapes": [c, a, {**b, "calls": 2}], "roofline": {"op_shapes": [a, b]}}
    assert differences(ties_in_one_order(doc), ties_in_one_order(changed))
