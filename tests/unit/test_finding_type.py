"""One finding type from the rule to the JSON (analysis.findings.finding): a rule's findings, a
job's own findings and a report's, read back from a rank report, are all :class:`Finding`, and
their JSON objects are the report's, keys in the order they always had."""

from __future__ import annotations

import dataclasses
import json
import pickle
import typing
from pathlib import Path
from typing import Any

import orjson
import pytest

import opscope
from opscope import documents
from opscope.analysis.findings import Context, rules, run_rules
from opscope.analysis.findings.finding import (
    CORE_KEYS,
    JOB_KEYS,
    LATER_KEYS,
    RULE_KEYS,
    Evidence,
    Finding,
    make_finding,
)
from opscope.analysis.job import RankReport
from opscope.analysis.job_findings import straggler
from opscope.analysis.pipeline import analyze
from opscope.trace import load_document
from trace_checks import X

# the key orders of today's reports (the goldens' JSON, written before the type existed)
RULE_FINDING = [*RULE_KEYS, "step_savings_us"]
RULE_FINDING_IN_A_JOB = [*RULE_FINDING, "rank", "rank_finding_id"]
JOB_FINDING = [*CORE_KEYS, "rank", "id", "step_savings_us"]  # numbered, then measured
RANKS_OWN_JOB_FINDING = [*CORE_KEYS, "rank", "step_savings_us", "id"]  # measured, then numbered


def _mm_trace() -> Any:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i * 100,
         "dur": 90}
        for i in range(20)
    ]  # fmt: skip
    return load_document({"traceEvents": events})


def _rank(rank: int, kernel_us: float, steps: int = 5) -> dict[str, Any]:
    events: list[dict[str, Any]] = []
    for i in range(steps):
        t = 2000.0 * i
        args = {"correlation": i + 1}
        events += [
            X(f"ProfilerStep#{i + 1}", t, 2000, "user_annotation"),
            X("aten::mm", t, 1, args={}),
            X("cudaLaunchKernel", t, 1, "cuda_runtime", args=args),
            X("gemm_kernel", t + 10, kernel_us, "kernel", pid=0, tid=7, args=args),
        ]
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": 3},
        "traceEvents": events,
    }


@pytest.fixture()
def job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A job of three ranks, rank 2 computing half again as much (a load imbalance)."""
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "job"
    folder.mkdir()
    for r, k in enumerate([1000, 1000, 1500]):
        (folder / f"rank{r}.json").write_text(json.dumps(_rank(r, k)))
    return folder


def test_a_rules_findings_are_of_its_kind_and_numbered() -> None:
    trace = _mm_trace()
    rep = analyze(trace, findings=False, roofline=False)
    ctx = Context(trace=trace, op_table=rep.ops, timeline=rep.timeline, steps=rep.steps)
    for rule in rules():
        assert all(type(f) is Finding and f.kind == rule.name for f in rule.run(ctx))
    found = run_rules(ctx)
    assert found and [f.id for f in found] == [f"F{i}" for i in range(1, len(found) + 1)]
    assert all(list(f.to_dict()) == list(RULE_KEYS) for f in found)


def test_a_reports_findings_are_the_same_type_and_its_json() -> None:
    report = opscope.analyze(_mm_trace(), roofline=False)
    doc = report.to_dict()
    assert report.findings and all(type(f) is Finding for f in report.findings)
    for f, d in zip(report.findings, doc["findings"], strict=True):
        assert f.to_dict() == d and list(d) == RULE_FINDING
        assert f == d and d == f  # read as the JSON object
        assert (f.id, f.kind, f.title) == (f["id"], f["kind"], f["title"])
        assert f.get("rank") is None and "rank" not in f and f.rank is None
        assert f["evidence"] == [e.to_dict() for e in f.evidence] == d["evidence"]
        assert f.step_savings_us == d["step_savings_us"] and dict(f) == d
    assert json.loads(json.dumps(doc)) == orjson.loads(orjson.dumps(doc))
    f = report.findings[0]
    assert repr(f).startswith(f"Finding({f.id} {f.severity} {f.kind}: ")
    back = pickle.loads(pickle.dumps(f))
    assert type(back) is Finding and back == f and back.layout == f.layout


def test_a_job_finding_and_a_rank_report_round_trip(job: Path) -> None:
    report = analyze(job, roofline=False)
    doc = report.to_dict()
    assert all(type(f) is Finding for f in report.findings)
    assert [f.to_dict() for f in report.findings] == doc["findings"]
    (imbalance,) = [f for f in report.findings if f.kind == "load_imbalance"]
    assert list(imbalance.to_dict()) == JOB_FINDING and imbalance.rank is None
    ranks_own = [f for f in report.findings if f.rank is not None]
    assert ranks_own and all(list(f) == RULE_FINDING_IN_A_JOB for f in ranks_own)
    for rr in report.ranks:
        d = rr.to_dict()
        back = RankReport.from_dict(orjson.loads(orjson.dumps(d)))
        assert all(type(f) is Finding for f in back.findings)
        assert back.findings == rr.findings and orjson.dumps(back.to_dict()) == orjson.dumps(d)


def test_a_finding_made_from_rank_reports_keeps_the_order_it_gains_keys() -> None:
    row = {"rank": 1, "caused_wait_us": 3000.0, "times_last": 4}
    f = straggler(row, 3, 10_000.0)
    assert type(f) is Finding and f.kind == "straggler" and list(f) == list(JOB_KEYS)
    measured = f.updated(step_savings_us=5.0).updated(id="F2")
    assert list(measured) == RANKS_OWN_JOB_FINDING
    numbered = f.updated(id="F1").updated(step_savings_us=None)
    assert list(numbered) == JOB_FINDING and numbered["step_savings_us"] is None
    assert f.get("id") is None and "id" not in f  # the original is unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.id = "F9"  # type: ignore[misc]
    assert Finding.from_dict(measured.to_dict()).to_dict() == measured.to_dict()
    assert list(Finding.from_dict(measured.to_dict())) == RANKS_OWN_JOB_FINDING
    with pytest.raises(ValueError, match="unknown key"):
        Finding.from_dict({**f.to_dict(), "extra": 1})


def test_evidence_round_trips_both_clocks() -> None:
    for d in (
        {"event_ids": [1, 2]},
        {"event_ids": [], "start_ns": 5, "end_ns": 9, "note": "n"},
        {"event_ids": [3], "t0": 1, "t1": 2, "note": "late"},
    ):
        assert Evidence.from_dict(d).to_dict() == d


def test_share_and_severity_follow_the_wall() -> None:
    f = make_finding(1000.0, title="t", time_at_stake_us=50.0, recommendation="r")
    assert (f.share, f.severity, f.kind, f.evidence) == (0.05, "medium", "", ())
    assert make_finding(0.0, title="t", time_at_stake_us=5.0, recommendation="r").share == 0.0


def test_the_document_type_names_the_same_keys() -> None:
    """The report's JSON Schema (documents.Finding) describes the keys the type writes: the
    ones every finding has are required there, the ones it gains later are not."""
    hints = typing.get_type_hints(documents.Finding)
    assert list(hints) == ["id", *CORE_KEYS, *LATER_KEYS[1:]]
    assert documents.Finding.__required_keys__ == frozenset(RULE_KEYS)
    fields = {f.name for f in dataclasses.fields(Finding)}
    assert set(hints) <= fields and fields - set(hints) == {"fix", "layout"}
