"""The format registry: which format each kind of path is read as, and what sniffing costs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from opscope.errors import TraceError
from opscope.trace import formats, load
from opscope.trace.formats import capture_details, execution_trace


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def _kineto(path: Path) -> Path:
    ev = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
    path.write_text(json.dumps({"traceEvents": [ev]}))
    return path


def _et_doc(nodes: int) -> dict[str, object]:
    return {
        "schema": "1.0.1",
        "pid": 7,
        "nodes": [{"name": f"aten::op{i}", "id": i, "inputs": []} for i in range(nodes)],
    }


def test_every_format_is_registered_once_with_sniff_and_load() -> None:
    names = [f.name for f in formats.FORMATS]
    assert len(set(names)) == len(names)
    assert names[-1] == "kineto"  # the fallback
    for f in formats.FORMATS:
        assert formats.get(f.name) is f
        assert callable(f.sniff) and callable(f.load)


def test_paths_go_to_their_format(tmp_path: Path) -> None:
    trace = _kineto(tmp_path / "t.json")
    et = tmp_path / "et.json"
    et.write_text(json.dumps(_et_doc(2)))
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "system_profile.json").write_text('{"trace_events": []}')
    capture = tmp_path / "cap" / "i-1_pid_7" / "20260101_000000_000"
    capture.mkdir(parents=True)
    (capture / "ntrace.pb").write_bytes(b"p")
    parquet = tmp_path / "prof@latest"
    parquet.mkdir()
    (parquet / "SystemProfileEvents.parquet").write_bytes(b"")
    run = tmp_path / "run"
    (run / "neuron" / "explorer").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    (run / "neuron" / "explorer" / "Instruction_0.parquet").write_bytes(b"")
    plain_run = tmp_path / "plain_run"
    plain_run.mkdir()
    (plain_run / "run.json").write_text("{}")
    _kineto(plain_run / "trace.json")
    expect = {
        trace: "kineto",
        tmp_path / "missing": "kineto",  # the fallback says "no such file or folder"
        et: "execution_trace",
        legacy: "neuron",
        legacy / "system_profile.json": "neuron",
        tmp_path / "cap": "neuron",
        capture: "neuron",
        parquet: "neuron",
        parquet / "SystemProfileEvents.parquet": "neuron",
        run: "neuron",
        plain_run: "kineto",
    }
    got = {p: formats.detect(p).name for p in expect}
    assert got == expect


def test_a_capture_beside_its_explorer_output_is_read_as_the_tables(tmp_path: Path) -> None:
    (tmp_path / "i-1_pid_7" / "s").mkdir(parents=True)
    (tmp_path / "i-1_pid_7" / "s" / "ntrace.pb").write_bytes(b"p")
    (tmp_path / "explorer" / "p@latest").mkdir(parents=True)
    (tmp_path / "explorer" / "p@latest" / "SystemProfileEvents.parquet").write_bytes(b"")
    assert formats.detect(tmp_path).name == "neuron"


@pytest.mark.parametrize("nodes", [2, 3000])  # the whole file in the head, and not
@pytest.mark.parametrize("gz", [False, True])
def test_execution_traces_are_refused_by_their_first_bytes(
    tmp_path: Path, nodes: int, gz: bool
) -> None:
    data = json.dumps(_et_doc(nodes), indent=1).encode()
    assert (len(data) > execution_trace.HEAD_BYTES) == (nodes > 100)
    path = tmp_path / ("et.json.gz" if gz else "et.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    assert execution_trace.sniff(path)
    with pytest.raises(TraceError, match="execution trace") as err:
        load(path, cache=False)
    assert str(err.value).startswith(f"{path}: a PyTorch execution trace")


def test_an_execution_trace_in_a_folder_of_ranks_is_refused_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "rank0.json").write_text(json.dumps(_et_doc(2)))
    assert formats.detect(tmp_path).name == "kineto"
    with pytest.raises(TraceError, match="execution trace"):
        load(tmp_path, cache=False)


@pytest.mark.parametrize(
    "text",
    [
        '{"schema": "1.0.1", "nodes": [',  # cut short: the JSON reader's own error
        '{"schema": "1", "nodes": [], "traceEvents": []}',  # a Kineto trace after all
        '[{"schema": "1", "nodes": []}]',
        '{"nodes": []}',
    ],
)
def test_what_only_looks_like_an_execution_trace_is_left_to_kineto(
    tmp_path: Path, text: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    assert not execution_trace.sniff(path)
    assert formats.detect(path).name == "kineto"


def test_sniffing_a_file_reads_only_its_head(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
        for i in range(20000)
    ]
    path.write_text(json.dumps({"schema": "x", "nodes": [], "traceEvents": events}))
    got = execution_trace._head(path)
    assert got is not None
    head, whole = got
    assert not whole and len(head) == execution_trace.HEAD_BYTES
    assert not execution_trace.sniff(path)  # traceEvents in the head: a Kineto trace
    assert len(load(path, cache=False)) == 20000


DETAILS = '[{"file": "cap_32.json.gz", "batch_size": 32, "mode": "FULL"}]'


@pytest.mark.parametrize("name", ["execution_details.json", "details_copy.json"])
def test_capture_details_are_refused_as_no_trace(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(DETAILS)
    assert formats.detect(path).name == "capture_details"
    with pytest.raises(TraceError, match="not a trace") as err:
        load(path, cache=False)
    assert str(err.value).startswith(f"{path}: TraceLens's capture details")
    assert "--graph-capture" in str(err.value)


def test_capture_details_in_a_folder_of_traces_are_left_out(tmp_path: Path) -> None:
    _kineto(tmp_path / "cap_32.json")
    (tmp_path / "execution_details.json").write_text(DETAILS)
    t = load(tmp_path, cache=False)
    assert t.meta.paths == [str(tmp_path / "cap_32.json")] and len(t) == 1
    assert set(t.meta.ranks) == {0} and not t.meta.skipped


@pytest.mark.parametrize(
    "text",
    [
        '[{"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "file": "x.py"}]',
        "[]",
        '[{"file": 3}]',
        '{"traceEvents": [], "file": "a"}',
    ],
)
def test_what_only_looks_like_capture_details_is_left_to_kineto(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    assert not capture_details.sniff(path)
    assert formats.detect(path).name == "kineto"
