"""The critical path's graph is built without holding two copies of itself: the cut at the
step bounds lets each old array go as its new one is made, and the hand-offs between the
backward thread and its callers sort only the callers' nodes; the section searches the
steps' paths before it makes the segments' pieces, and lets the path's edge-sized arrays go
as the pieces' own are made.  Measured with tracemalloc
(NumPy reports its buffers to it), which counts bytes, not time: the same input gives the
same figures on any machine.  The bounds sit between what the code before these fixes took
and what it takes now (figures in the comments, as a fraction of the graph's own bytes)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.critical import graph as graph_mod
from opscope.analysis.critical import host
from opscope.analysis.critical.section import rank_graph
from opscope.trace import load

FIELDS = ("time", "row", "role", "src", "dst", "weight", "label", "edge_row", "kind")

# (trace, then the temporaries of the cut and of the hand-offs before the fixes; after them;
# now, with the graph's ids and rows of 32 bits, a graph of about two thirds the bytes, and
# the cut's temporaries made as narrow and a block of edges at a time)
#   a100_nccl_rank0_of2:        cut 1.33 -> 0.84 -> 0.74, hand-offs 1.06 -> 0.38 -> 0.42
#   a100_cudagraph_rank0_of16:  cut 1.66 -> 0.98 -> 0.94, hand-offs 0.91 -> 0.60 -> 0.66
CUT_BOUND = 1.15
HANDOFF_BOUND = 0.75
TRACES = ("cuda/a100_nccl_rank0_of2.json.gz", "cuda/a100_cudagraph_rank0_of16.json.gz")


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def _measured(monkeypatch: pytest.MonkeyPatch, mod: Any, name: str, out: dict[str, int]) -> None:
    """``mod.name`` wrapped to record, in ``out[name]``, the most bytes it held above what was
    in use when it was called."""
    fn: Callable[..., Any] = getattr(mod, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
        out[name] = max(out.get(name, 0), peak - before)
        return result

    monkeypatch.setattr(mod, name, wrapped)


@pytest.mark.parametrize("relative", TRACES)
def test_graph_temporaries_stay_below_a_copy_of_the_graph(
    relative: str,
    shared: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    traced: None,
) -> None:
    trace = load(shared(relative), cache=False)
    idx = trace.index
    # the index's own lazily made arrays first: they are not the graph's temporaries
    _ = idx.arg_values, idx.thread, idx.in_tree, idx.tree_parent
    held: dict[str, int] = {}
    _measured(monkeypatch, graph_mod, "cut_at_steps", held)
    _measured(monkeypatch, host, "handoffs", held)
    graph = rank_graph(trace, None, [])
    size = sum(getattr(graph, f).nbytes for f in FIELDS)
    assert size > 0 and graph.n_edges > 1000
    assert set(held) == {"cut_at_steps", "handoffs"}, "the graph was built without one of them"
    # the cut replaced arrays while the builder still named the old ones: a whole second
    # graph's edges and nodes at once
    assert held["cut_at_steps"] <= CUT_BOUND * size, (held, size)
    # every host node of every thread sorted, three arrays at a time
    assert held["handoffs"] <= HANDOFF_BOUND * size, (held, size)


# the section's temporaries before (the steps' search beside the segments' pieces, whose
# edge-sized arrays lived to the end), after, and now with narrow ids (the graph's bytes
# two thirds of what they were; the paths' edges and the nodes' steps narrow too, the
# nodes' steps made a smaller block at a time), as a fraction of the graph's own bytes:
#   a100_nccl_rank0_of2 1.60 -> 1.06 -> 1.24; a100_cudagraph_rank0_of16 1.07 -> 0.88 -> 0.93
SECTION_BOUNDS = [(TRACES[0], 1.3), (TRACES[1], 0.97)]


@pytest.mark.parametrize(("relative", "bound"), SECTION_BOUNDS)
def test_the_section_holds_the_segments_or_the_step_search_not_both(
    relative: str, bound: float, shared: Callable[[str], Path], traced: None
) -> None:
    from opscope.analysis.critical.section import section

    trace = load(shared(relative), cache=False)
    idx = trace.index
    _ = idx.arg_values, idx.thread, idx.in_tree, idx.tree_parent, idx.step
    graph = rank_graph(trace, None, [])
    size = sum(getattr(graph, f).nbytes for f in FIELDS)
    before, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    got = section(trace, graph)
    _, peak = tracemalloc.get_traced_memory()
    assert got["segments"] and got["steps"]
    assert peak - before <= bound * size, (peak - before, size)


@pytest.mark.parametrize("relative", TRACES)
def test_the_pieces_kept_for_the_report_hold_narrow_rows(
    relative: str, shared: Callable[[str], Path]
) -> None:
    """The window path's pieces live until the report is written: their rows (and the
    untraced pieces' evidence rows) are int32 where every row fits (the golden reports hold
    what they read)."""
    from opscope.analysis.critical.path import pieces, solve

    trace = load(shared(relative), cache=False)
    graph = rank_graph(trace, None, [])
    p = pieces(graph, solve(graph))
    assert len(p) and p.row.dtype == p.before.dtype == p.after.dtype == "int32"
    wide = p.row.astype("int64")
    assert (wide >= -1).all() and int(wide.max()) < trace.index.n
