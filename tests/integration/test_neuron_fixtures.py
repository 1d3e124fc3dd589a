"""Neuron ingestion on the shared fixtures: every number of each scenario's expected.json.

The fixtures (``../shared/neuron_fixtures``) are synthetic, schema-exact Neuron Explorer
outputs of the RMSNorm study (builtin ``torch.rms_norm`` and ``torch.compile`` of the naive
version).  A user's clone has no ``../shared``: the tests skip then.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from opscope.analysis.diff import diff_reports
from opscope.analysis.neuron_engines import neuron_engines
from opscope.analysis.pipeline import analyze
from opscope.trace import load

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "neuron_fixtures"
pytestmark = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason="../shared/neuron_fixtures not present (a user's clone)"
)
SCENARIOS = ("builtin", "compiled")


def expected(scenario: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / scenario / "expected.json").read_text())
    return data


@pytest.fixture(scope="module", params=SCENARIOS)
def case(request: pytest.FixtureRequest) -> tuple[str, Any, dict[str, Any]]:
    sc = str(request.param)
    return sc, analyze(FIXTURES / sc), expected(sc)


def _rows(trace: Any, where: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = trace.sql(f"SELECT * FROM events WHERE {where}").to_pylist()
    return rows


def test_device_time_and_cpu_time_per_op(case: tuple[str, Any, dict[str, Any]]) -> None:
    _, report, exp = case
    for op in exp["ops"]:
        top = report.ops.row(op["name"])
        assert top is not None
        assert top.cpu_total_us == pytest.approx(op["cpu_total_us"], abs=1e-9)
        assert top.device_total_us == pytest.approx(op["device_us"], abs=1e-9)
        # the device time sits on the innermost op that dispatched (the chain's last name)
        inner = report.ops.row(op["children"][-1] if op["children"] else op["name"])
        assert inner is not None
        assert inner.device_self_us * 1e3 == pytest.approx(op["nc_exec_running_ns"], abs=1e-6)
        assert inner.device_calls == 1
    assert report.ops.device_time_us == pytest.approx(exp["device_total_us"], abs=1e-9)
    assert sum(r.device_self_us for r in report.ops.rows) == pytest.approx(exp["device_total_us"])


def test_timeline_steps_and_device(case: tuple[str, Any, dict[str, Any]]) -> None:
    _, report, exp = case
    d = report.to_dict()
    assert d["device"]["kind"] == "neuron"
    assert exp["instance_type"] in d["device"]["name"]
    assert d["summary"]["device_span_us"] == pytest.approx(exp["device_span_us"], abs=1e-9)
    assert d["summary"]["device_busy_us"] == pytest.approx(exp["device_total_us"], abs=1e-9)
    (step,) = d["steps"]
    assert f"ProfilerStep#{step['step']}" == exp["schedule"]["active_step"]
    assert step["wall_us"] == pytest.approx(exp["active_step_us"], abs=1e-9)
    assert step["device_ops"] == exp["device_executions"]
    assert step["device_us"] == pytest.approx(exp["device_total_us"], abs=1e-9)


def test_execution_links_neff_and_offset(case: tuple[str, Any, dict[str, Any]]) -> None:
    _, report, exp = case
    t = report.trace
    (hw,) = _rows(t, "name = 'nc_exec_running'")
    (op,) = exp["ops"]
    args = json.loads(hw["args"])
    assert args["model_name"] == op["neff"]
    assert args["nrt_sequence_id"] == op["nrt_sequence_id"]
    assert args["nc_idx"] == exp["nc_idx"]
    assert hw["kind"] == "exec" and hw["source"] == "device"
    (step,) = _rows(t, "kind = 'step'")
    assert (hw["start_ns"] - step["start_ns"]) / 1e3 == pytest.approx(
        op["device_start_offset_us"], abs=1e-9
    )
    # the chain op -> nrta_execute_schedule -> nc_exec_running, from the columns alone
    (launch,) = _rows(t, f"id = {hw['launch_id']}")
    assert launch["name"] == "nrta_execute_schedule"
    assert launch["op_id"] == hw["op_id"]
    (issuer,) = _rows(t, f"id = {hw['op_id']}")
    assert issuer["name"] == (op["children"][-1] if op["children"] else op["name"])
    chain = {r["name"] for r in _rows(t, f"correlation = {hw['correlation']}")}
    assert {"neuron_dispatch", "neuron_exec", "nrta_execute_schedule", "nc_exec_running"} <= chain


def test_hardware_markers_are_not_device_work(case: tuple[str, Any, dict[str, Any]]) -> None:
    _, report, exp = case
    (sync,) = _rows(report.trace, "name = 'timestamp_sync_point'")
    assert sync["kind"] == "annotation"
    # the one device kernel is the execution, named by the NEFF it ran
    assert len(report.kernels) == 1
    assert report.kernels[0].name.startswith("nc_exec_running [neff_")
    assert report.kernels[0].name.endswith(".neff]")
    assert report.kernels[0].calls == exp["device_executions"]


def test_lanes_are_neuron_explorer_labels(case: tuple[str, Any, dict[str, Any]]) -> None:
    _, report, _ = case
    lanes = set(report.trace.column("lane"))
    prefix = "i-0a3f5c27e1b9d4e86/PID:41873"
    assert f"{prefix}/framework/TID:41873" in lanes
    assert f"{prefix}/framework/Stream:0" in lanes
    assert f"{prefix}/neuron_rt/NC:0" in lanes
    assert f"{prefix}/neuron_hw/NC0:0" in lanes
    (hw,) = _rows(report.trace, "name = 'nc_exec_running'")
    assert hw["lane"] == f"{prefix}/neuron_hw/NC0:0"


def test_ids_beyond_2_53_are_exact(case: tuple[str, Any, dict[str, Any]]) -> None:
    sc, report, exp = case
    spe = pq.read_table(
        FIXTURES / sc / exp["paths"]["system_profile"] / "SystemProfileEvents.parquet"
    )
    want = spe.filter(pc.equal(spe.column("name"), "nc_exec_running"))
    (hw,) = _rows(report.trace, "name = 'nc_exec_running'")
    neuron = json.loads(hw["args"])["neuron"]
    assert neuron["id"] == str(want.column("id")[0].as_py())
    assert int(neuron["id"]) > 2**53
    assert neuron["flow_id"] == want.column("flow_id")[0].as_py()
    assert hw["correlation"] == min(
        int(f)
        for r in _rows(report.trace, f"correlation = {hw['correlation']}")
        for f in json.loads(r["args"])["neuron"].get("flow_id", [])
    )


def test_framework_trace_merged_without_double_counting(
    case: tuple[str, Any, dict[str, Any]],
) -> None:
    sc, report, exp = case
    t = report.trace
    spe = pq.read_table(
        FIXTURES / sc / exp["paths"]["system_profile"] / "SystemProfileEvents.parquet"
    )
    n_framework = int(pc.sum(pc.equal(spe.column("trace_event_source"), "framework")).as_py())
    # each framework event once (trace.json holds them all too), plus the profiler's own span
    fw = _rows(t, "source IN ('framework') OR cat LIKE 'privateuse1%'")
    assert len(fw) == n_framework
    (fmt,) = t.meta.alignment["framework_traces"]
    assert fmt["offset_ns"] == 0 and fmt["matched_events"] == n_framework
    dev = t.meta.alignment["device_profiles"]["profile_nc_0_session_0"]
    assert dev["matched_executions"] == 1 and dev["offset_ns"] is not None


def test_device_tables_summary_and_sql(case: tuple[str, Any, dict[str, Any]]) -> None:
    _, report, exp = case
    t = report.trace
    assert t.neuron is not None and t.neuron.schema_version == exp["profile_schema_version"]
    (row,) = t.sql("SELECT total_time FROM neuron_summary").to_pylist()
    assert row["total_time"] == pytest.approx(exp["summary_total_time_s"], rel=1e-6)
    n = t.sql("SELECT count(*) AS n FROM neuron_instruction").to_pylist()[0]["n"]
    assert n == t.neuron.tables["Instruction"].num_rows > 0
    # device-clock rows moved onto the event clock: the execution starts with nc_exec_running
    (hw,) = _rows(t, "name = 'nc_exec_running'")
    (ex,) = t.sql("SELECT host_start_ns FROM neuron_execution_info").to_pylist()
    assert ex["host_start_ns"] == hw["start_ns"]
    engines = neuron_engines(t)
    assert engines is not None and engines.peaks is not None
    assert engines.peaks.family == "Trainium2"
    (e,) = engines.executions
    assert e.op_id == hw["op_id"] and e.dur_ns == hw["dur_ns"]
    # a 4x512 normalisation: a few µs of Vector/Scalar work in a 400 µs execution
    assert e.bound == "overhead"
    assert e.engines[[x.engine for x in e.engines].index("tensor")].busy_ns == 0


def test_h2d_copies(case: tuple[str, Any, dict[str, Any]]) -> None:
    _, report, exp = case
    h2d = [f for f in report.findings if f["kind"] == "h2d_copies"]
    writes = _rows(report.trace, "name = 'nrt_tensor_write'")
    assert [(json.loads(w["args"])["size"], w["dur_ns"], w["start_ns"]) for w in writes] == [
        (c["bytes"], c["nrt_tensor_write_ns"], c["start_ns"]) for c in exp["h2d_copies"]
    ]
    if not exp["h2d_copies"]:
        assert h2d == []
        return
    (f,) = h2d
    (op,) = exp["ops"]
    assert f["details"]["op"] == op["name"]
    assert f["details"]["mean_bytes"] == op["h2d"]["bytes"]
    assert "Python float" in f["recommendation"]


def test_neuron_warning_table_is_a_profile_quality_finding(
    case: tuple[str, Any, dict[str, Any]],
) -> None:
    _, report, _ = case
    pq_f = [f for f in report.findings if f["kind"] == "profile_quality"]
    assert [f["severity"] for f in pq_f] == ["low"]
    assert "Missing Data" in pq_f[0]["title"]
    assert not any("truncated" in f["title"] for f in report.findings)


def test_compare_builtin_compiled() -> None:
    a, b = analyze(FIXTURES / "builtin"), analyze(FIXTURES / "compiled")
    d = diff_reports(a, b)
    ea, eb = expected("builtin"), expected("compiled")
    want = eb["device_total_us"] - ea["device_total_us"]
    assert d["totals"]["delta_device_us"] == pytest.approx(want, abs=1e-9)
    assert round(-d["totals"]["delta_device_us"], 1) == 27.8
    assert d["cross_device"] is False


def test_cli_report_and_compare(capsys: pytest.CaptureFixture[str]) -> None:
    from opscope.cli.main import main

    assert main(["report", str(FIXTURES / "builtin"), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    row = next(r for r in d["ops"] if r["name"] == "aten::_fused_rms_norm")
    assert round(row["device_self_us"], 1) == 403.3 and row["device_calls"] == 1
    assert main(["report", str(FIXTURES / "compiled"), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    row = next(r for r in d["ops"] if r["name"] == "Torch-Compiled Region: 0/0")
    assert round(row["device_self_us"], 1) == 375.5 and row["device_calls"] == 1
    assert main(["diff", str(FIXTURES / "builtin"), str(FIXTURES / "compiled")]) == 0
    assert "-27.8 µs" in capsys.readouterr().out


@pytest.mark.parametrize("part", ["explorer", "explorer/rmsnorm_builtin@latest"])
def test_explorer_folder_alone(part: str) -> None:
    t = load(FIXTURES / "builtin" / part)
    assert t.meta.format == "neuron"
    report = analyze(t)
    row = report.ops.row("aten::_fused_rms_norm")
    assert row is not None and row.device_self_us == pytest.approx(403.296)
    # no framework trace: nothing to align
    assert "framework_traces" not in t.meta.alignment


def test_capture_trace_json_alone_is_kineto() -> None:
    """The raw capture's trace.json by itself is a plain Kineto file (no device executions)."""
    exp = expected("builtin")
    t = load(FIXTURES / "builtin" / exp["paths"]["trace_json"])
    assert t.meta.format == "kineto"
    assert t.sql("SELECT count(*) AS n FROM events WHERE kind = 'exec'").to_pylist()[0]["n"] == 0


def test_report_has_the_engine_section(case: tuple[str, Any, dict[str, Any]]) -> None:
    """The NeuronCore engine view is part of the report: per execution, the bounding engine,
    the framework op that ran it, and Neuron Explorer's MFU/MBU as written."""
    _, report, exp = case
    section = report.to_dict()["neuron"]
    assert len(section["executions"]) == exp["device_executions"]
    for ex in section["executions"]:
        assert ex["bound"] in ("tensor", "vector", "scalar", "gpsimd", "dma", "overhead")
        assert ex["op_name"] in {
            op["children"][-1] if op["children"] else op["name"] for op in exp["ops"]
        }
    assert "mfu_estimated_percent" in section["summary"]


def test_engine_section_in_text_html_and_the_explorer(
    case: tuple[str, Any, dict[str, Any]],
) -> None:
    from opscope.render import html, text

    _, report, _ = case
    data = report.to_dict()
    (ex,) = data["neuron"]["executions"]
    shown = text.render_text(data, width=100)
    assert "NeuronCore engines" in shown and ex["bound"] in shown
    assert max(len(line) for line in shown.splitlines()) <= 100
    section = html.sections(data)  # the static page and the explorer's Summary both show it
    assert "NeuronCore engines" in section and ex["bound"] in section


def test_the_critical_path_runs_through_the_neuroncore(
    case: tuple[str, Any, dict[str, Any]],
) -> None:
    """The reference study's step is device-bound: the NeuronCore execution is most of the
    path, the host waits in ``neuron_synchronize`` (its return is on the path as sync)."""
    _, report, exp = case
    cp = report.to_dict()["critical_path"]
    execs = [s for s in cp["segments"] if s["label"] == "gpu_compute"]
    assert sum(s["dur_us"] for s in execs) == pytest.approx(exp["device_total_us"], abs=1e-6)
    assert max(cp["bound_by_us"], key=cp["bound_by_us"].get) == "gpu_compute"
    assert any(s["label"] == "sync" and s["name"] == "neuron_synchronize" for s in cp["segments"])
    assert cp["length_us"] <= cp["wall_us"] + 1e-6
