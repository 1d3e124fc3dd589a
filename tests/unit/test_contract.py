"""A rank graph contracted to its interfaces keeps every longest path (analysis.critical
.contract, .job_solve): lengths, time per label and the expanded edges, on random DAGs,
natively and in Python."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opscope
from distjobs import write_nccl_job
from opscope.analysis.critical import contract as con_mod
from opscope.analysis.critical.contract import ANY, NLAB, Contracted, Contraction, cut_nodes
from opscope.analysis.critical.job import _prepare, rank_joins
from opscope.analysis.critical.job_solve import (
    Chunk,
    RankSummary,
    _joined,
    _solve,
    _step_paths,
    job_section,
    summarise,
)
from opscope.analysis.critical.longest import longest_paths, paths_to
from opscope.analysis.critical.model import (
    JOIN,
    LABEL_TIE,
    SPLIT,
    STREAM,
    THREAD,
    TIE_FACTOR,
    Graph,
    effective,
)
from opscope.analysis.critical.path import solve, step_paths
from opscope.analysis.critical.section import node_steps
from opscope.analysis.job_report import matched
from opscope.analysis.rank_split import rank_traces


def random_graph(seed: int, n: int = 60, m: int = 150, rank: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 1, size=m)
    dst = np.minimum(src + 1 + rng.integers(0, 8, size=m), n - 1)
    time = np.cumsum(rng.integers(0, 5, size=n)).astype(np.int64)
    label = rng.integers(-1, NLAB, size=m).astype(np.int64)
    # an edge of no label orders work and carries no time (as every graph the builder makes)
    weight = np.where(label >= 0, rng.integers(0, 50, size=m), 0).astype(np.int64)
    return Graph(
        time=time,
        row=np.arange(n, dtype=np.int64),
        role=np.zeros(n, dtype=np.int8),
        src=src.astype(np.int64),
        dst=dst.astype(np.int64),
        weight=weight,
        label=label,
        edge_row=rng.integers(-1, n, size=m).astype(np.int64),
        kind=rng.choice([THREAD, STREAM, 2, 3], size=m).astype(np.int64),
        rank=rank,
    )


def reachable(g: Graph) -> np.ndarray:
    """``reach[a, b]``: b can be reached from a (a reaches itself)."""
    reach = np.eye(g.n_nodes, dtype=bool)
    for v in range(g.n_nodes - 1, -1, -1):
        for d in g.dst[g.src == v].tolist():
            reach[v] |= reach[d]
    return reach


def label_sums(g: Graph, edges: np.ndarray) -> np.ndarray:
    out = np.zeros(NLAB, dtype=np.int64)
    for e in edges.tolist():
        if g.label[e] >= 0:
            out[g.label[e]] += g.weight[e]
    return out


def one_rank_summary(
    g: Graph, interfaces: np.ndarray, node_step: np.ndarray, native: bool
) -> tuple[RankSummary, Contraction]:
    con = Contraction(g, g.weight, node_step, interfaces, native=native)
    summary = RankSummary(
        rank=g.rank,
        n_nodes=g.n_nodes,
        n_edges=g.n_edges,
        time=g.time[interfaces],
        step=node_step[interfaces],
        joins={},
        full=con.contract(steps=False),
        steps=con.contract(steps=True),
    )
    return summary, con


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("seed", range(12))
def test_the_contracted_graph_has_the_graphs_longest_path(seed: int, native: bool) -> None:
    if native and con_mod._native is None:
        pytest.skip("the C extension is not built")
    g = random_graph(seed)
    rng = np.random.default_rng(100 + seed)
    interfaces = np.unique(rng.choice(g.n_nodes, size=1 + seed % 9, replace=False))
    node_step = np.repeat(np.arange(4), g.n_nodes // 4 + 1)[: g.n_nodes].astype(np.int64)
    node_step[: seed % 3] = -1
    summary, con = one_rank_summary(g, interfaces, node_step, native)
    whole = _joined([summary], [], steps=False)
    path = _solve(whole)
    # the longest path with ties to the causal labels (model.effective), measured in ns
    dist, pred = longest_paths(g.src, g.dst, effective(g.weight, g.label), g.n_nodes)
    ref = paths_to(np.asarray([int(np.argmax(dist))]), pred, g.src)[0]
    assert path.length_ns == int(g.weight[ref].sum())
    # the time per label of the contracted path is that of its expansion, which is a real
    # path of the graph of the same length (each edge reaches the next: the expansion leaves
    # out the edges of no weight before a search's first weighed edge)
    c = summary.full
    local = whole.local[path.edges]
    real = con.expand(list(zip(c.src[local].tolist(), c.end[local].tolist(), strict=True)))
    assert int(g.weight[real].sum()) == path.length_ns
    reach = reachable(g)
    assert all(reach[a, b] for a, b in zip(g.dst[real[:-1]], g.src[real[1:]], strict=True))
    assert (whole.by_label[path.edges].sum(axis=0) == label_sums(g, real)).all()
    # every step's path has the length of the step's own longest path
    g_steps = step_paths(g, node_step)
    c_steps = _step_paths(_joined([summary], [], steps=True))
    assert {s: p.length_ns for s, p in c_steps.items()} == {
        s: p.length_ns for s, p in g_steps.items()
    }


@pytest.mark.parametrize("seed", range(6))
def test_native_and_python_contract_alike(seed: int) -> None:
    if con_mod._native is None:
        pytest.skip("the C extension is not built")
    g = random_graph(seed, n=80, m=220)
    interfaces = np.unique(np.random.default_rng(seed).choice(80, size=7, replace=False))
    node_step = (np.arange(80) // 20).astype(np.int64)
    a, _ = one_rank_summary(g, interfaces, node_step, True)
    b, _ = one_rank_summary(g, interfaces, node_step, False)
    for x, y in ((a.full, b.full), (a.steps, b.steps)):
        for k, v in x.to_dict().items():
            assert np.array_equal(v, getattr(y, k)), k


def test_a_contracted_edge_is_the_longest_path_that_passes_no_other_interface() -> None:
    # 0 -> 1 -> 2 (interface) -> 3; 0 -> 3 directly, lighter; 1 is an interface too
    g = Graph(
        time=np.arange(4, dtype=np.int64),
        row=np.arange(4, dtype=np.int64),
        role=np.zeros(4, dtype=np.int8),
        src=np.asarray([0, 1, 2, 0], dtype=np.int64),
        dst=np.asarray([1, 2, 3, 3], dtype=np.int64),
        weight=np.asarray([5, 7, 11, 3], dtype=np.int64),
        label=np.asarray([0, 3, 4, 0], dtype=np.int64),
        edge_row=np.arange(4, dtype=np.int64),
        kind=np.asarray([THREAD] * 4, dtype=np.int64),
    )
    con = Contraction(g, g.weight, np.zeros(4, np.int64), np.asarray([1, 2]))
    c = con.contract(steps=False)
    # the contracted weight is in the search's (effective) units; by_label sums to the ns
    assert c.weight.tolist() == (c.by_label * TIE_FACTOR[LABEL_TIE]).sum(axis=1).tolist()
    edges = {
        (int(a), int(b)): (int(w), int(e))
        for a, b, w, e in zip(c.src, c.dst, c.by_label.sum(axis=1), c.end, strict=True)
    }
    assert edges == {
        (ANY, 0): (5, 1),  # 0 -> 1
        (ANY, ANY): (3, 3),  # 0 -> 3 passes no interface
        (0, 1): (7, 2),  # 1 -> 2
        (1, ANY): (11, 3),  # 2 -> 3
    }
    # the dst of each thread edge whose span holds t=2: 1 -> 2 and 0 -> 3
    assert cut_nodes(g, np.asarray([2])).tolist() == [2, 3]
    assert cut_nodes(g, np.asarray([0])).tolist() == []  # no edge ends after t=0 from before


def test_job_section_joins_two_ranks_through_the_late_arrival() -> None:
    """Two ranks, one collective: rank 1 arrives late (its arrival at t=90, rank 0's at 10);
    the transfer (mid -> end, 20 ns) then follows rank 1's 90 ns of work on both ranks."""

    def rank_graph(rank: int, arrive: int) -> Graph:
        # 0: start of work, 1: arrival (collective's start), 2: mid, 3: end
        return Graph(
            time=np.asarray([0, arrive, 90, 110], dtype=np.int64),
            row=np.arange(4, dtype=np.int64),
            role=np.asarray([0, 0, 2, 1], dtype=np.int8),
            src=np.asarray([0, 1, 2], dtype=np.int64),
            dst=np.asarray([1, 2, 3], dtype=np.int64),
            weight=np.asarray([arrive, 0, 20], dtype=np.int64),
            label=np.asarray([0, 7, 4], dtype=np.int64),
            edge_row=np.asarray([0, 1, 1], dtype=np.int64),
            kind=np.asarray([THREAD, 7, STREAM], dtype=np.int64),
            rank=rank,
        )

    summaries = []
    for rank, arrive in ((0, 10), (1, 90)):
        g = rank_graph(rank, arrive)
        s, _con = summarise(g, g.weight, np.zeros(4, np.int64), {0: (1, 2)})
        summaries.append(s)

    def expand(asked: dict[int, Any]) -> dict[int, list[Chunk]]:
        return {r: [Chunk([{"rank": r}], []) for _run in runs] for r, runs in asked.items()}

    inst = [{"name": "all_reduce", "pg": "0", "seq": 0, "last_rank": 1}]
    sec = job_section(summaries, inst, [[0, 1]], expand)
    assert sec["length_us"] == 0.11  # 90 ns on rank 1, then 20 ns of transfer
    assert sec["by_rank_us"] == {"0": 0.02, "1": 0.09}  # the transfer: the first member's
    assert sec["jumps"][0]["from_rank"] == 1
    assert sec["nodes"] == 9 and sec["edges"] == 6 + 4
    back = RankSummary.from_dict(summaries[1].to_dict())
    assert back.joins == summaries[1].joins and np.array_equal(back.full.end, summaries[1].full.end)


def joined_whole(traces: Any, graphs: list[Graph], works: list[dict[int, int]]) -> Any:
    """The reference the contractions are held to: the ranks' graphs side by side in one
    graph, a barrier per instance two or more ranks hold (each member's arrival -> the
    barrier -> each member's mid), the waits weighing nothing; and each node's step."""
    parts = graphs
    offs = np.cumsum([0] + [p.n_nodes for p in parts])
    src, dst = [], []
    n = int(offs[-1])
    barrier_step = []
    own = np.concatenate([node_steps(traces[p.rank].index, p) for p in parts])
    for k in range(len(works)):
        mem = []
        for i, p in enumerate(parts):
            row = works[k].get(p.rank)
            joins = rank_joins(p, {k: row} if row is not None else {})
            if k in joins:
                mem.append((joins[k][0] + offs[i], joins[k][1] + offs[i]))
        if len(mem) < 2:
            continue
        b = n + len(barrier_step)
        barrier_step.append(own[mem[0][0]])
        for a, m in mem:
            src += [a, b]
            dst += [b, m]
    nb, ne = len(barrier_step), len(src)
    cat = np.concatenate
    graph = Graph(
        time=cat([*[p.time for p in parts], np.zeros(nb, np.int64)]),
        row=cat([*[p.row for p in parts], np.full(nb, -1, np.int64)]),
        role=cat([*[p.role for p in parts], np.full(nb, 3, np.int8)]),
        src=cat([*[p.src + o for p, o in zip(parts, offs, strict=False)], np.asarray(src)]),
        dst=cat([*[p.dst + o for p, o in zip(parts, offs, strict=False)], np.asarray(dst)]),
        weight=cat(
            [*[np.where(p.kind == SPLIT, 0, p.weight) for p in parts], np.zeros(ne, np.int64)]
        ),
        label=cat([*[p.label for p in parts], np.full(ne, -1, np.int64)]),
        edge_row=cat([*[p.edge_row for p in parts], np.full(ne, -1, np.int64)]),
        kind=cat([*[p.kind for p in parts], np.full(ne, JOIN, np.int64)]),
        rank=-1,
    )
    return graph, cat([own, np.asarray(barrier_step, np.int64)]).astype(np.int64)


@pytest.mark.parametrize(("world", "late"), [(2, None), (3, 1), (4, 2)])
def test_the_job_path_has_the_joined_graphs_length(tmp_path: Any, world: int, late: Any) -> None:
    """The job section (solved from the contractions) against the joined graph solved whole."""
    kw = {} if late is None else {"late_rank": late, "late_us": 150.0}
    write_nccl_job(tmp_path, world, **kw)
    report = opscope.analyze(tmp_path)
    sec = report.extra["critical_path"]
    traces = {int(t.meta.ranks[0]): t for t in rank_traces(report.trace)}
    records, instances = matched(report.ranks)
    _ranks, graphs, works = _prepare(traces, records, instances, None)
    joined, node_step = joined_whole(traces, graphs, works)
    whole = solve(joined)
    assert sec["length_us"] == round(whole.length_ns / 1000.0, 3)
    assert sec["bound_by_us"] == {k: round(v / 1000.0, 3) for k, v in whole.by_label.items()}
    per_step = step_paths(joined, node_step)
    assert [s["length_us"] for s in sec["steps"]] == [
        round(p.length_ns / 1000.0, 3) for _s, p in sorted(per_step.items())
    ]
    assert round(sum(s["dur_us"] for s in sec["segments"]), 3) == sec["length_us"]


def test_contracted_columns_travel_narrow_and_come_back_exact() -> None:
    g = random_graph(3)
    con = Contraction(g, g.weight * 10_000_000, np.zeros(g.n_nodes, np.int64), np.asarray([5, 9]))
    c = con.contract(steps=False)
    sent = c.to_dict()
    assert sent["src"].dtype == np.int32  # small values: half the bytes
    assert int(c.weight.max()) > np.iinfo(np.int32).max and sent["weight"].dtype == np.int64
    back = Contracted.from_dict(sent)
    for k, v in c.to_dict().items():
        assert np.array_equal(np.asarray(v, dtype=np.int64), getattr(back, k)), k
        assert getattr(back, k).dtype == np.int64
