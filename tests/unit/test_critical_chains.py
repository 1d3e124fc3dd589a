"""The host threads' chain edges of the critical path: the C pass (``_chains.c``) and its
NumPy twin give the same edges, on hand-made traces that reach each rule and on the shared
traces; bad buffers are refused."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from test_findings_kit import SHARED_TRACES, Doc

from opscope.analysis.critical import host
from opscope.analysis.critical.section import rank_graph
from opscope.trace import Trace, load

native = pytest.mark.skipif(host._native is None, reason="built without a C compiler")

FIELDS = ("time", "row", "role", "src", "dst", "weight", "label", "edge_row", "kind")


def _graph(make: Callable[[], Trace], use_native: bool, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(host, "_use_native", use_native)
    g = rank_graph(make(), None)  # a fresh trace: the graph is kept on its index
    return {f: np.asarray(getattr(g, f)) for f in FIELDS}


def _same(make: Callable[[], Trace], monkeypatch: pytest.MonkeyPatch) -> int:
    a = _graph(make, True, monkeypatch)
    b = _graph(make, False, monkeypatch)
    for f in FIELDS:
        assert a[f].dtype == b[f].dtype and np.array_equal(a[f], b[f]), f
    return len(a["src"])


def _nested_loader_sync() -> Trace:
    d = Doc()
    d.step(1, 0, 1000)
    d.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 5, 60)
    d.op("aten::stack", 10, 40)
    d.op("aten::mul", 100, 50)
    d.launch(110, 10, "mul_kernel", 130, 400)
    d.op("aten::add", 160, 20)
    d.launch(165, 5, "add_kernel", 530, 50)
    d.runtime("cudaDeviceSynchronize", 200, 400)  # waits for add_kernel
    d.op("aten::item", 700, 30)
    d.launch(
        705, 5, "Memcpy DtoH (Device -> Pageable)", 710, 10, cat="gpu_memcpy", runtime="cudaMemcpy"
    )
    d.op("autograd::engine::evaluate_function: MulBackward0", 740, 100, tid=2)
    d.op("aten::add_", 860, 50, tid=1)
    d.op("aten::zero_", 860, 50, tid=1)  # equal times: the tie-breaks
    d.step(2, 1000, 200)
    d.op("gloo:all_reduce", 1010, 100, tid=3)
    return d.trace()


def _two_top_level_with_gap() -> Trace:
    d = Doc(gpu=False)
    d.op("A", 0, 10)
    d.op("B", 50, 10)
    d.op("C", 50, 0)  # zero length at the same time
    return d.trace()


@native
@pytest.mark.parametrize("make", [_nested_loader_sync, _two_top_level_with_gap])
def test_c_and_numpy_give_the_same_edges(
    make: Callable[[], Trace], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _same(make, monkeypatch) > 0


SHARED = [
    "cuda/critical_path_alexnet.json.gz",
    "cuda/critical_path_event_sync.json.gz",
    "cuda/critical_path_event_sync_multi_stream.json.gz",
    "cuda/critical_path_simple_add.json.gz",
    "cuda/a100_nccl_rank0_of2.json.gz",
    "cuda/ns_resolution.pt.trace.json.gz",
    "mtia/mtia_inference_rank0.json.gz",
    "rocm/mi300x_models/qwen1.5_0.5b_chat.json.gz",
]


@native
@pytest.mark.parametrize("rel", SHARED)
def test_c_and_numpy_agree_on_shared_traces(rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SHARED_TRACES / rel
    if not path.exists():
        pytest.skip(f"../shared/traces/{rel} not present (a user's clone)")
    assert _same(lambda: load(path, cache=False), monkeypatch) > 0


@native
def test_bad_buffers_are_refused() -> None:
    assert host._native is not None
    i64 = np.zeros(4, dtype=np.int64)
    rows = tuple(np.zeros(3, dtype=np.int64) for _ in range(6))
    marks = tuple(np.zeros(3, dtype=np.bool_) for _ in range(3))
    codes = np.zeros(7, dtype=np.int8)
    outs = [np.empty(3, dtype=np.int64)] * 3
    small = [np.empty(3, dtype=np.int8), np.empty(3, dtype=np.int64), np.empty(3, dtype=np.int8)]
    order, hrows = np.array([0, 2, 1, 3], dtype=np.int64), np.array([0, 1], dtype=np.int64)
    ok = host._native.chains(order, hrows, rows, marks, codes, *outs[:2], outs[2], *small)
    assert 0 <= ok <= 3
    with pytest.raises(ValueError, match="out of range"):
        host._native.chains(i64 + 9, hrows, rows, marks, codes, *outs, *small)
    with pytest.raises(ValueError, match="out of range"):
        host._native.chains(order, hrows + 7, rows, marks, codes, *outs, *small)
    with pytest.raises(ValueError, match="unequal"):
        host._native.chains(order, hrows, (*rows[:5], i64), marks, codes, *outs, *small)
    with pytest.raises(ValueError, match="six int row buffers"):
        host._native.chains(order, hrows, rows[:5], marks, codes, *outs, *small)
    with pytest.raises(ValueError, match="width 4 or 8"):
        host._native.chains(order, hrows, rows, marks, codes, *outs, *small, 2)
    # ids of 32 bits (width 4): the same edges; 64-bit ids read as 32-bit ones are refused
    i32 = [np.zeros(3, dtype=np.int32), rows[1], rows[2], np.zeros(3, dtype=np.int32)]
    rows32 = (*i32, rows[4], rows[5])
    outs32 = [np.empty(3, dtype=np.int32), np.empty(3, dtype=np.int32), np.empty(3, np.int64)]
    small32 = [np.empty(3, dtype=np.int8), np.empty(3, dtype=np.int32), np.empty(3, np.int8)]
    outs64 = [np.empty(3, dtype=np.int64) for _ in range(3)]
    small64 = [np.empty(3, dtype=np.int8), np.empty(3, dtype=np.int64), np.empty(3, np.int8)]
    want = host._native.chains(order, hrows, rows, marks, codes, *outs64, *small64)
    got = host._native.chains(
        order.astype(np.int32), hrows.astype(np.int32), rows32, marks, codes, *outs32, *small32, 4
    )
    assert got == want
    for a, b in zip([*outs32, *small32], [*outs64, *small64], strict=True):
        assert a[:got].tolist() == b[:want].tolist()
    with pytest.raises(ValueError, match="unequal"):
        host._native.chains(order, hrows, rows, marks, codes, *outs, *small, 4)
    with pytest.raises(ValueError, match="wrong lengths"):
        host._native.chains(order, hrows[:1], rows, marks, codes, *outs, *small)
