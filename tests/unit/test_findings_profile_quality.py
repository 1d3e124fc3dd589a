"""profile_quality: missing device events, empty window, truncation, skipped events,
incomplete last step."""

from __future__ import annotations

from test_findings_kit import Doc, context, run_rule, shared

from opscope.analysis.findings import rules
from opscope.trace import load_document


def test_launches_without_kernels_fire_high() -> None:
    d = Doc()
    d.step(1, 0, 100)
    for i in range(5):
        d.op("aten::add", 10 + 10 * i, 8)
        d.runtime("cudaLaunchKernel", 11 + 10 * i, 4)
    found = run_rule("profile_quality", d.trace())
    assert [f.severity for f in found] == ["high"]
    assert "No device executions" in found[0].title


def test_accelerator_run_without_device_events_fires() -> None:
    d = Doc(gpu=False)
    d.step(1, 0, 100)
    d.op("aten::add", 10, 8)
    found = run_rule("profile_quality", d.trace(), {"device": {"kind": "cuda"}})
    assert found and "cuda device" in found[0].title


def test_empty_window() -> None:
    d = Doc()
    d.step(1, 0, 100)
    d.op("aten::add", 10, 8)
    d.launch(11, 4, "k", 20, 2)
    (rule,) = [r for r in rules() if r.name == "profile_quality"]
    found = rule.run(context(d.trace(), steps=(5, 6)))
    assert any("window is empty" in f.title for f in found)


def test_skipped_and_truncated() -> None:
    d = Doc()
    d.step(1, 0, 100)
    d.op("aten::add", 10, 8)
    d.launch(11, 4, "k", 20, 2)
    doc = d.doc()
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "bad", "pid": 1, "tid": 1})
    trace = load_document(doc)
    trace.meta.warnings.append("trace.json: cut after 1234 bytes; recovered 3 events")
    titles = [f.title for f in run_rule("profile_quality", trace)]
    assert any("malformed" in t for t in titles), titles
    assert any("truncated" in t for t in titles), titles


def test_incomplete_last_step() -> None:
    d = Doc()
    t = 0.0
    for i in range(4):
        d.step(i, t, 1000)
        for k in range(10 if i < 3 else 2):
            d.op("aten::add", t + 10 + 20 * k, 8)
            d.launch(t + 11 + 20 * k, 4, "k", t + 20 + 20 * k, 5)
        t += 1000
    found = run_rule("profile_quality", d.trace())
    assert len(found) == 1 and "incomplete" in found[0].title


def test_clean_shared_trace_does_not_fire() -> None:
    assert run_rule("profile_quality", shared("cuda/a100_nccl_rank0_of2.json.gz")) == []
