"""Flow endpoints are put on the events' lanes by value (the events' own codes, no strings of
the events made): the same links as one dictionary of both sides' strings gives, which stays
as the path for a dictionary holding a value twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from test_trace_formats import X, write

from opscope.trace import link as L
from opscope.trace.kineto.file import parse_file

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def _links(path: Path) -> tuple[Any, Any]:
    parsed, _ = parse_file(path)
    return parsed.events, parsed.flows


def _doc(tmp_path: Path) -> Path:
    """The flows test's graph launch (test_trace_formats), with endpoints on lanes no event
    has (a pid, a tid) and a ``t`` step on a third kernel's lane."""
    events: list[dict[str, Any]] = [
        X("aten::replay", "cpu_op", 0, 100),
        X("hipGraphLaunch", "cuda_runtime", 10, 20),
        *(X(f"k{i}", "kernel", 50 + 10 * i, 5, pid=0, tid=7 + i // 2) for i in range(3)),
        {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 10, "cat": "ac2g", "name": "ac2g"},
        *({"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": t, "cat": "ac2g"} for t in (50, 60)),
        {"ph": "f", "id": 5, "pid": 9, "tid": 7, "ts": 70, "cat": "ac2g"},
        {"ph": "f", "id": 5, "pid": 0, "tid": 99, "ts": 70, "cat": "ac2g"},
        {"ph": "t", "id": 5, "pid": 0, "tid": 8, "ts": 70, "cat": "ac2g"},
    ]
    return write(tmp_path / "t.json", {"traceEvents": events})


def _equal(a: L.Links, b: L.Links) -> None:
    for field in ("parent", "op", "launch", "step"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


def test_flow_lanes_are_the_events_codes_and_minus_one_where_no_event_is() -> None:
    lanes = L._event_lanes(
        pa.chunked_array([pa.array(["1", "0", "0"]).dictionary_encode()]),
        pa.chunked_array([pa.array(["1", "7", "8"]).dictionary_encode()]),
    )
    got = L._coded_like(
        lanes,
        pa.chunked_array([pa.array(["0", "1", "9", "0", None])]),
        pa.chunked_array([pa.array(["8", "1", "7", "99", "7"])]),
    )
    assert got is not None
    assert got.tolist() == [lanes.codes[2], lanes.codes[0], -1, -1, -1]


def test_a_dictionary_holding_a_value_twice_is_not_matched_by_value() -> None:
    pid = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2]), pa.array(["0", "1", "0"]))
    tid = pa.array(["1", "1", "1"]).dictionary_encode()
    lanes = L._event_lanes(pa.chunked_array([pid]), pa.chunked_array([tid]))
    flows = pa.chunked_array([pa.array(["0"])])
    assert L._coded_like(lanes, flows, pa.chunked_array([pa.array(["1"])])) is None


def _both_ways(events: Any, flows: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    by_value = L.link(events, flows)
    with monkeypatch.context() as m:
        m.setattr(L, "_coded_like", lambda *a: None)  # one dictionary of both sides' strings
        by_strings = L.link(events, flows)
    _equal(by_value, by_strings)


def test_the_links_are_those_of_one_dictionary_of_both_sides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, flows = _links(_doc(tmp_path))
    _both_ways(events, flows, monkeypatch)
    got = L.link(events, flows)
    names = events.column("name").to_pylist()
    launch = {names[i]: int(got.launch[i]) for i in range(len(names))}
    graph = names.index("hipGraphLaunch")
    assert launch["k0"] == launch["k1"] == graph  # the flow's ends on the kernels' lane
    assert launch["k2"] == graph  # a "t" step on its own lane counts as an end too


@pytest.mark.parametrize(
    "relative",
    [  # traces with device events that only flows link
        "mtia/mtia_inference_rank0.json.gz",
        "rocm/mi300x_models/qwen1.5_0.5b_chat.json.gz",
        "rocm/mi300x_resnet_act_checkpoint_rank0_of8.json.gz",
        "cuda/ns_resolution.pt.trace.json.gz",
    ],
)
def test_shared_traces_link_alike_both_ways(relative: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"../shared/traces/{relative} not present")
    events, flows = _links(path)
    if not flows.num_rows:
        pytest.skip(f"{relative}: no flows")
    _both_ways(events, flows, monkeypatch)
