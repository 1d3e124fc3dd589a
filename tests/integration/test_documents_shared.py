"""The documents of real traces (../shared) against their JSON Schemas and types: reports of
single-rank traces from several vendors, of a folder job of two ranks and of the Neuron
fixtures; their rank reports and rooflines; diffs of real pairs (across vendors too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from golden_reports import CPU_PEAKS
from opscope.analysis.diff import diff_reports
from opscope.analysis.job_report import rank_report
from opscope.analysis.pipeline import analyze
from opscope.analysis.report import Report
from schema_checks import check_document

pytestmark = pytest.mark.shared

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
TRACES = (
    "traces/cuda/a100_nccl_rank0_of2.json.gz",
    "traces/cuda/critical_path_alexnet.json.gz",
    "traces/cpu/rank_not_found.json.gz",
    "traces/rocm/mi300x_models/bert_small.json.gz",
    "traces/rocm/torch_compile_triton.json.gz",
    "traces/mtia/mtia_inference_rank0.json.gz",
    "traces/cuda/sampled_world128",  # a folder job of two ranks
    "neuron_fixtures/builtin",
    "neuron_fixtures/compiled",
)
PAIRS = (
    ("traces/cuda/diff_pair/control_a100.json.gz", "traces/cuda/diff_pair/test_v100.json.gz"),
    (
        "traces/cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz",
        "traces/cuda/dataloader_pair/resnet50_workers4.pt.trace.json.gz",
    ),
    ("traces/rocm/mi300x_models/bert_small.json.gz", "traces/cuda/critical_path_alexnet.json.gz"),
)

_cache: dict[str, Report] = {}


def report_of(rel: str) -> Report:
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"../shared/{rel} not present")
    if rel not in _cache:
        _cache[rel] = analyze(path, peaks=CPU_PEAKS)
    return _cache[rel]


@pytest.mark.parametrize("rel", TRACES)
def test_report_rank_reports_and_roofline_validate(rel: str) -> None:
    report = report_of(rel)
    doc = report.to_dict()
    check_document(doc, "report")
    assert "critical_path" in doc  # what every report carries now
    ranks = report.ranks or [rank_report(report)]
    for rr in ranks:
        check_document(rr.to_dict(), "rank_report")
    if report.roofline is not None:
        check_document(report.roofline.to_dict(), "roofline")


def test_the_job_and_the_neuron_reports_have_their_sections() -> None:
    job = report_of("traces/cuda/sampled_world128").to_dict()
    assert {"ranks", "distributed"} <= set(job) and job["critical_path"]["scope"] == "job"
    neuron = report_of("neuron_fixtures/builtin").to_dict()
    assert neuron["neuron"]["executions"]


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: Path(p[1]).name)
def test_diff_validates(pair: tuple[str, str]) -> None:
    a, b = (report_of(rel) for rel in pair)
    check_document(diff_reports(a, b), "diff")
    check_document(diff_reports(b, a), "diff")
