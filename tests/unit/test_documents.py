"""The documents' types and JSON Schemas (``opscope.documents``) against real documents.

Every golden report (``tests/golden``, in the repository) validates against the report's JSON
Schema and fits its type key by key (``schema_checks.undeclared``: no key the type does not
declare, no required key missing).  Fresh documents of an in-memory job of three ranks (one
late at every collective) and of a CPU-only trace cover what the goldens predate: every
section of a job report, the rank reports, the roofline, the diff, the dependency chain and
the explorer's report.  The schemas themselves are checked as Draft 2020-12 schemas that let
keys be added.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from jsonschema import Draft202012Validator

from distjobs import write_nccl_job
from golden_reports import CPU_PEAKS, GOLDEN, NEW_SECTIONS, NEW_SUMMARY_KEYS
from opscope import documents
from opscope.analysis.diff import diff_reports
from opscope.analysis.job_report import rank_report
from opscope.analysis.peaks import builtin_table
from opscope.analysis.pipeline import analyze
from opscope.analysis.report import Report
from opscope.documents import (
    DOCUMENTS,
    Chain,
    UnknownDocumentError,
    document_id,
    json_schema,
    schema_of,
)
from opscope.documents.schema import MODULES, field_docs
from opscope.trace import load, load_document
from schema_checks import as_written, check_document, is_typeddict, schema_errors, undeclared

GOLDENS = sorted(GOLDEN.glob("*.report.json.gz"))
MCP_NAMES = (
    "Report",
    "Summary",
    "OpRow",
    "OpShapeRow",
    "KernelRow",
    "StepRow",
    "Finding",
    "RooflineRow",
    "Roofline",
    "CriticalPath",
    "Chain",
    "Diff",
    "Device",
    "Source",
    "Window",
)


def _golden(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(gzip.decompress(path.read_bytes()))
    return data


# -- the goldens --------------------------------------------------------------------------------


def test_goldens_are_there() -> None:
    reports = [p for p in GOLDENS if "refused" not in _golden(p)]
    assert len(reports) >= 30


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: p.name.split(".report")[0])
def test_golden_report_validates_and_fits_its_type(path: Path) -> None:
    doc = _golden(path)
    if "refused" in doc:
        pytest.skip("a trace opscope refuses: no report")
    assert not schema_errors(doc, "report")
    assert not undeclared(doc, documents.Report)


def test_keys_added_since_the_goldens_are_not_required() -> None:
    """A reader of ``opscope.report/1`` meets documents of every version of opscope: what
    was added to the version since it was published cannot be required."""
    report = DOCUMENTS["report"]
    assert not (NEW_SECTIONS & report.__required_keys__)
    assert not (NEW_SUMMARY_KEYS & documents.Summary.__required_keys__)
    assert "step_savings_us" not in documents.Finding.__required_keys__


# -- the checks themselves ---------------------------------------------------------------------


def test_the_checks_catch_an_undeclared_key_a_missing_one_and_a_wrong_type() -> None:
    doc = _golden(GOLDEN / "traces__cuda__a100_nccl_rank0_of2.json.gz.report.json.gz")
    bad = copy.deepcopy(doc)
    bad["summary"]["made_up_us"] = 1.0
    del bad["ops"][0]["calls"]
    bad["findings"][0]["details"]["not_a_detail"] = 1
    bad["kernels"][0]["device_us"] = "fast"
    bad["roofline"]["ops"][0]["extra_column"] = None
    found = undeclared(bad, documents.Report)
    assert "$.summary.made_up_us: not declared in Summary" in found
    assert "$.ops[0]: required key 'calls' of OpRow missing" in found
    assert "$.findings[0].details.not_a_detail: not declared in FindingDetails" in found
    assert "$.roofline.ops[0].extra_column: not declared in RooflineRow" in found
    assert any(f.startswith("$.kernels[0].device_us: str") for f in found)
    errors = schema_errors(bad, "report")
    assert any("'calls' is a required property" in e for e in errors)
    assert any("'fast' is not of type 'number'" in e for e in errors)
    # added keys are allowed by the schema (the contract), only the type walk flags them
    assert not any("made_up_us" in e for e in errors)


# -- fresh documents ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """Three ranks of an NCCL job (synthetic Kineto documents); rank 1 arrives 200 µs late at
    each of its three all_reduces; each rank's step ends in a sync on its device."""
    folder = tmp_path_factory.mktemp("job")
    write_nccl_job(folder, world=3, late_rank=1, late_us=200.0, sync=True, comm_stream=8)
    return analyze(folder)


def cpu_doc() -> dict[str, Any]:
    """Two profiler steps of CPU ops (a CPU-only trace: the device is the CPU)."""
    ev: list[dict[str, Any]] = []
    t = 0.0
    for s in range(2):
        ev.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1,
             "tid": 1, "ts": t, "dur": 300.0}
        )  # fmt: skip
        for i in range(3):
            ev.append(
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                 "ts": t + 10 + 90 * i, "dur": 80.0,
                 "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}}
            )  # fmt: skip
        t += 400.0
    return {"traceEvents": ev}


@pytest.fixture(scope="module")
def cpu_report() -> Report:
    return analyze(load_document(cpu_doc(), "cpu.json"), peaks=CPU_PEAKS)


def test_job_report_validates_with_every_section(job: Report) -> None:
    doc = job.to_dict()
    check_document(doc, "report")
    assert {"ranks", "distributed", "critical_path", "roofline"} <= set(doc)
    assert doc["critical_path"]["scope"] == "job" and doc["critical_path"]["jumps"]
    dist = doc["distributed"]
    assert dist["instances"] and dist["stragglers"] and dist["by_collective"][0]["instances"]
    kinds = {f["kind"] for f in doc["findings"]}
    assert "straggler" in kinds  # a job's own finding: rank None, no step savings
    assert set(documents.Summary.__annotations__) <= set(doc["summary"])


def test_rank_reports_validate(job: Report) -> None:
    assert len(job.ranks) == 3
    for rr in job.ranks:
        doc = rr.to_dict()
        check_document(doc, "rank_report")
        assert doc["collectives"] and doc["extra"]["critical_path"]["scope"] == "rank"


def test_roofline_and_diff_validate(job: Report, cpu_report: Report) -> None:
    assert job.roofline is not None
    check_document(job.roofline.to_dict(), "roofline")
    check_document(diff_reports(job, job), "diff")
    diff = diff_reports(cpu_report, job)  # across devices, with communication on one side
    check_document(diff, "diff")
    assert diff["cross_device"] and diff["only_in_b"]


def test_cpu_report_rank_report_and_roofline_validate(cpu_report: Report) -> None:
    doc = cpu_report.to_dict()
    check_document(doc, "report")
    assert doc["device"]["kind"] == "cpu" and "note" in doc["device"]
    assert doc["device"]["peaks"]["key"] == "cpu"
    check_document(rank_report(cpu_report).to_dict(), "rank_report")
    assert cpu_report.roofline is not None
    check_document(cpu_report.roofline.to_dict(), "roofline")


def test_a_report_without_roofline_or_findings_validates(job: Report) -> None:
    trace = load(Path(job.ranks[0].source["paths"][0]))
    bare = analyze(trace, roofline=False, findings=False).to_dict()
    check_document(bare, "report")
    assert "roofline" not in bare and "flops" not in bare["ops"][0]


def test_dependency_chain_fits_chain(job: Report) -> None:
    from opscope.service import Workspace

    ws = Workspace()
    ws.open(Path(job.ranks[0].source["paths"][0]))
    found = 0
    for name in ("aten::mm", "cudaLaunchKernel", "c10d::allreduce_"):
        ids = ws.occurrences(name).get("ids", [])
        for event_id in list(ids)[:2]:
            chain = as_written(ws.chain(int(event_id)))
            errors = list(Draft202012Validator(schema_of(Chain)).iter_errors(chain))
            assert not errors, errors[:3]
            assert not undeclared(chain, Chain)
            found += 1
    assert found >= 4
    kernel = as_written(ws.chain(int(ws.occurrences("aten::mm")["ids"][0])))
    assert any(h["role"] == "device execution" for p in kernel["paths"] for h in p)


def test_the_explorers_report_validates(job: Report) -> None:
    from opscope.explorer.data import Session, Side

    trace = load(Path(job.ranks[0].source["paths"][0]))
    doc = Session(Side.from_trace(trace)).report()
    check_document(doc, "report")
    assert doc["explorer"]["schema"] == "opscope.explorer/1"
    assert any("t0" in e for f in doc["findings"] for e in f["evidence"])


def test_the_shipped_peaks_table_validates() -> None:
    table = builtin_table()
    check_document(table, "peaks")
    for key, entry in table["devices"].items():
        missing = {"name", "match", "tflops", "bandwidth_gbs", "source"} - set(entry)
        assert not missing, (key, missing)


# -- the schemas --------------------------------------------------------------------------------


def _walk(node: Any) -> Any:
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_schema_is_a_draft_2020_12_schema_that_lets_keys_be_added(name: str) -> None:
    schema = json_schema(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    ident = document_id(DOCUMENTS[name])
    assert ident == f"opscope.{name}/1" and schema["title"] == ident
    assert schema["$id"] == f"urn:opscope:{name}/1"
    assert schema["type"] == "object" and schema["description"]
    assert schema["properties"]["schema"] == {"enum": [ident]}
    defs = schema["$defs"]
    for node in _walk(schema):
        if isinstance(node, dict):
            assert node.get("additionalProperties") is not False
            ref = node.get("$ref")
            if isinstance(ref, str):
                assert ref.startswith("#/$defs/") and ref.split("/")[-1] in defs, ref
    json.dumps(schema)  # plain JSON


def test_a_document_of_another_kind_is_refused() -> None:
    doc = as_written(builtin_table())
    assert schema_errors(doc, "report")
    assert schema_errors({**doc, "schema": "opscope.peaks/2"}, "peaks")


def test_schema_of_each_type_the_mcp_server_uses_is_self_contained() -> None:
    for name in MCP_NAMES:
        tp = getattr(documents, name)
        assert is_typeddict(tp), name
        schema = schema_of(tp)
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["title"] == name
        text = json.dumps(schema)
        for node in _walk(schema):
            if isinstance(node, dict) and isinstance(node.get("$ref"), str):
                assert node["$ref"].split("/")[-1] in schema.get("$defs", {}), (name, text[:200])
    rows = schema_of(list[documents.OpRow])
    assert rows["type"] == "array" and "OpRow" in rows["$defs"]
    assert schema_of(documents.Report) is not schema_of(documents.Report)  # fresh copies


def test_field_docstrings_become_descriptions() -> None:
    report = json_schema("report")
    op = report["$defs"]["OpRow"]["properties"]
    assert "launched directly" in op["device_self_us"]["description"]  # inherited field
    assert "\n" not in op["device_self_us"]["description"]
    assert "roofline" in op["flops"]["description"]
    assert report["properties"]["findings"]["description"].startswith("Ranked")
    finding = report["$defs"]["Finding"]["properties"]
    assert "critical path" in finding["step_savings_us"]["description"]


def test_type_names_are_unique_across_the_modules() -> None:
    import importlib

    seen: dict[str, str] = {}
    for modname in MODULES:
        module = importlib.import_module(modname)
        for attr, value in vars(module).items():
            if is_typeddict(value) and value.__module__ == modname:
                assert attr not in seen, f"{attr} in {seen.get(attr)} and {modname}"
                seen[attr] = modname
    assert set(field_docs()) >= set(seen)
    for name in MCP_NAMES:
        assert name in seen


def test_unknown_document_names_the_known_ones() -> None:
    with pytest.raises(UnknownDocumentError) as caught:
        json_schema("repotr")
    text = str(caught.value)
    assert "'repotr'" in text
    for name in DOCUMENTS:
        assert name in text
    from opscope.errors import OpscopeError

    assert isinstance(caught.value, OpscopeError)
