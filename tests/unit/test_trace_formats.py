"""Trace engine on small hand-made traces: input forms, times, producers, linking rules."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from opscope.trace import load
from opscope.trace.kineto.times import to_ns


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def write(path: Path, doc: Any, *, raw: str | None = None) -> Path:
    text = raw if raw is not None else json.dumps(doc)
    data = text.encode()
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def X(name: str, cat: str, ts: Any, dur: Any, pid: Any = 1, tid: Any = 1, **args: Any) -> dict:
    ev: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid}
    ev["ts"] = ts
    ev["dur"] = dur
    if args:
        ev["args"] = {k.replace("_", " ") if k == "External_id" else k: v for k, v in args.items()}
    return ev


def rows(trace: Any) -> list[dict[str, Any]]:
    return trace.sql("SELECT * FROM events ORDER BY id").to_pylist()


def by_name(trace: Any) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in rows(trace)}


SIMPLE = [
    X("ProfilerStep#7", "user_annotation", 0, 100),
    X("aten::mm", "cpu_op", 10, 50, External_id=5),
    X("cudaLaunchKernel", "cuda_runtime", 20, 5, correlation=9, External_id=5),
    X("gemm_kernel", "kernel", 40, 30, pid=0, tid=7, correlation=9, External_id=5),
]


@pytest.mark.parametrize(
    "name", ["t.json", "t.json.gz", "w.pt.trace.json", "w.pt.trace.json.gz", "noext"]
)
@pytest.mark.parametrize("form", ["object", "array"])
def test_file_forms_give_the_same_table(tmp_path: Path, name: str, form: str) -> None:
    doc: Any = {"traceEvents": SIMPLE} if form == "object" else SIMPLE
    t = load(write(tmp_path / name, doc), cache=False)
    r = by_name(t)
    assert len(t) == 4
    assert r["gemm_kernel"]["op_id"] == r["aten::mm"]["id"]
    assert r["gemm_kernel"]["launch_id"] == r["cudaLaunchKernel"]["id"]
    assert r["cudaLaunchKernel"]["parent_id"] == r["aten::mm"]["id"]
    assert r["aten::mm"]["parent_id"] == r["ProfilerStep#7"]["id"]
    assert {r["gemm_kernel"]["step"], r["aten::mm"]["step"]} == {7}
    assert r["gemm_kernel"]["lane"] == "stream 7"
    assert r["aten::mm"]["lane"] == "thread 1"
    assert json.loads(r["gemm_kernel"]["args"]) == {"correlation": 9, "External id": 5}


def test_metadata_is_kept(tmp_path: Path) -> None:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Fake GPU", "numSms": 3}],
        "distributedInfo": {"rank": 3, "world_size": 4, "backend": "nccl"},
        "traceEvents": [
            *SIMPLE,
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        ],
        "traceName": "x",
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }
    t = load(write(tmp_path / "t.json", doc), cache=False)
    m = t.meta
    assert m.device_properties[0]["name"] == "Fake GPU"
    assert m.distributed_info == {"rank": 3, "world_size": 4, "backend": "nccl"}
    assert m.ranks == [3] and m.rank_origin == {3: "distributedInfo"}
    assert m.base_time_ns == 1_700_000_000_000_000_000
    assert m.process_names == {"1": "python"}
    assert m.thread_names == {"1/1": "main"}
    assert m.extra["traceName"] == "x"
    # ts is relative to baseTimeNanoseconds, which Kineto writes after the events
    assert by_name(t)["aten::mm"]["start_ns"] == 1_700_000_000_000_010_000
    assert set(t.column("rank")) == {3}


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1712195495519695.812", 1712195495519695812),  # epoch µs with ns: beyond a double
        ("6520618853526.573", 6520618853526573),  # 16 digits, below 2**43 µs
        ("8796093022207.999", 8796093022207999),  # just below 2**43
        ("2097962447511.067", 2097962447511067),
        ("1683564901540885", 1683564901540885000),  # integer epoch µs
        ("0.001", 1),
        ("12.5", 12500),
    ],
)
def test_timestamps_keep_every_nanosecond(tmp_path: Path, text: str, ns: int) -> None:
    raw = '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, '
    raw += f'"ts": {text}, "dur": 1.001}}]}}'
    t = load(write(tmp_path / "t.json", None, raw=raw), cache=False)
    assert t.column("start_ns") == [ns]
    assert t.column("dur_ns") == [1001]


def test_long_timestamps_after_the_first_run_are_exact(tmp_path: Path) -> None:
    # the first runs are ordinary; a late run holds epoch-µs values with nanoseconds
    evs = [X(f"op{i}", "cpu_op", 10.5 + i, 1) for i in range(200_000)]
    body = json.dumps({"traceEvents": evs})[:-2]
    body += ', {"ph": "X", "cat": "cpu_op", "name": "late", "pid": 1, "tid": 1, '
    body += '"ts": 1712195495519695.812, "dur": 1}]}'
    t = load(write(tmp_path / "t.json", None, raw=body), cache=False)
    got = t.sql("SELECT start_ns FROM events WHERE name = 'late'").column(0).to_pylist()
    assert got == [1712195495519695812]
    first = t.sql("SELECT start_ns FROM events WHERE name = 'op0'").column(0).to_pylist()
    assert first == [10500]


def test_to_ns_text_and_numbers() -> None:
    assert to_ns("1712195495519695.812") == 1712195495519695812
    assert to_ns(" -1.5 ") == -1500
    assert to_ns("1.0005") == 1001  # half up
    assert to_ns(6520618853526.573) == 6520618853526573
    assert to_ns(3) == 3000
    with pytest.raises(ValueError):
        to_ns("abc")


def test_strings_where_numbers_belong(tmp_path: Path) -> None:
    evs = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "a",
            "pid": "Spans",
            "tid": "T",
            "ts": "100.5",
            "dur": "2",
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "b",
            "pid": 1,
            "tid": 18446744073709551615,
            "ts": 200,
            "dur": 1,
        },
    ]
    t = load(write(tmp_path / "t.json", {"traceEvents": evs}), cache=False)
    r = by_name(t)
    assert r["a"]["start_ns"] == 100500 and r["a"]["dur_ns"] == 2000
    assert r["a"]["pid"] == "Spans" and r["a"]["tid"] == "T"
    assert r["b"]["tid"] == "18446744073709551615"


def test_integers_beyond_int64_stay_in_args(tmp_path: Path) -> None:
    raw = (
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "c", "pid": 0, "tid": 1, '
        '"ts": 200, "dur": 100, "args": {"Comms Id": 10159970886766084423, '
        '"huge": 123456789012345678901234567890, "correlation": 99999999999999999999}}]}'
    )
    t = load(write(tmp_path / "t.json", None, raw=raw), cache=False)
    (r,) = rows(t)
    args = json.loads(r["args"])
    assert args["Comms Id"] == 10159970886766084423
    assert str(args["huge"]) == "123456789012345678901234567890"
    assert r["correlation"] is None  # beyond int64: not a usable link


def test_begin_end_pairs_nest_innermost_first(tmp_path: Path) -> None:
    evs = [
        {"ph": "B", "name": "outer", "pid": 0, "tid": 2, "ts": 10, "args": {"a": 1}},
        {"ph": "B", "name": "inner", "pid": 0, "tid": 2, "ts": 12},
        {"ph": "E", "pid": 0, "tid": 2, "ts": 15},
        {"ph": "E", "pid": 0, "tid": 2, "ts": 30, "args": {"b": 2}},
        {"ph": "E", "pid": 0, "tid": 9, "ts": 31},
        {"ph": "B", "name": "open", "pid": 0, "tid": 3, "ts": 1},
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    assert r["outer"]["dur_ns"] == 20_000 and r["inner"]["dur_ns"] == 3_000
    assert json.loads(r["outer"]["args"]) == {"a": 1, "b": 2}
    assert t.meta.skipped == {"end without begin": 1, "begin without end": 1}


@pytest.mark.parametrize(
    ("runtime", "device", "kind"),
    [
        ("xpu_runtime", "kernel", "xpu"),
        ("privateuse1_runtime", "kernel", "privateuse1"),
        ("privateuse1_driver", "kernel", "privateuse1"),
        ("mtia_runtime", "mtia_ccp_events", "mtia"),
        ("cuda_runtime", "kernel", "cuda"),
    ],
)
def test_device_families(tmp_path: Path, runtime: str, device: str, kind: str) -> None:
    evs = [
        X("aten::add", "cpu_op", 0, 10),
        X("launch", runtime, 2, 3, correlation=4),
        X("add_kernel", device, 20, 5, pid=2, tid=3, correlation=4),
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    assert r["launch"]["source"] == "runtime"
    assert r["add_kernel"]["source"] == "device"
    assert r["add_kernel"]["op_id"] == r["aten::add"]["id"]
    assert t.device.kind == kind


def test_hip_calls_under_cuda_runtime_are_rocm(tmp_path: Path) -> None:
    evs = [
        X("aten::add", "cpu_op", 0, 10),
        X("hipLaunchKernel", "cuda_runtime", 2, 3, correlation=4),
        X("k", "kernel", 20, 5, pid=2, tid=3, correlation=4),
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    assert t.device.kind == "rocm"
    assert by_name(t)["k"]["op_id"] == by_name(t)["aten::add"]["id"]


def test_graph_launch_links_every_kernel(tmp_path: Path) -> None:
    evs = [
        X("aten::graph_replay", "cpu_op", 0, 100),
        X("cudaGraphLaunch", "cuda_runtime", 10, 20, correlation=77),
        *[X(f"k{i}", "kernel", 50 + 10 * i, 5, pid=0, tid=7, correlation=77) for i in range(5)],
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    for i in range(5):
        assert r[f"k{i}"]["launch_id"] == r["cudaGraphLaunch"]["id"]
        assert r[f"k{i}"]["op_id"] == r["aten::graph_replay"]["id"]


def test_flows_link_device_events_without_correlation(tmp_path: Path) -> None:
    # one flow start at the graph launch, several flow ends at its kernels (no correlation arg)
    evs: list[dict[str, Any]] = [
        X("aten::replay", "cpu_op", 0, 100),
        X("hipGraphLaunch", "cuda_runtime", 10, 20),
        X("k0", "kernel", 50, 5, pid=0, tid=7),
        X("k1", "kernel", 60, 5, pid=0, tid=7),
        X("stray", "kernel", 90, 5, pid=0, tid=7),
        {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 50, "cat": "ac2g", "bp": "e"},
        {"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 60, "cat": "ac2g", "bp": "e"},
        # an older era's flow category; an unrelated category is ignored
        {"ph": "f", "id": 6, "pid": 0, "tid": 7, "ts": 90, "cat": "fwdbwd", "bp": "e"},
        {"ph": "s", "id": 6, "pid": 1, "tid": 1, "ts": 10, "cat": "fwdbwd"},
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    assert r["k0"]["launch_id"] == r["hipGraphLaunch"]["id"]
    assert r["k1"]["launch_id"] == r["hipGraphLaunch"]["id"]
    assert r["k1"]["op_id"] == r["aten::replay"]["id"]
    assert r["stray"]["launch_id"] is None and r["stray"]["op_id"] is None


def test_external_id_is_the_last_resort(tmp_path: Path) -> None:
    evs = [
        X("aten::copy_", "cpu_op", 0, 10, External_id=31),
        X("Memcpy HtoD", "gpu_memcpy", 20, 5, pid=0, tid=7, External_id=31),
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    assert r["Memcpy HtoD"]["op_id"] == r["aten::copy_"]["id"]
    assert r["Memcpy HtoD"]["launch_id"] is None


def test_identical_timestamps_nest_in_file_order(tmp_path: Path) -> None:
    evs = [
        X("aten::linear", "cpu_op", 10, 20),
        X("aten::addmm", "cpu_op", 10, 20),  # identical interval: a child of the first
        X("cudaLaunchKernel", "cuda_runtime", 10, 20, correlation=1),  # same again: runtime
        X("k", "kernel", 40, 1, pid=0, tid=7, correlation=1),
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    assert r["aten::addmm"]["parent_id"] == r["aten::linear"]["id"]
    assert r["cudaLaunchKernel"]["parent_id"] == r["aten::addmm"]["id"]
    assert r["k"]["op_id"] == r["aten::addmm"]["id"]


def test_zero_length_call_on_an_ops_closing_edge(tmp_path: Path) -> None:
    evs = [
        X("op_a", "cpu_op", 0, 10),
        X("enqueue", "mtia_runtime", 10, 0),  # at op_a's end: op_a's
        X("op_b", "cpu_op", 20, 10),
        X("mark", "cpu_op", 25, 0),
        X("mark2", "cpu_op", 25, 0),  # two zero-length events: siblings
        X("op_c", "cpu_op", 30, 5),  # starts where op_b ends: a sibling
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    assert r["enqueue"]["parent_id"] == r["op_a"]["id"]
    assert r["enqueue"]["op_id"] == r["op_a"]["id"]
    assert r["mark2"]["parent_id"] == r["op_b"]["id"]
    assert r["op_c"]["parent_id"] is None


def test_partial_overlap_picks_the_enclosing_event(tmp_path: Path) -> None:
    evs = [
        X("outer", "cpu_op", 0, 100),
        X("left", "cpu_op", 10, 30),  # 10..40
        X("straddle", "cpu_op", 30, 20),  # 30..50: overlaps left, inside outer
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    assert r["straddle"]["parent_id"] == r["outer"]["id"]
    assert r["left"]["parent_id"] == r["outer"]["id"]


def test_deep_nesting(tmp_path: Path) -> None:
    depth = 3000
    evs = [X(f"f{i}", "python_function", i, 2 * depth - 2 * i) for i in range(depth)]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    parents = t.column("parent_id")
    assert parents[0] is None
    assert parents[1:] == list(range(depth - 1))


def test_steps_and_device_steps(tmp_path: Path) -> None:
    evs = [
        X("ProfilerStep#1", "user_annotation", 0, 100),
        X("ProfilerStep#2", "user_annotation", 100, 100),
        X("aten::mm", "cpu_op", 150, 10),
        X("cudaLaunchKernel", "cuda_runtime", 151, 2, correlation=3),
        X("k", "kernel", 260, 5, pid=0, tid=7, correlation=3),  # runs after step 2 ends
        X("late", "cpu_op", 300, 5),
    ]
    t = load(write(tmp_path / "t.json", evs), cache=False)
    r = by_name(t)
    assert r["aten::mm"]["step"] == 2
    assert r["k"]["step"] == 2  # from its op, not its own time
    assert r["ProfilerStep#2"]["step"] == 2 and r["ProfilerStep#2"]["kind"] == "step"
    assert r["late"]["step"] is None


def test_run_folder_and_rank_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "run.json").write_text("{}")
    for rank in (0, 1, 10):
        doc = {"traceEvents": [X(f"op_r{rank}", "cpu_op", 0, 1)]}
        write(run / "traces" / f"rank{rank}.json.gz", doc)
    t = load(run, cache=False)
    assert t.meta.ranks == [0, 1, 10]
    assert t.meta.rank_origin == {0: "file name", 1: "file name", 10: "file name"}
    got = t.sql("SELECT rank, name, id FROM events ORDER BY rank").to_pylist()
    assert [(g["rank"], g["name"]) for g in got] == [(0, "op_r0"), (1, "op_r1"), (10, "op_r10")]
    assert sorted(g["id"] for g in got) == [0, 1, 2]

    single = tmp_path / "single"
    single.mkdir()
    (single / "run.json").write_text("{}")
    write(single / "trace.json.gz", {"traceEvents": SIMPLE})
    assert len(load(single, cache=False)) == 4


def test_folder_of_ranks_by_distributed_info_and_order(tmp_path: Path) -> None:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for i, name in enumerate(["b.json", "a.json"]):
        doc = {
            "distributedInfo": {"rank": 5 + i},
            "traceEvents": [
                X("aten::mm", "cpu_op", 0, 10),
                X("cudaLaunchKernel", "cuda_runtime", 1, 2, correlation=1),
                X("k", "kernel", 20, 1, pid=0, tid=7, correlation=1),
            ],
        }
        write(folder / name, doc)
    write(folder / "c.json", {"traceEvents": [X("x", "cpu_op", 0, 1)]})
    t = load(folder, cache=False)
    assert t.meta.rank_origin == {6: "distributedInfo", 5: "distributedInfo", 2: "order"}
    # ids are shifted per file, and so are the links
    ks = t.sql(
        "SELECT k.rank, o.rank AS orank, o.name FROM events k JOIN events o ON k.op_id = o.id "
        "WHERE k.name = 'k' ORDER BY k.rank"
    ).to_pylist()
    assert ks == [
        {"rank": 5, "orank": 5, "name": "aten::mm"},
        {"rank": 6, "orank": 6, "name": "aten::mm"},
    ]


def test_parallel_rank_ingest_matches_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opscope.trace.formats import kineto

    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in range(2):
        evs = [X(f"op{i}", "cpu_op", i * 10, 5) for i in range(50)]
        write(folder / f"rank{rank}.json", {"traceEvents": evs})
    serial = load(folder, cache=False)
    monkeypatch.setattr(kineto, "_PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(kineto.os, "cpu_count", lambda: 2)
    parallel = load(folder, cache=False, workers=2)
    assert parallel.events.equals(serial.events)


def test_ranks_from_file_names_of_every_spelling(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    for name in ("trace_rank-3.json", "trace_rank_1.json", "worker2.json", "rank0.json"):
        write(job / name, {"traceEvents": [X(f"op_{name}", "cpu_op", 0, 1)]})
    t = load(job, cache=False)
    assert t.meta.ranks == [0, 1, 2, 3]
    assert set(t.meta.rank_origin.values()) == {"file name"}


def test_sync_calls_are_kind_sync_whatever_their_case(tmp_path: Path) -> None:
    evs = [
        X("cudaDeviceSynchronize", "cuda_runtime", 0, 5),
        X("hipStreamSynchronize", "cuda_runtime", 10, 5),
        X("cudaLaunchKernel", "cuda_runtime", 20, 5),
    ]
    t = load(write(tmp_path / "s.json", evs), cache=False)
    r = by_name(t)
    assert r["cudaDeviceSynchronize"]["kind"] == "sync"
    assert r["hipStreamSynchronize"]["kind"] == "sync"
    assert r["cudaLaunchKernel"]["kind"] == "runtime"
