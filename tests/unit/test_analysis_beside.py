"""The critical path beside the rest of a rank's analysis (opscope.analysis.beside): where it
runs, what it returns and raises, and that a report is the same with or without the thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from test_findings_kit import Doc, shared

from opscope.analysis import beside as B
from opscope.analysis.pipeline import analyze
from opscope.trace import Trace
from opscope.trace.index import EventIndex


def _where() -> str:
    return threading.current_thread().name


def test_small_traces_run_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(B.ENV, raising=False)
    with B.beside(_where, B.MIN_EVENTS - 1) as result:
        assert result is _where  # nothing started: the block runs it where it asks
        assert result() == threading.current_thread().name


def test_large_traces_run_on_a_second_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(B.ENV, raising=False)
    monkeypatch.setattr(B, "_cpus", lambda: 2)
    with B.beside(_where, B.MIN_EVENTS) as result:
        name = result()
    assert name.startswith("opscope-analysis") and name != threading.current_thread().name


@pytest.mark.parametrize(
    ("setting", "cpus", "allowed"),
    [
        ("1", 4, False),
        ("0", 4, False),
        ("2", 4, True),
        ("", 1, False),
        ("", 2, True),
        ("many", 2, True),
    ],
)
def test_threads_allowed(
    monkeypatch: pytest.MonkeyPatch, setting: str, cpus: int, allowed: bool
) -> None:
    monkeypatch.setenv(B.ENV, setting)
    monkeypatch.setattr(B, "_cpus", lambda: cpus)
    assert B.threads_allowed() is allowed


def test_the_side_error_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(B, "_cpus", lambda: 2)
    monkeypatch.delenv(B.ENV, raising=False)

    def fails() -> int:
        raise ValueError("side failed")

    with pytest.raises(ValueError, match="side failed"), B.beside(fails, 10**9) as result:
        result()


def test_a_memo_is_built_once_for_threads_asking_together() -> None:
    import pyarrow as pa

    idx = EventIndex(pa.table({"id": [1, 2]}))
    built: list[int] = []
    start = threading.Barrier(4)

    def build() -> int:
        built.append(1)
        time.sleep(0.05)  # the others ask while this one builds
        return 42

    got: list[int] = []

    def ask() -> None:
        start.wait()
        got.append(idx.memo("k", build))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert got == [42] * 4 and built == [1]


def _busy_trace() -> Trace:
    """Steps of ops that launch kernels, with a sync and a copy: every part has work."""
    d = Doc()
    t = 0.0
    for step in range(4):
        d.step(step, t, 900)
        for i in range(6):
            d.op(
                "aten::mul",
                t + 10 + i * 100,
                60,
                Input_Dims=[[64, 64], [64, 64]],
                Input_type=["float", "float"],
            )
            d.launch(t + 20 + i * 100, 10, f"mul_kernel_{i % 2}", t + 40 + i * 100, 70)
        d.op("aten::copy_", t + 700, 50)
        d.launch(
            t + 705,
            5,
            "Memcpy HtoD (Pageable -> Device)",
            t + 720,
            30,
            cat="gpu_memcpy",
            runtime="cudaMemcpyAsync",
        )
        d.runtime("cudaDeviceSynchronize", t + 800, 80)
        t += 1000
    return d.trace()


def _report(trace: Trace) -> bytes:
    doc = analyze(trace).to_dict()
    doc.pop("id", None)
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS, default=str)


def test_a_report_is_the_same_with_the_side_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(B, "_cpus", lambda: 2)
    monkeypatch.setattr(B, "MIN_EVENTS", 0)
    seen: list[str] = []
    real = B.beside

    def watched(fn: Callable[[], Any], n_events: int) -> Any:
        def on_thread() -> Any:
            seen.append(_where())
            return fn()

        return real(on_thread, n_events)

    monkeypatch.setattr("opscope.analysis.pipeline.beside", watched)
    monkeypatch.setenv(B.ENV, "1")
    serial = _report(_busy_trace())
    monkeypatch.delenv(B.ENV)
    threaded = _report(_busy_trace())
    assert seen[0] == threading.current_thread().name
    assert seen[1].startswith("opscope-analysis")
    assert b'"critical_path"' in threaded and b'"findings"' in threaded
    assert threaded == serial


def test_a_shared_trace_reports_the_same_with_the_side_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace = shared("cuda/diff_pair/test_v100.json.gz")
    assert len(trace) >= B.MIN_EVENTS
    monkeypatch.setattr(B, "_cpus", lambda: 2)
    monkeypatch.setenv(B.ENV, "1")
    serial = _report(trace)
    monkeypatch.delenv(B.ENV)
    threaded = _report(shared("cuda/diff_pair/test_v100.json.gz"))
    assert threaded == serial


def test_the_derived_tables_the_analysis_built_are_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The analysis forgets the op and kernel tables it built once the tables have read them
    (before the rules: the rules, the graph's cut, the path's section and the savings want
    the memory), and nothing reads them again (each is built once); tables built before it
    are the caller's, kept; the report is the same."""
    from opscope.trace import derived

    built: list[str] = []
    for name in ("build_ops", "build_kernels"):
        real = getattr(derived, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            built.append(_name)
            return _real(*a, **k)

        monkeypatch.setattr(derived, name, counted)
    from opscope.analysis import pipeline

    at_rules: list[tuple[str, ...]] = []
    real_rules = pipeline.run_rules

    def rules(ctx: Any) -> Any:
        at_rules.append(ctx.trace.derived_built())
        return real_rules(ctx)

    monkeypatch.setattr(pipeline, "run_rules", rules)
    fresh = _busy_trace()
    assert fresh.derived_built() == ()
    dropped = _report(fresh)
    assert fresh.derived_built() == ()
    assert sorted(built) == ["build_kernels", "build_ops"]
    assert at_rules == [()]  # gone before the rules ran
    kept_trace = _busy_trace()
    kept_trace.ops  # noqa: B018 - built by the caller
    kept = _report(kept_trace)
    assert kept_trace.derived_built() == ("ops",)
    assert b'"ops"' in dropped and kept == dropped


def test_a_distributed_section_does_not_build_the_derived_tables_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A trace with collectives gets a distributed section, which reads each step's compute:
    read with the tables (steps.step_compute), it no longer builds the op table again after
    the analysis dropped it (at 10M events about 1 GB kept to the end, and its time)."""
    from opscope.trace import derived

    built: list[str] = []
    real = derived.build_ops

    def counted(*a: Any, **k: Any) -> Any:
        built.append("ops")
        return real(*a, **k)

    monkeypatch.setattr(derived, "build_ops", counted)
    trace = shared("cuda/a100_nccl_rank0_of2.json.gz")
    report = analyze(trace)
    assert "distributed" in report.extra and report.step_compute_us
    assert built == ["ops"]
    assert trace.derived_built() == ()
    from opscope.analysis.job_report import rank_report
    from opscope.analysis.steps import step_compute

    # what the section read is what the trace gives when asked afresh
    assert rank_report(report).step_compute_us == {
        k: v for k, v in step_compute(trace).items() if report.in_window(k)
    }


@pytest.mark.parametrize("first", [0, 10**12])
def test_tables_first_gives_the_same_report(first: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above TABLES_FIRST_EVENTS the tables are made before the path's thread starts (their
    derived tables and the graph's temporaries never meet); the report is the same either
    way, and the path still runs on the side thread."""
    from opscope.analysis import pipeline

    monkeypatch.setattr(B, "_cpus", lambda: 2)
    monkeypatch.setattr(B, "MIN_EVENTS", 0)
    order: list[str] = []
    real_tables, real_graph = pipeline._rank_tables, pipeline.critical.rank_graph

    def tables(*a: Any, **k: Any) -> Any:
        order.append("tables")
        return real_tables(*a, **k)

    def graph(*a: Any, **k: Any) -> Any:
        order.append("graph:" + ("side" if _where().startswith("opscope-analysis") else "main"))
        return real_graph(*a, **k)

    monkeypatch.setattr(pipeline, "_rank_tables", tables)
    monkeypatch.setattr(pipeline.critical, "rank_graph", graph)
    monkeypatch.setattr(pipeline, "TABLES_FIRST_EVENTS", first)
    got = _report(shared("cuda/diff_pair/test_v100.json.gz"))
    monkeypatch.setenv(B.ENV, "1")
    serial = _report(shared("cuda/diff_pair/test_v100.json.gz"))
    assert got == serial
    assert "graph:side" in order[:2]
    if first == 0:
        assert order[0] == "tables"  # done before the thread started
