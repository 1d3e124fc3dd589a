"""Neuron ingestion: bad input, raw capture folders, legacy JSON, synthetic eager scenarios.

Mutated copies of the shared fixtures are written into tmp_path (pyarrow, or the fixtures'
``make_fixture`` library); the fixtures themselves are never changed or copied into the repo.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from opscope.analysis.findings import Context, run_rules
from opscope.analysis.pipeline import analyze
from opscope.errors import TraceError
from opscope.trace import load
from opscope.trace.neuron.capture import check_capture
from opscope.trace.neuron.flows import flow_components
from opscope.trace.neuron.layout import is_neuron_path

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "neuron_fixtures"
needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason="../shared/neuron_fixtures not present (a user's clone)"
)
SYS = "explorer/rmsnorm_builtin@latest"
TRACE = "capture/i-0a3f5c27e1b9d4e86_pid_41873/20260720_140003_118/trace.json"


def _copy(tmp_path: Path, scenario: str = "builtin") -> Path:
    dst = tmp_path / scenario
    shutil.copytree(FIXTURES / scenario, dst)
    return dst


def _rewrite(path: Path, fn: Any) -> None:
    pq.write_table(fn(pq.read_table(path)), path)


def _findings(trace: Any, kind: str) -> list[dict[str, Any]]:
    return [f for f in analyze(trace).findings if f["kind"] == kind]


# -- schema drift ----------------------------------------------------------------------------


@needs_fixtures
def test_unknown_columns_are_ignored_and_listed(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    spe = root / SYS / "SystemProfileEvents.parquet"
    _rewrite(spe, lambda t: t.append_column("future_field", pa.array(["x"] * t.num_rows)))
    t = load(root)
    (w,) = t.meta.warnings
    assert "SystemProfileEvents" in w and "future_field" in w
    report = analyze(t)
    assert report.ops.row("aten::_fused_rms_norm").device_self_us == pytest.approx(403.296)  # type: ignore[union-attr]
    titles = [f["title"] for f in report.findings if f["kind"] == "profile_quality"]
    assert any("future_field" in x for x in titles)
    assert not any("truncated" in x for x in titles)


@needs_fixtures
@pytest.mark.parametrize(
    ("table", "drop"),
    [
        ("SystemProfileEvents", ["trace_event_source"]),
        ("SystemProfileEvents", ["start_ts", "thread_id"]),
    ],
)
def test_missing_required_columns_is_one_line_error(
    tmp_path: Path, table: str, drop: list[str]
) -> None:
    root = _copy(tmp_path)
    _rewrite(root / SYS / f"{table}.parquet", lambda t: t.drop_columns(drop))
    with pytest.raises(TraceError) as err:
        load(root)
    msg = str(err.value)
    assert "\n" not in msg and table in msg
    assert all(c in msg for c in drop)


@needs_fixtures
def test_missing_required_device_column(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    path = root / "explorer/profile_nc_0_session_0@latest/ActiveTime.parquet"
    _rewrite(path, lambda t: t.drop_columns(["engine"]))
    with pytest.raises(TraceError, match=r"ActiveTime: missing required column engine"):
        load(root)


@needs_fixtures
def test_split_tables_are_stacked(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    spe = root / SYS / "SystemProfileEvents.parquet"
    t = pq.read_table(spe)
    half = t.num_rows // 2
    spe.unlink()
    pq.write_table(t.slice(0, half), spe.with_name("SystemProfileEvents_0.parquet"))
    pq.write_table(t.slice(half), spe.with_name("SystemProfileEvents_1.parquet"))
    report = analyze(load(root))
    assert report.ops.row("aten::_fused_rms_norm").device_self_us == pytest.approx(403.296)  # type: ignore[union-attr]


@needs_fixtures
def test_not_parquet_is_trace_error(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / SYS / "SystemProfileEvents.parquet").write_bytes(b"not parquet")
    with pytest.raises(TraceError, match="not a readable Parquet file"):
        load(root)


# -- raw capture folders ---------------------------------------------------------------------


def _capture(tmp_path: Path, files: dict[str, bytes], trace: bool = True) -> Path:
    session = tmp_path / "out" / "i-0abc_pid_7" / "20260101_000000_000"
    session.mkdir(parents=True)
    for name, data in files.items():
        (session / name).write_bytes(data)
    if trace:
        if FIXTURES.is_dir():
            shutil.copy(FIXTURES / "builtin" / TRACE, session / "trace.json")
        else:
            (session / "trace.json").write_text('{"traceEvents": []}')
    return session


def test_neff_ntff_pairing_model_mode(tmp_path: Path) -> None:
    s = _capture(
        tmp_path,
        {
            "neff_111.neff": b"n",
            "111_instid_0_vnc_0.ntff": b"t",
            "neff_222.neff": b"n",  # no NTFF
            "333_instid_0_vnc_0.ntff": b"t",  # no NEFF
            "ntrace.pb": b"p",
        },
        trace=False,
    )
    chk = check_capture(s)
    codes = [(p["code"], p["files"]) for p in chk.problems]
    assert ("ERROR_PROCESS_INCOMPLETE", ["333_instid_0_vnc_0.ntff"]) in codes
    assert ("ERROR_PROCESS_INCOMPLETE", ["neff_222.neff"]) in codes
    assert len(codes) == 2


def test_session_mode_ntff_needs_no_pair(tmp_path: Path) -> None:
    s = _capture(
        tmp_path,
        {
            "neff_111_vnc_0.neff": b"n",
            "neff_222_vnc_0.neff": b"n",
            "profile_nc_0_session_0.ntff": b"t",
            "empty": b"",
        },
        trace=False,
    )
    assert check_capture(s).problems == []
    (s / "profile_nc_1_session_0.ntff").write_bytes(b"")
    assert [p["code"] for p in check_capture(s).problems] == ["EMPTY_NTFF"]


def test_ntff_without_any_neff(tmp_path: Path) -> None:
    s = _capture(tmp_path, {"profile_nc_0_session_0.ntff": b"t"}, trace=False)
    assert [p["code"] for p in check_capture(s).problems] == ["NO_NEFF"]


def test_protobuf_only_folder_needs_neuron_explorer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_NEURON_EXPLORER", str(tmp_path / "no-such-neuron-explorer"))
    s = _capture(tmp_path, {"ntrace.pb": b"p", "trace_info.pb": b"i"}, trace=False)
    assert is_neuron_path(tmp_path / "out")
    with pytest.raises(TraceError) as err:
        load(tmp_path / "out")
    msg = str(err.value)
    assert "\n" not in msg and "neuron-explorer view is needed" in msg
    assert f"view -d {s.parent}" in msg


@needs_fixtures
def test_raw_capture_without_explorer_reads_framework_and_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_NEURON_EXPLORER", str(tmp_path / "no-such-neuron-explorer"))
    _capture(tmp_path, {"ntrace.pb": b"p", "trace_info.pb": b"i", "neff_9_vnc_0.neff": b"n"})
    t = load(tmp_path / "out")
    assert t.device.kind == "neuron"
    assert any("Run: " in w and "--ingest-only" in w for w in t.meta.warnings)
    found = _findings(t, "profile_quality")
    titles = [f["title"] for f in found]
    assert any("not processed" in x for x in titles)
    assert any("ERROR_PROCESS_INCOMPLETE" in x for x in titles)  # the NEFF has no NTFF
    assert next(f for f in found if "not processed" in f["title"])["severity"] == "high"


def _fake_explorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for neuron-explorer: notes each run in ``ran.txt`` and copies the fixture's
    processed tables to --data-path."""
    fake = tmp_path / "neuron-explorer"
    src = FIXTURES / "builtin" / "explorer"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{tmp_path / "ran.txt"}"\n'
        'while [ "$#" -gt 0 ]; do if [ "$1" = "--data-path" ]; then out="$2"; fi; shift; done\n'
        f'mkdir -p "$out/profiles/global" && cp -r "{src}"/* "$out/profiles/global/"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("OPSCOPE_NEURON_EXPLORER", str(fake))
    return tmp_path / "ran.txt"


@pytest.mark.skipif(sys.platform == "win32", reason="shell script as a fake binary")
def test_load_never_runs_neuron_explorer_and_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _fake_explorer(tmp_path, monkeypatch)
    s = _capture(tmp_path, {"ntrace.pb": b"p", "trace_info.pb": b"i"}, trace=False)
    with pytest.raises(TraceError) as err:
        load(tmp_path / "out")
    msg = str(err.value)
    assert "\n" not in msg and "neuron-explorer view is needed" in msg
    assert f"{tmp_path / 'neuron-explorer'} view -d {s.parent} --ingest-only" in msg
    assert not ran.exists() and not (tmp_path / "out" / "explorer").exists()


@needs_fixtures
@pytest.mark.skipif(sys.platform == "win32", reason="shell script as a fake binary")
def test_load_of_an_unconverted_capture_warns_with_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = _fake_explorer(tmp_path, monkeypatch)
    _capture(tmp_path, {"ntrace.pb": b"p", "trace_info.pb": b"i"})
    t = load(tmp_path / "out")
    assert not ran.exists() and not (tmp_path / "out" / "explorer").exists()
    (w,) = [w for w in t.meta.warnings if "Run: " in w]
    assert "neuron-explorer view has not written them (loading never runs it)" in w
    assert f"{tmp_path / 'neuron-explorer'} view -d " in w and "--ingest-only" in w
    assert "neuron_explorer" not in t.meta.extra["neuron"]


@needs_fixtures
@pytest.mark.skipif(sys.platform == "win32", reason="shell script as a fake binary")
def test_the_conversion_step_runs_neuron_explorer_and_load_reads_its_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opscope.capture.neuron_explorer import convert

    ran = _fake_explorer(tmp_path, monkeypatch)
    session = _capture(tmp_path, {"ntrace.pb": b"p", "trace_info.pb": b"i"})
    said: list[str] = []
    (outcome,) = convert(tmp_path / "out", say=said.append)
    assert outcome.error is None and "--ingest-only" in outcome.command
    assert len(ran.read_text().splitlines()) == 1 and len(said) == 1
    assert (tmp_path / "out" / "explorer" / "profiles").is_dir()
    assert convert(tmp_path / "out") == []  # converted: nothing more to run
    for path in (tmp_path / "out", session.parent, session):  # the tables outside the path too
        t = load(path)
        row = analyze(t).ops.row("aten::_fused_rms_norm")
        assert row is not None and row.device_self_us == pytest.approx(403.296)
        assert not [w for w in t.meta.warnings if "Run: " in w]
    assert t.meta.extra["neuron"]["neuron_explorer"]  # read from where the command wrote
    assert len(ran.read_text().splitlines()) == 1


@needs_fixtures
@pytest.mark.skipif(sys.platform == "win32", reason="shell script as a fake binary")
def test_opscope_report_converts_a_raw_capture_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from opscope.cli.main import main

    ran = _fake_explorer(tmp_path, monkeypatch)
    _capture(tmp_path, {"ntrace.pb": b"p", "trace_info.pb": b"i"})
    assert main(["report", str(tmp_path / "out"), "--format", "json", "--no-cache"]) == 0
    out, err = capsys.readouterr()
    assert "opscope report: converting the Neuron capture" in err
    assert len(ran.read_text().splitlines()) == 1
    data = json.loads(out)
    assert not [f for f in data["findings"] if "not processed" in f["title"]]


def test_the_conversion_step_without_neuron_explorer_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opscope.capture.neuron_explorer import convert

    monkeypatch.setenv("OPSCOPE_NEURON_EXPLORER", str(tmp_path / "no-such-neuron-explorer"))
    _capture(tmp_path, {"ntrace.pb": b"p"}, trace=False)
    assert convert(tmp_path / "out") == []
    assert not (tmp_path / "out" / "explorer").exists()
    (tmp_path / "t.json").write_text('{"traceEvents": []}')
    assert convert(tmp_path / "t.json") == []  # not a Neuron capture


def test_kineto_folder_is_not_neuron(tmp_path: Path) -> None:
    (tmp_path / "trace.json").write_text('{"traceEvents": []}')
    assert not is_neuron_path(tmp_path)
    assert not is_neuron_path(tmp_path / "trace.json")


# -- flows -----------------------------------------------------------------------------------


def test_flow_components_are_exact_beyond_2_53() -> None:
    big = 2**53 + 1
    flows = [[str(big)], [str(big), str(big + 1)], [str(big + 1)], [], [str(2**62)], ["x"]]
    comp = flow_components(flows)
    assert comp.tolist() == [big, big, big, -1, 2**62, -1]


# -- legacy JSON ------------------------------------------------------------------------------


def test_legacy_system_profile_json(tmp_path: Path) -> None:
    t0 = 1_700_000_000_000_000_000
    events = [
        {"duration": 100_000, "group": "framework-7", "name": "ProfilerStep#1",
         "process_id": 7, "thread_id": 7, "timestamp": t0, "type": 99999},
        {"duration": 50_000, "group": "framework-7", "name": "aten::mul",
         "process_id": 7, "thread_id": 7, "timestamp": t0 + 1000, "type": 99999},
        {"duration": 20_000, "group": "nrt-nc-000", "id": 1, "instance_id": "i-1", "lnc_idx": 0,
         "name": "nrt_execute", "parent_id": 0, "process_id": 7, "thread_id": 7,
         "timestamp": t0 + 2000, "type": 11},
        {"duration": 30_000, "group": "nrt-nc-000", "id": 2, "instance_id": "i-1", "lnc_idx": 0,
         "name": "nc_exec_running", "process_id": 7, "thread_id": 9,
         "timestamp": t0 + 60_000, "type": 12},
    ]  # fmt: skip
    doc = {
        "trace_events": events,
        "mem_usage": [{"duration": 1, "instance_id": "i-1", "percent_usage": 3.0,
                       "timestamp": t0, "usage": 10}],
    }  # fmt: skip
    (tmp_path / "system_profile.json").write_text(json.dumps(doc))
    (tmp_path / "device_profile_model_5.json").write_text(
        json.dumps({"summary": [{"total_time": 3e-5, "event_count": 4}],
                    "instruction": [{"timestamp": 1, "duration": 2, "label": "a",
                                     "hlo_name": "mul.1", "opcode": "TENSOR_TENSOR",
                                     "operands": ""}]})
    )  # fmt: skip
    t = load(tmp_path)
    assert t.meta.format == "neuron"
    rows = {r["name"]: r for r in t.sql("SELECT * FROM events").to_pylist()}
    assert rows["nc_exec_running"]["kind"] == "exec"
    assert rows["nrt_execute"]["source"] == "runtime"
    assert rows["nrt_execute"]["lane"] == "nrt-nc-000-i-1"
    assert rows["aten::mul"]["kind"] == "op" and rows["ProfilerStep#1"]["kind"] == "step"
    assert rows["nrt_execute"]["op_id"] == rows["aten::mul"]["id"]
    assert t.sql("SELECT count(*) AS n FROM neuron_legacy_instruction").to_pylist()[0]["n"] == 1
    assert t.sql("SELECT usage FROM neuron_legacy_mem_usage").to_pylist() == [{"usage": 10}]


def test_legacy_json_not_a_system_profile(tmp_path: Path) -> None:
    (tmp_path / "system_profile.json").write_text('{"events": []}')
    with pytest.raises(TraceError, match="trace_events"):
        load(tmp_path)


# -- synthetic eager scenarios from the fixtures' generator ----------------------------------


def _make_fixture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_fixture", FIXTURES / "make_fixture.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_fixture"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _dims(rows: int) -> dict[str, Any]:
    return {"Input Dims": [[rows, 512], [rows, 512]], "Input type": ["c10::BFloat16"] * 2}


@needs_fixtures
def test_neff_per_shape_is_a_compile_finding(tmp_path: Path) -> None:
    mf = _make_fixture()
    ops = [
        mf.Op(name="aten::mul", cpu_us=30.0, device_ns=90_000, program="mul",
              neff_hash=str(1000 + i), hlo="multiply.1", args=_dims(4 * (i + 1)))
        for i in range(3)
    ]  # fmt: skip
    sc = mf.Scenario(name="shapes", title="mul on three shapes", display_name="shapes",
                     start_ns=1_784_556_003_118_402_117, ops=ops)  # fmt: skip
    mf.write_scenario(sc, tmp_path / "shapes", mf.README_TEMPLATE)
    t = load(tmp_path / "shapes")
    (f,) = _findings(t, "compile")
    assert f["details"]["op"] == "aten::mul" and len(f["details"]["neffs"]) == 3
    assert f["time_at_stake_us"] > 0  # the NEFF switches between executions are in the window
    # same shape every call: one NEFF, no finding
    ops2 = [
        mf.Op(name="aten::mul", cpu_us=30.0, device_ns=90_000, program="mul",
              neff_hash="1000", hlo="multiply.1", args=_dims(4))
        for _ in range(3)
    ]  # fmt: skip
    sc2 = mf.Scenario(name="same", title="mul", display_name="same",
                      start_ns=1_784_556_003_118_402_117, ops=ops2)  # fmt: skip
    mf.write_scenario(sc2, tmp_path / "same", mf.README_TEMPLATE)
    assert _findings(load(tmp_path / "same"), "compile") == []


@needs_fixtures
def test_float64_on_neuron_is_reported_as_float32(tmp_path: Path) -> None:
    mf = _make_fixture()
    args = {"Input Dims": [[4, 512], [4, 512]], "Input type": ["double", "double"]}
    ops = [mf.Op(name="aten::mul", cpu_us=30.0, device_ns=90_000, program="mul",
                 neff_hash="77", hlo="multiply.1", args=args)]  # fmt: skip
    sc = mf.Scenario(name="f64", title="f64", display_name="f64",
                     start_ns=1_784_556_003_118_402_117, ops=ops)  # fmt: skip
    mf.write_scenario(sc, tmp_path / "f64", mf.README_TEMPLATE)
    (f,) = _findings(load(tmp_path / "f64"), "dtype")
    assert "float32 on Neuron" in f["title"] and f["severity"] == "low"
    assert f["time_at_stake_us"] == 0.0
    assert _findings(load(FIXTURES / "builtin"), "dtype") == []


@needs_fixtures
def test_naive_eager_rmsnorm_is_a_fusion_finding(tmp_path: Path) -> None:
    mf = _make_fixture()
    chain = [("aten::mul", "mul"), ("aten::mean", "mean_lastdim"), ("aten::add", "add_scalar"),
             ("aten::rsqrt", "rsqrt"), ("aten::mul", "mul_bcast_col"),
             ("aten::mul", "mul_bcast_row")]  # fmt: skip
    ops = [
        mf.Op(name=n, cpu_us=25.0, device_ns=60_000, program=p, neff_hash=str(500 + i),
              hlo="op.1", args=_dims(4))
        for i, (n, p) in enumerate(chain)
    ]  # fmt: skip
    sc = mf.Scenario(name="naive", title="naive", display_name="naive",
                     start_ns=1_784_556_003_118_402_117, ops=ops)  # fmt: skip
    mf.write_scenario(sc, tmp_path / "naive", mf.README_TEMPLATE)
    t = load(tmp_path / "naive")
    assert analyze(t).ops.device_time_us == pytest.approx(6 * 60.0)
    assert _findings(t, "fusion")


@needs_fixtures
def test_rules_run_on_neuron_context(tmp_path: Path) -> None:
    """Every rule accepts a Neuron trace (none raises on its columns)."""
    report = analyze(FIXTURES / "compiled", findings=False)
    ctx = Context(
        trace=report.trace, op_table=report.ops, timeline=report.timeline, steps=report.steps
    )
    kinds = {f.kind for f in run_rules(ctx)}
    assert {"hotspots", "h2d_copies", "profile_quality"} <= kinds
    assert os.fspath(FIXTURES)  # fixtures were not modified: the generator's check passes
    mf = _make_fixture()
    assert mf.check_folder(FIXTURES / "compiled") == []
