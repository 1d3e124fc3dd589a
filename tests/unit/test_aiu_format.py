"""IBM AIU traces (trace.formats.aiu): a bare array of begin/end events with ``attr``, no
categories, one process id per card; on a small document of that shape (no shared files)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.pipeline import analyze
from opscope.trace import formats, load
from opscope.trace.formats import aiu

TID_EXEC = 2009867741857745393
TID_PREP = 15514734831341844875  # over 2**63: a uint64 thread id
TID_OUT = 3789868786995959152
TID_IN = 14212308887215440790
T0 = 2_097_962_447_000.0  # µs


def _pair(name: str, pid: int, tid: int, t0: float, t1: float, **attr: str) -> list[dict[str, Any]]:
    base = {"attr": {"Power": "1", **attr}, "name": name, "pid": pid, "tid": tid}
    return [{**base, "ph": "B", "ts": T0 + t0}, {**base, "ph": "E", "ts": T0 + t1}]


def _doc() -> list[dict[str, Any]]:
    """Two cards: each computes, then card 0 sends 4096 bytes of an all-reduce to card 1,
    which adds and sends them back."""
    g = {"CollGroup": "AllReduce_all_reduce_1", "Bytes": "4096"}
    ev: list[dict[str, Any]] = []
    for pid in (0, 1):
        ev += _pair("add_1 Cmpt Prep", pid, TID_PREP, 0.0, 10.0)
        ev += _pair("add_1 Cmpt Exec", pid, TID_EXEC, 10.0, 50.0)
    ev += _pair("SenRdmaSend_1 [sync=AllReduce_all_reduce_1_s0_r1_0] DmaO", 0, TID_OUT, 50, 70, **g)
    ev += _pair(
        "SenRdmaReceive_2 [4096B] [sync=AllReduce_all_reduce_1_s1_r0_1] DmaI",
        0,
        TID_IN,
        52,
        100,
        Peer="1",
        **g,
    )
    ev += _pair(
        "SenRdmaReceive_3 [4096B] [sync=AllReduce_all_reduce_1_s0_r1_0] DmaI",
        1,
        TID_IN,
        45,
        72,
        **g,
    )
    ev += _pair("AllReduce_all_reduce_1_Add_1 Cmpt Exec", 1, TID_EXEC, 72, 80, CollGroup="x")
    ev += _pair("SenRdmaSend_4 [sync=AllReduce_all_reduce_1_s1_r0_1] DmaO", 1, TID_OUT, 80, 98, **g)
    return ev


def _write(tmp_path: Path, doc: Any, name: str = "aiu.json", gz: bool = False) -> Path:
    path = tmp_path / name
    data = json.dumps(doc, indent=4).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("gz", [False, True])
def test_sniffed_as_aiu(tmp_path: Path, gz: bool) -> None:
    path = _write(tmp_path, _doc(), "t.json.gz" if gz else "t.json", gz=gz)
    assert formats.detect(path).name == "aiu"


def test_kineto_files_are_not_claimed(tmp_path: Path) -> None:
    x = {"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 1, "dur": 2, "args": {"attr": 1}}
    array = _write(tmp_path, [x], "array.json")
    obj = _write(tmp_path, {"traceEvents": [{**x, "attr": {"a": "1"}}]}, "obj.json")
    both = _write(tmp_path, [{**x, "attr": {"a": "1"}}], "both.json")  # args come first
    for path in (array, obj, both):
        assert formats.detect(path).name == "kineto", path.name
    assert not aiu.sniff(tmp_path)  # a folder


def test_events_paired_attr_as_args_one_rank_per_card(tmp_path: Path) -> None:
    trace = load(_write(tmp_path, _doc()))
    assert trace.meta.format == "aiu"
    assert trace.meta.ranks == [0, 1]
    assert set(trace.meta.rank_origin.values()) == {"order (process id)"}
    assert (trace.device.kind, trace.device.name) == ("aiu", "IBM AIU")
    rows = trace.events.to_pylist()
    assert len(rows) == len(_doc()) // 2  # every begin met its end
    by_name = {(r["rank"], r["name"]): r for r in rows}
    send = by_name[(0, "SenRdmaSend_1 [sync=AllReduce_all_reduce_1_s0_r1_0] DmaO")]
    assert (send["dur_ns"], send["cat"], send["kind"]) == (20_000, "aiu_rdma", "comm")
    assert json.loads(send["args"]) == {
        "Power": "1",
        "CollGroup": "AllReduce_all_reduce_1",
        "Bytes": "4096",
    }
    assert send["tid"] == str(TID_OUT)
    prep = by_name[(1, "add_1 Cmpt Prep")]
    assert (prep["source"], prep["kind"], prep["tid"]) == ("runtime", "runtime", str(TID_PREP))
    assert by_name[(1, "AllReduce_all_reduce_1_Add_1 Cmpt Exec")]["kind"] == "kernel"


def test_the_collective_across_the_cards(tmp_path: Path) -> None:
    doc = analyze(_write(tmp_path, _doc()), roofline=False).to_dict()
    dist = doc["distributed"]
    assert dist["ranks"] == [0, 1]
    per = {r["rank"]: r for r in dist["per_rank"]}
    # card 0: send 50-70 and receive 52-100 -> 50 µs of communication; card 1: 45-72, 80-98
    assert per[0]["comm_us"] == pytest.approx(50.0)
    assert per[1]["comm_us"] == pytest.approx(27.0 + 18.0)
    (g,) = dist["by_collective"]
    assert (g["name"], g["count"], g["bytes"]) == ("all_reduce", 2, 2 * 4096)
    (inst,) = dist["instances"]
    assert (inst["name"], inst["ranks"], inst["bytes"]) == ("all_reduce", [0, 1], 4096)
    # card 1 arrives at 45 µs, card 0 at 50 µs: card 1 waits 5 µs
    assert inst["wait_us"] == {"0": pytest.approx(0.0), "1": pytest.approx(5.0)}
    assert inst["dur_us"] == pytest.approx(min(50.0, 53.0))
    assert "process id" in " ".join(dist["warnings"])


def test_not_an_array_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="JSON array"):
        aiu.documents({"attr": {}})
