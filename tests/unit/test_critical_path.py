"""The critical path on hand-built traces: each edge kind decides the path in one case, with
the length and the time per label computed by hand (times in µs, as the documents give them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from test_findings_kit import Doc

from opscope.analysis.critical.graph import LABELS, build
from opscope.analysis.critical.longest import AVAILABLE, CycleError, longest_paths, path_to
from opscope.analysis.critical.section import (
    WhatIfError,
    finding_savings,
    parse_what_if,
    rank_graph,
    section,
    what_if,
)
from opscope.trace import Trace


def cp(trace: Trace) -> dict[str, Any]:
    return section(trace, rank_graph(trace, None))


def bound(sec: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in sec["bound_by_us"].items() if v}


# -- the longest path itself ---------------------------------------------------------------------


@pytest.mark.parametrize("native", [True, False])
def test_longest_paths_by_hand(native: bool) -> None:
    # 0 -> 1 (5) -> 3 (1); 0 -> 2 (2) -> 3 (10); 4 alone
    src = np.array([0, 1, 0, 2])
    dst = np.array([1, 3, 2, 3])
    w = np.array([5, 1, 2, 10])
    dist, pred = longest_paths(src, dst, w, 5, native=native)
    assert dist.tolist() == [0, 5, 2, 12, 0]
    assert path_to(3, pred, src).tolist() == [2, 3]
    assert pred[4] == -1


def test_native_and_python_agree_on_random_dags() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        n = int(rng.integers(2, 200))
        m = int(rng.integers(1, 600))
        a = rng.integers(0, n, m)
        b = rng.integers(0, n, m)
        keep = a != b
        src, dst = np.minimum(a, b)[keep], np.maximum(a, b)[keep]  # forward only: a DAG
        w = rng.integers(0, 1000, len(src))
        d1, p1 = longest_paths(src, dst, w, n, native=True)
        d2, p2 = longest_paths(src, dst, w, n, native=False)
        assert d1.tolist() == d2.tolist()
        assert p1.tolist() == p2.tolist()


@pytest.mark.skipif(not AVAILABLE, reason="the C extension is not built")
def test_native_and_python_agree_on_a_large_dag_with_ties() -> None:
    """Large enough for the C search's scratch to take huge-page blocks; weights of few values
    make many equally long paths, where both keep the first found (the same pred)."""
    rng = np.random.default_rng(11)
    n, m = 300_000, 700_000
    a = rng.integers(0, n, m)
    b = np.minimum(a + rng.integers(1, 50, m), n - 1)
    keep = a != b
    src, dst = a[keep], b[keep]
    w = rng.integers(0, 3, len(src))
    d1, p1 = longest_paths(src, dst, w, n, native=True)
    d2, p2 = longest_paths(src, dst, w, n, native=False)
    assert np.array_equal(d1, d2)
    assert np.array_equal(p1, p2)


def _forward_dag(rng: np.random.Generator) -> tuple[int, np.ndarray, np.ndarray]:
    """A random DAG, every edge from a lower node to a higher one: ``n, src, dst``."""
    n = int(rng.integers(2, 300))
    m = int(rng.integers(1, 900))
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    ok = a != b
    return n, np.minimum(a, b)[ok], np.maximum(a, b)[ok]


@pytest.mark.parametrize("native", [True, False])
def test_factor_searches_the_multiplied_weights(native: bool) -> None:
    """``factor`` gives what ``weight * factor`` gives (ties broken alike), with ``keep`` too."""
    rng = np.random.default_rng(9)
    for _ in range(20):
        n, src, dst = _forward_dag(rng)
        w = rng.integers(0, 4, len(src)) * 10**9  # few values, large: ties and int64 sums
        f = rng.choice(np.array([1, 7, 1000], dtype=np.int16), len(src))
        keep = rng.random(len(src)) < 0.7
        for k in (None, keep):
            d1, p1 = longest_paths(src, dst, w * f.astype(np.int64), n, keep=k, native=False)
            d2, p2 = longest_paths(src, dst, w, n, keep=k, factor=f, native=native)
            assert np.array_equal(d1, d2) and np.array_equal(p1, p2)
    with pytest.raises(ValueError, match="factor"):
        longest_paths(src, dst, w, n, factor=f[:-1], native=native)


@pytest.mark.parametrize("native", [True, False])
def test_keep_searches_the_kept_edges_as_if_alone(native: bool) -> None:
    """``keep`` gives what the kept edges alone give (pred then named in the whole arrays),
    ties included: the subset's Kahn order, not the whole graph's."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        n, src, dst = _forward_dag(rng)
        w = rng.integers(0, 3, len(src))  # few values: many ties
        keep = rng.random(len(src)) < 0.6
        sub = np.flatnonzero(keep)
        d_sub, p_sub = longest_paths(src[sub], dst[sub], w[sub], n, native=False)
        want = np.where(p_sub >= 0, sub[np.maximum(p_sub, 0)] if len(sub) else -1, -1)
        dist, pred = longest_paths(src, dst, w, n, keep=keep, native=native)
        assert dist.tolist() == d_sub.tolist()
        assert pred.tolist() == want.tolist()
    # a cycle among dropped edges is no cycle
    src, dst, w = np.array([0, 1, 1]), np.array([1, 0, 2]), np.array([4, 1, 2])
    dist, pred = longest_paths(src, dst, w, 3, keep=np.array([True, False, True]), native=native)
    assert dist.tolist() == [0, 4, 6]
    assert pred.tolist() == [-1, 0, 2]
    with pytest.raises(ValueError, match="one value per edge"):
        longest_paths(src, dst, w, 3, keep=np.array([True]), native=native)


@pytest.mark.parametrize("native", [True, False])
def test_a_cycle_is_refused(native: bool) -> None:
    with pytest.raises(CycleError):
        longest_paths(np.array([0, 1]), np.array([1, 0]), np.array([1, 1]), 2, native=native)


def test_an_edge_outside_the_graph_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        longest_paths(np.array([0]), np.array([3]), np.array([1]), 2)


# -- host threads -------------------------------------------------------------------------------


def test_nested_host_ops_tile_their_parent() -> None:
    d = Doc(gpu=False)
    d.op("A", 0, 100)
    d.op("B", 10, 30)
    d.op("C", 50, 40)
    sec = cp(d.trace())
    assert sec["length_us"] == 100.0
    assert bound(sec) == {"cpu": 100.0}
    per = {}
    for s in sec["segments"]:
        per[s["name"]] = per.get(s["name"], 0.0) + s["dur_us"]
    assert per == {"A": 30.0, "B": 30.0, "C": 40.0}  # A's own time: before, between, after


def test_a_gap_between_top_level_ops_is_untraced_time_on_the_path() -> None:
    d = Doc(gpu=False)
    d.op("A", 0, 10)
    d.op("B", 50, 10)
    tr = d.trace()
    sec = cp(tr)
    assert sec["length_us"] == 60.0 == sec["wall_us"]  # the 40 µs gap is on it, named
    assert bound(sec) == {"cpu": 20.0, "untraced": 40.0}
    assert sec["explained_share"] == round(20 / 60, 4)
    gap = [s for s in sec["segments"] if s["label"] == "untraced"]
    ids = {
        str(n): int(i)
        for n, i in zip(tr.events["name"].to_pylist(), tr.events["id"].to_pylist(), strict=True)
    }
    assert gap == [
        {
            "rank": 0,
            "label": "untraced",
            "name": None,
            "event_id": None,
            "start_ns": int(tr.index.start.min()) + 10_000,
            "dur_us": 40.0,
            "evidence": {
                "thread": str(tr.events["tid"][0]),
                "before_event_id": ids["A"],
                "after_event_id": ids["B"],
            },
        }
    ]


def test_time_under_a_user_range_is_the_range_s_and_inside_an_op_the_op_s() -> None:
    d = Doc(gpu=False)
    d.op("load batch", 0, 40, cat="user_annotation")  # a record_function range, no op inside
    d.op("A", 40, 60)
    d.op("my_region", 50, 20, cat="user_annotation")  # inside A: A's own time
    sec = cp(d.trace())
    assert sec["length_us"] == 100.0
    assert bound(sec) == {"cpu": 100.0}
    per: dict[str, float] = {}
    for g in sec["segments"]:
        per[g["name"]] = per.get(g["name"], 0.0) + g["dur_us"]
    assert per == {"load batch": 40.0, "A": 60.0}


def test_data_loading_is_labelled_under_the_loader() -> None:
    d = Doc(gpu=False)
    d.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 60)
    d.op("aten::stack", 10, 40)
    d.op("aten::mm", 70, 30)
    sec = cp(d.trace())
    assert bound(sec) == {"data_loading": 60.0, "cpu": 30.0, "untraced": 10.0}


def test_a_loader_range_without_ops_is_data_loading() -> None:
    """A DataLoader iterator's ``__next__`` as PyTorch records it (a ``record_function``
    range, no op under it while the dataset sleeps or decodes): its time is the loader's."""
    d = Doc(gpu=False)
    d.step(1, 0, 200)
    d.op(
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 5, 120, cat="user_annotation"
    )
    d.op("aten::mm", 130, 60)
    sec = cp(d.trace())
    assert bound(sec) == {"data_loading": 120.0, "cpu": 60.0, "untraced": 20.0}
    assert sec["steps"][0]["length_us"] == sec["steps"][0]["wall_us"] == 200.0


@pytest.mark.parametrize("name", ["DataLoader.fetch", "my_dataloader", "Data_Loader step"])
def test_a_data_loading_name_is_matched_in_any_case(name: str) -> None:
    d = Doc(gpu=False)
    d.op(name, 0, 60)
    d.op("aten::mm", 70, 30)
    assert bound(cp(d.trace())) == {"data_loading": 60.0, "cpu": 30.0, "untraced": 10.0}


# -- launches, streams, syncs -------------------------------------------------------------------


def test_a_launch_bound_kernel() -> None:
    d = Doc()
    d.op("aten::mul", 0, 100)
    d.launch(10, 10, "k", 30, 170)
    sec = cp(d.trace())
    # 10 µs of the op, the launch delay from the call's start to the kernel's, the kernel
    assert sec["length_us"] == 200.0
    assert bound(sec) == {"cpu": 10.0, "launch_overhead": 20.0, "gpu_compute": 170.0}


def test_a_queued_kernel_waits_for_the_one_before_it() -> None:
    d = Doc()
    d.op("aten::mul", 0, 40)
    d.launch(10, 5, "k1", 30, 70)  # 30..100
    d.launch(20, 5, "k2", 102, 48)  # launched long before k1 ended: queued, 2 µs gap
    sec = cp(d.trace())
    assert sec["length_us"] == 150.0
    assert bound(sec) == {
        "cpu": 10.0,
        "launch_overhead": 20.0,
        "gpu_compute": 118.0,
        "kernel_kernel_gap": 2.0,
    }


def test_the_host_waits_for_the_device_at_a_sync() -> None:
    d = Doc()
    d.op("step", 0, 300)
    d.launch(10, 10, "k", 30, 220)  # 30..250
    d.runtime("cudaDeviceSynchronize", 40, 220)  # 40..260: waits for k
    tr = d.trace()
    sec = cp(tr)
    # the path runs through the device, then the 10 µs the sync took to return, then the host
    assert sec["length_us"] == 300.0
    assert bound(sec) == {"cpu": 50.0, "launch_overhead": 20.0, "gpu_compute": 220.0, "sync": 10.0}
    names = [s["name"] for s in sec["segments"]]
    assert names.index("k") < names.index("cudaDeviceSynchronize")
    # halving the kernel: 110 µs shorter, the path still on the device
    w = what_if(tr, rank_graph(tr, None), "gpu_compute=0.5")
    assert w["projected_us"] == 190.0 and w["saved_us"] == 110.0


def test_without_the_device_the_sync_is_host_time_waiting() -> None:
    d = Doc(gpu=False)
    d.op("step", 0, 100)
    d.runtime("cudaStreamSynchronize", 20, 60)
    sec = cp(d.trace())
    assert bound(sec) == {"cpu": 40.0, "sync": 60.0}


def _event_sync_doc(wait_after_record: bool) -> Doc:
    d = Doc()
    d.op("step", 0, 400)
    d.launch(10, 10, "k", 30, 200)  # 30..230
    d.events.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaEventRecord",
            "pid": 1,
            "tid": 1,
            "ts": 25,
            "dur": 2,
            "args": {"correlation": 5000},
        }
    )
    d.events.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaEventSynchronize",
            "pid": 1,
            "tid": 1,
            "ts": 40,
            "dur": 200,
            "args": {"correlation": 5001},
        }
    )
    d.events.append(
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Event Sync",
            "pid": 0,
            "tid": 7,
            "ts": 40,
            "dur": 195,
            "args": {
                "correlation": 5001,
                "cuda_sync_kind": "Event Sync",
                "wait_on_stream": 7,
                "wait_on_cuda_event_record_corr_id": 5000 if wait_after_record else 4999,
            },
        }
    )
    return d


def test_an_event_sync_waits_for_the_recorded_work() -> None:
    sec = cp(_event_sync_doc(True).trace())
    # device: 10 + launch 20 + kernel 200, then the sync returns 10 µs later, host 160
    assert bound(sec) == {"cpu": 170.0, "launch_overhead": 20.0, "gpu_compute": 200.0, "sync": 10.0}
    assert sec["length_us"] == 400.0


def test_an_event_sync_on_an_unknown_record_falls_back_to_the_host() -> None:
    sec = cp(_event_sync_doc(False).trace())
    # no awaited work is known: the call's whole span is time the host waited (sync)
    assert sec["bound_by_us"]["sync"] == 200.0
    assert sec["bound_by_us"]["gpu_compute"] == 0.0


def test_a_cross_stream_wait_orders_the_waiting_stream() -> None:
    d = Doc()
    d.op("step", 0, 60)
    d.launch(5, 5, "producer", 20, 300, stream=7)  # 20..320
    d.events += [
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaEventRecord",
            "pid": 1,
            "tid": 1,
            "ts": 12,
            "dur": 2,
            "args": {"correlation": 6000},
        },
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaStreamWaitEvent",
            "pid": 1,
            "tid": 1,
            "ts": 15,
            "dur": 2,
            "args": {"correlation": 6001},
        },
        {
            "ph": "X",
            "cat": "cuda_sync",
            "name": "Stream Wait Event",
            "pid": 0,
            "tid": 9,
            "ts": 18,
            "dur": 1,
            "args": {
                "correlation": 6001,
                "cuda_sync_kind": "Stream Wait Event",
                "wait_on_stream": 7,
                "wait_on_cuda_event_record_corr_id": 6000,
            },
        },
    ]
    d.launch(20, 5, "consumer", 325, 50, stream=9)  # waits for producer: starts 5 µs after
    sec = cp(d.trace())
    assert sec["length_us"] == 375.0
    assert bound(sec) == {
        "cpu": 5.0,
        "launch_overhead": 15.0,
        "gpu_compute": 350.0,
        "kernel_kernel_gap": 5.0,
    }


def test_a_blocking_copy_is_a_sync() -> None:
    d = Doc()
    d.op("aten::item", 0, 100)
    d.launch(
        10,
        80,
        "Memcpy DtoH (Device -> Pageable)",
        30,
        50,
        cat="gpu_memcpy",
        runtime="cudaMemcpyAsync",
    )
    sec = cp(d.trace())
    # 10 cpu, launch 20, copy 50, the call returns 10 µs after the copy, 10 µs of the op
    assert sec["length_us"] == 100.0
    assert bound(sec) == {"cpu": 20.0, "launch_overhead": 20.0, "gpu_compute": 50.0, "sync": 10.0}


def test_a_backward_thread_hands_back_to_the_caller() -> None:
    d = Doc(gpu=False)
    d.op("aten::mm", 0, 100, tid=1)  # forward on the main thread
    d.op("autograd::engine::evaluate_function: MmBackward0", 110, 200, tid=2)
    d.op("aten::add_", 320, 50, tid=1)  # optimizer after backward
    sec = cp(d.trace())
    # main 100, backward 200, main 50, and the engine's hand-offs between them (untraced)
    assert sec["length_us"] == 370.0
    assert bound(sec) == {"cpu": 350.0, "untraced": 20.0}


def test_steps_each_get_their_own_path() -> None:
    d = Doc(gpu=False)
    d.step(1, 0, 100)
    d.op("A", 10, 50)
    d.step(2, 100, 100)
    d.op("B", 110, 70)
    sec = cp(d.trace())
    # each step's path is its wall: what no op explains is untraced, and named so
    assert [(s["step"], s["length_us"], s["wall_us"]) for s in sec["steps"]] == [
        (1, 100.0, 100.0),
        (2, 100.0, 100.0),
    ]
    assert [s["bound_by_us"]["untraced"] for s in sec["steps"]] == [50.0, 30.0]
    assert [s["explained_share"] for s in sec["steps"]] == [0.5, 0.7]
    assert set(sec["bound_by_us"]) == set(LABELS)


def test_a_step_s_path_holds_the_work_that_ran_in_its_span() -> None:
    """A kernel launched in step 1 that runs on into step 2: each step's path covers its own
    span, the kernel's time shared between them at the boundary."""
    d = Doc()
    d.step(1, 0, 100)
    d.op("aten::mm", 0, 20)
    d.launch(5, 5, "mm_kernel", 20, 150)  # 20..170: past step 1's end
    d.step(2, 100, 100)
    d.runtime("cudaDeviceSynchronize", 110, 70)  # waits for mm_kernel (ends 170)
    sec = cp(d.trace())
    steps = {s["step"]: s for s in sec["steps"]}
    assert steps[1]["length_us"] == 100.0 and steps[2]["length_us"] == 100.0
    assert steps[2]["bound_by_us"]["gpu_compute"] == 70.0  # 100..170 of the kernel
    assert steps[2]["bound_by_us"]["sync"] == 10.0  # the sync's return after it


# -- what-if and savings ------------------------------------------------------------------------


def test_what_if_specs() -> None:
    assert parse_what_if("aten::mul=0.5, launch_overhead=0") == [
        ("aten::mul", 0.5),
        ("launch_overhead", 0.0),
    ]
    for bad in ("aten::mul", "x=-1", "x=abc", " , "):
        with pytest.raises(WhatIfError):
            parse_what_if(bad)


def test_what_if_an_op_scales_its_kernels_only() -> None:
    d = Doc()
    d.op("aten::mul", 0, 20)
    d.launch(5, 5, "mul_kernel", 15, 100)
    d.op("aten::add", 30, 20)
    d.launch(35, 5, "add_kernel", 120, 100)  # queued behind mul_kernel
    tr = d.trace()
    g = rank_graph(tr, None)
    w = what_if(tr, g, "aten::mul=0.5")
    assert w["length_us"] == 220.0
    assert w["projected_us"] == 170.0
    with pytest.raises(WhatIfError, match="no event named"):
        what_if(tr, g, "aten::nothing=0.5")


def test_analyze_answers_a_what_if_in_the_report() -> None:
    import opscope
    from opscope.analysis.critical.section import WhatIfError
    from opscope.documents import Report as ReportDoc
    from schema_checks import undeclared

    d = Doc()
    d.op("aten::mul", 0, 20)
    d.launch(5, 5, "mul_kernel", 15, 100)
    d.op("aten::add", 30, 20)
    d.launch(35, 5, "add_kernel", 120, 100)
    tr = d.trace()
    doc = opscope.analyze(tr, what_if="aten::mul=0.5").to_dict()
    alone = what_if(tr, rank_graph(tr, None), "aten::mul=0.5")
    assert doc["what_if"] == {"scope": "rank", "rank": 0, **alone}
    assert doc["what_if"]["scope"] == "rank" and doc["what_if"]["projected_us"] == 170.0
    assert not undeclared(doc, ReportDoc)
    assert "what_if" not in opscope.analyze(tr).to_dict()
    with pytest.raises(WhatIfError, match="NAME=FACTOR"):
        opscope.analyze(tr, what_if="nonsense")


def test_a_finding_off_the_path_saves_nothing() -> None:
    d = Doc()
    d.op("aten::big", 0, 1000)  # host-bound: the kernels run beside it
    d.launch(10, 5, "small_kernel", 20, 50)
    tr = d.trace()
    g = build(tr.index)
    kernel_id = int(tr.index.ids[np.flatnonzero(tr.index.name.eq("small_kernel"))[0]])
    host_id = int(tr.index.ids[np.flatnonzero(tr.index.name.eq("aten::big"))[0]])
    findings = [
        {"kind": "fusion", "time_at_stake_us": 40.0, "evidence": [{"event_ids": [kernel_id]}]},
        {"kind": "hotspots", "time_at_stake_us": 500.0, "evidence": [{"event_ids": [host_id]}]},
        {"kind": "other", "time_at_stake_us": 7.0, "evidence": []},
    ]
    assert finding_savings(tr, g, findings) == [0.0, 500.0, 7.0]


# -- renderers --------------------------------------------------------------------------------


def test_renderers_show_the_path() -> None:
    from opscope.analysis.pipeline import analyze
    from opscope.render import markdown, text

    d = Doc()
    d.step(1, 0, 300)
    d.op("aten::mul", 0, 100)
    d.launch(10, 10, "mul_kernel", 30, 170)
    data = analyze(d.trace()).to_dict()
    short = text.render_text(data)
    # the step is 300 µs of host time: the path is the host's (the kernel ended at 200)
    assert "critical path 300 µs" in short and "untraced 67%" in short
    assert "Critical path per step" not in short
    full = text.render_text(data, critical_path=True)
    assert "Critical path per step" in full and "Biggest pieces on the path" in full
    md = markdown.render_markdown(data)
    assert "## Critical path" in md and "| untraced | 200 µs | 66.7% |" in md
    assert "300 µs of 300 µs wall, 33% of it explained by traced work." in md


def test_a_gap_finding_saves_the_path_time_inside_its_ranges() -> None:
    d = Doc()
    d.op("aten::a", 0, 100)
    d.launch(10, 5, "k1", 20, 10)
    d.op("aten::b", 100, 100)  # the device idles here, the host is on the path
    d.launch(190, 5, "k2", 200, 10)
    tr = d.trace()
    g = build(tr.index)
    t0 = int(tr.index.start.min())  # ranges are absolute ns
    found = [
        {
            "kind": "idle_gaps",
            "time_at_stake_us": 170.0,
            "evidence": [{"start_ns": t0 + 30_000, "end_ns": t0 + 200_000}],
        },
        {
            "kind": "idle_gaps",
            "time_at_stake_us": 500.0,
            "evidence": [{"start_ns": t0 + 300_000, "end_ns": t0 + 400_000}],  # after the end
        },
    ]
    assert finding_savings(tr, g, found) == [170.0, 0.0]


def test_each_steps_end_node_is_the_lexsorts_first() -> None:
    """Per step, the node of largest distance and the first of equals: what a lexsort by
    (step, -dist) puts first, on random steps (small, spread out, none) and many ties."""
    from opscope.analysis.critical.path import _step_ends

    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(0, 200))
        scale = int(rng.choice([1, 1000, 10**12]))
        step = rng.integers(-1, int(rng.integers(1, 8)), n) * scale
        dist = rng.integers(0, int(rng.integers(1, 6)), n)
        ends, steps = _step_ends(dist, step)
        want_steps = np.unique(step[step >= 0])
        order = np.lexsort((-dist, step))
        want = order[np.searchsorted(step[order], want_steps, side="left")]
        assert np.array_equal(steps, want_steps)
        assert np.array_equal(ends, want)


def test_the_acyclic_checks_solution_serves_only_its_own_arrays() -> None:
    from dataclasses import replace

    from opscope.analysis.critical.path import longest_edges, solve

    d = Doc()
    for i in range(6):
        d.op(f"op{i}", 100 * i, 40)
        d.launch(100 * i + 5, 10, f"k{i}", 100 * i + 20, 60 + 10 * i)
    graph = rank_graph(d.trace(), None)
    assert graph.solved(graph.weight) is not None  # the check's dist and pred, kept
    path = solve(graph)
    assert graph.solved(graph.weight) is None  # taken by the first solve, not kept
    fresh = longest_edges(graph.src, graph.dst, graph.weight, graph.n_nodes)
    assert np.array_equal(path.edges, fresh[0]) and path.length_ns == fresh[1]
    assert np.array_equal(solve(graph).edges, path.edges)
    # a copy with other weights (a what-if) solves its own
    graph = rank_graph(d.trace(), None)
    other = replace(graph, weight=graph.weight * 0)
    assert other.solved(other.weight) is None
    assert solve(other).length_ns == 0
    assert graph.solved(graph.weight.copy()) is None


def test_time_inside_ranges_by_prefix_sums_equals_the_pass_over_the_path() -> None:
    from opscope.analysis.critical.section import _OnPath

    rng = np.random.default_rng(3)
    for trial in range(200):
        n = int(rng.integers(1, 60))
        on = _OnPath.__new__(_OnPath)
        starts = np.cumsum(rng.integers(0, 50, n)) + 10**15  # a clock far from zero
        w = rng.integers(1, 80, n)
        if trial % 3 == 0:  # out of order: the pass itself
            starts = rng.permutation(starts)
        on.t0, on.t1 = starts, starts + w
        if trial % 3 == 1:  # ends out of order, starts in order
            on.t1 = starts + w[::-1]
        ranges = []
        for _ in range(int(rng.integers(1, 6))):
            a = int(starts.min()) + int(rng.integers(-100, 3000))
            ranges.append((a, a + int(rng.integers(-20, 400))))
        want = sum(
            int(np.clip(np.minimum(on.t1, b) - np.maximum(on.t0, a), 0, None).sum())
            for a, b in ranges
        )
        assert on.inside(ranges) == want


@pytest.mark.parametrize("seed", range(5))
def test_the_host_call_order_is_the_six_key_order(seed: int) -> None:
    """``host.call_order`` (three sort keys) against the six-key order it replaced, on rows
    with many equal times, depths and threads."""
    from opscope.analysis.critical.host import call_order

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    rows = np.sort(rng.choice(5000, size=n, replace=False)).astype(np.int64)
    start = rng.integers(0, 30, n)
    t = np.concatenate([start, start + rng.integers(0, 5, n)])
    depth = rng.integers(0, 6, n)
    thread = rng.integers(0, 3, n)
    rows2 = np.concatenate([rows, rows])
    is_end = np.arange(2 * n) >= n
    dk = np.where(is_end, -np.concatenate([depth, depth]), np.concatenate([depth, depth]))
    cls = np.where(is_end, 0, 2)
    want = np.lexsort((is_end, rows2, dk, cls, t, np.concatenate([thread, thread])))
    assert call_order(rows, t, depth, thread).tolist() == want.tolist()
    assert call_order(rows[:0], t[:0], depth[:0], thread[:0]).tolist() == []
