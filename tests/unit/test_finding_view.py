"""A report's findings as typed objects (analysis.finding_view): read by attribute, still the
JSON report's dicts."""

from __future__ import annotations

import json
import pickle
from typing import Any

import orjson
import pytest

import opscope
from opscope.analysis.finding_view import Finding, typed
from opscope.trace import load_document


def _report() -> Any:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i * 100,
         "dur": 90}
        for i in range(20)
    ]  # fmt: skip
    return opscope.analyze(load_document({"traceEvents": events}), roofline=False)


def test_findings_read_by_attribute_and_as_dicts() -> None:
    report = _report()
    assert report.findings, "the trace must give a finding"
    f = report.findings[0]
    assert isinstance(f, Finding) and isinstance(f, dict)
    assert (f.id, f.kind, f.severity, f.title) == (f["id"], f["kind"], f["severity"], f["title"])
    assert f.time_at_stake_us == f["time_at_stake_us"] and f.share == f["share"]
    assert f.step_savings_us == f.get("step_savings_us") and f.rank is None
    assert f.evidence == f["evidence"] and f.details == f["details"]
    assert repr(f).startswith(f"Finding({f.id} {f.severity} {f.kind}: ")
    # still the report's JSON object
    assert (
        json.loads(json.dumps(f))
        == orjson.loads(orjson.dumps(f))
        == report.to_dict()["findings"][0]
    )
    back = pickle.loads(pickle.dumps(f))
    assert back == f and type(back) is Finding


def test_missing_keys_read_as_none_or_empty() -> None:
    f = Finding({"id": "F1", "kind": "x", "severity": "info", "title": "t"})
    assert f.step_savings_us is None and f.rank is None and f.evidence == []
    assert f.details == {} and f.time_at_stake_us == 0.0
    with pytest.raises(KeyError):
        _ = Finding({}).kind
    plain = {"id": "F2", "kind": "y", "severity": "low", "title": "u", "rank": 3}
    [g] = typed([plain])
    assert g.rank == 3 and g == plain
