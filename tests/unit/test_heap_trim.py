"""The heap's free pages handed back between an analysis's largest parts
(``opscope.trace.heap``): only once a command asked for it, before the compaction, at the
cut, before the pieces and the section, and before each what-if of the savings; the report
the same either way."""

from __future__ import annotations

import ctypes.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from opscope.analysis.pipeline import analyze
from opscope.trace import heap, load

GLIBC = sys.platform.startswith("linux") and ctypes.util.find_library("c") is not None


@pytest.fixture
def trimming() -> Iterator[None]:
    """Trimming on, whatever the heap holds free (a shared trace's heap holds less than
    ``MIN_FREE``)."""
    heap.trim_between_parts(True)
    heap._Trim.min_free = 0
    try:
        yield
    finally:
        heap.trim_between_parts(False)
        heap._Trim.min_free = heap.MIN_FREE


def test_nothing_is_handed_back_unless_asked() -> None:
    heap.trim_between_parts(False)
    before = heap.trims()
    assert heap.between_parts() is False
    assert heap.trims() == before


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_an_analysis_hands_pages_back_between_its_parts(
    shared: Callable[[str], Path], trimming: None
) -> None:
    path = shared("cuda/a100_nccl_rank0_of2.json.gz")
    heap.trim_between_parts(False)
    plain = orjson.dumps(analyze(load(path, cache=False), pack_args=True).to_dict())
    heap.trim_between_parts(True)
    before = heap.trims()
    trimmed = orjson.dumps(analyze(load(path, cache=False), pack_args=True).to_dict())
    # the graph's cut, the section's pieces, the section, the savings
    assert heap.trims() - before >= 4
    assert trimmed == plain


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_a_heap_with_little_free_is_left_alone(trimming: None) -> None:
    """Below ``MIN_FREE`` bytes free nothing is handed back (the pages would be faulted in
    again for little); at or above it they are."""
    if heap._Trim.free_bytes is None:
        pytest.skip("this glibc has no mallinfo2")
    free = heap._Trim.free_bytes()
    before = heap.trims()
    heap._Trim.min_free = free + (1 << 40)
    assert heap.between_parts() is False
    assert heap.trims() == before
    heap._Trim.min_free = 0
    assert heap.between_parts() is True
    assert heap.trims() == before + 1


def test_the_report_command_asks_for_it(tmp_path: Path) -> None:
    """``opscope report`` turns it on with its memory settings (a subprocess: the settings
    are the process's)."""
    import subprocess

    code = (
        "from opscope.cli.main import trace_reader_memory; from opscope.trace import heap;"
        "trace_reader_memory(heap_only=True); print(heap._Trim.on)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == str(GLIBC)


def test_the_read_s_and_each_what_if_s_memory_go_back_before_the_next_part(
    shared: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the trims are asked for: before the compaction of the trace just read (the
    read's temporaries), and before each what-if the savings solve (the last one's arrays):
    at 10M events the holes each left were the report's highest points."""
    from opscope.analysis import pipeline
    from opscope.analysis.critical import fixes
    from opscope.trace.model import Trace

    path = shared("cuda/a100_nccl_rank0_of2.json.gz")
    calls: list[str] = []
    compact = Trace.compact
    weights = fixes.fix_weights

    def logged_compact(self: Trace) -> None:
        calls.append("compact")
        compact(self)

    def logged_weights(*args: object, **kwargs: object) -> object:
        calls.append("what-if")
        return weights(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "between_parts", lambda: calls.append("trim") or False)
    monkeypatch.setattr(fixes, "between_parts", lambda: calls.append("trim") or False)
    monkeypatch.setattr(Trace, "compact", logged_compact)
    monkeypatch.setattr(fixes, "fix_weights", logged_weights)
    report = analyze(path, pack_args=True, cache=False)
    assert calls[:2] == ["trim", "compact"]
    what_ifs = [i for i, c in enumerate(calls) if c == "what-if"]
    assert what_ifs, "no what-if was solved"
    assert all(calls[i - 1] == "trim" for i in what_ifs)
    assert any(f.step_savings_us is not None for f in report.findings)
