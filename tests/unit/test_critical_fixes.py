"""A finding's step saving is the what-if of its fix (``analysis.critical.fixes``), on
hand-built traces whose answers are worked out by hand (times in µs)."""

from __future__ import annotations

import numpy as np
import pytest
from test_findings_kit import Doc

from opscope.analysis.critical.fixes import Fix, FixPart, fix_weights, off_the_path, part_of_name
from opscope.analysis.critical.section import (
    WhatIfError,
    finding_savings,
    rank_graph,
    what_if,
)
from opscope.analysis.pipeline import analyze


def _gpu_bound() -> Doc:
    """A step whose device runs two ops' kernels back to back, the host syncs at the end."""
    d = Doc()
    d.step(1, 0, 500)
    d.op("aten::mul", 0, 20)
    d.launch(5, 5, "mul_kernel", 20, 200)
    d.op("aten::add", 30, 20)
    d.launch(35, 5, "add_kernel", 220, 100)  # queued behind mul_kernel
    d.runtime("cudaDeviceSynchronize", 60, 270)  # returns at 330, 10 after add_kernel
    return d


def test_a_hotspot_saves_its_what_if() -> None:
    doc = analyze(_gpu_bound().trace()).to_dict()
    hot = {f["details"]["op"]: f for f in doc["findings"] if f["kind"] == "hotspots"}
    assert set(hot) >= {"aten::mul"}
    f = hot["aten::mul"]
    assert f["details"]["what_if"] == "aten::mul=0"
    # without mul_kernel the add kernel runs as soon as its launch (issued at 35) lets it:
    # host 35 + add_kernel 100 + the sync's return 10 + the step's untraced end 170 = 315 of
    # the 500 µs step; the dependencies stay as recorded
    assert f["step_savings_us"] == 185.0
    tr = _gpu_bound().trace()
    assert what_if(tr, rank_graph(tr, None), "aten::mul=0")["saved_us"] == 185.0


def test_own_work_only_with_at_self() -> None:
    d = Doc()
    d.op("outer", 0, 40)
    d.launch(2, 3, "outer_kernel", 10, 50)
    d.op("inner", 10, 20)
    d.launch(12, 3, "inner_kernel", 60, 100)
    tr = d.trace()
    g = rank_graph(tr, None)
    idx = tr.index
    whole, _ = fix_weights(idx, g, [part_of_name("outer", 0.0)])
    own, _ = fix_weights(idx, g, [part_of_name("outer@self", 0.0)])
    spans = {idx.name[int(g.edge_row[e])]: e for e in np.flatnonzero(g.kind == 1)}
    assert whole[spans["outer_kernel"]] == 0 and whole[spans["inner_kernel"]] == 0
    assert own[spans["outer_kernel"]] == 0 and own[spans["inner_kernel"]] == 100_000
    with pytest.raises(WhatIfError, match="no event named"):
        what_if(tr, g, "nothing@self=0")


def test_savings_cover_every_occurrence_not_only_the_evidence() -> None:
    """A fix over 60 queued kernels saves all of them, though its evidence would list 50."""
    d = Doc()
    d.step(1, 0, 61_000)
    for i in range(60):  # the host launches them all at once; they run back to back
        d.op("aten::mul", 10.0 * i, 8)
        d.launch(10.0 * i + 2, 3, "mul_kernel", 1000.0 * i + 600, 1000)
    d.runtime("cudaDeviceSynchronize", 700, 59_905)  # returns at 60 605, 5 after the last
    tr = d.trace()
    g = rank_graph(tr, None)
    rows = np.flatnonzero(tr.index.name.eq("mul_kernel"))
    assert len(rows) == 60
    fix = Fix((FixPart(0.5, rows=rows),))
    got = finding_savings(tr, g, [{"time_at_stake_us": 1e9}], [fix])
    # each kernel runs half as long: 60 x 500 µs off the device's chain into the sync
    assert got == [pytest.approx(what_if(tr, g, "mul_kernel=0.5")["saved_us"])]
    assert got[0] == pytest.approx(30_000.0, abs=1.0)


def test_savings_never_exceed_the_time_at_stake() -> None:
    tr = _gpu_bound().trace()
    g = rank_graph(tr, None)
    fix = Fix((FixPart(0.0, name="aten::mul"),))
    assert finding_savings(tr, g, [{"time_at_stake_us": 50.0}], [fix]) == [50.0]
    assert finding_savings(tr, g, [{"time_at_stake_us": 0.0}], [fix]) == [0.0]


def test_an_unblocked_sync_waits_no_more() -> None:
    """A sync that waits for a long kernel: cut it and the host goes on at once."""
    d = Doc()
    d.step(1, 0, 400)
    d.op("aten::mm", 0, 20)
    d.launch(5, 5, "mm_kernel", 20, 300)  # 20..320
    d.runtime("cudaDeviceSynchronize", 30, 295)  # returns at 325
    d.op("aten::add", 330, 30)  # host work after the sync
    tr = d.trace()
    g = rank_graph(tr, None)
    sync = np.flatnonzero(tr.index.name.eq("cudaDeviceSynchronize"))
    fix = Fix((FixPart(0.0, rows=sync, unblock=True),))
    _w, keep = fix_weights(tr.index, g, fix)
    assert keep is not None and (~keep).sum() >= 1  # its wait on mm_kernel is cut
    # the host's chain (105 µs) no longer waits: the path is the kernel's own route, host 5
    # + launch 15 + kernel 300 = 320 of the 400 µs step
    assert finding_savings(tr, g, [{"time_at_stake_us": 1e9}], [fix]) == [80.0]


def test_a_gap_fix_takes_the_host_time_inside_its_ranges() -> None:
    d = Doc()
    d.op("aten::a", 0, 100)
    d.launch(10, 5, "k1", 20, 10)
    d.op("aten::b", 100, 100)  # the device idles here, the host is on the path
    d.launch(190, 5, "k2", 200, 10)
    tr = d.trace()
    g = rank_graph(tr, None)
    t0 = int(tr.index.start.min())
    fix = Fix((FixPart(0.0, ranges=((t0 + 30_000, t0 + 200_000),)),))
    w, _ = fix_weights(tr.index, g, fix)
    # the host time inside the range goes: a's last 70 µs, b's 95, k2's launch call 5 and its
    # launch latency 10; a's first 30 µs and k2 stay
    assert int(g.weight.sum() - w.sum()) == 180_000
    assert finding_savings(tr, g, [{"time_at_stake_us": 170.0}], [fix]) == [170.0]


def test_a_fix_is_off_the_path_only_when_it_lightens_nothing_on_it() -> None:
    weight = np.array([5, 7, 3, 4])
    path = np.array([0, 1])  # the longest path's edges
    assert off_the_path(weight, np.array([5, 7, 1, 0]), None, path)  # lighter elsewhere
    assert not off_the_path(weight, np.array([5, 6, 3, 4]), None, path)  # on the path
    assert not off_the_path(weight, np.array([5, 7, 3, 9]), None, path)  # heavier elsewhere
    drop_other = np.array([True, True, False, True])
    assert off_the_path(weight, weight.copy(), drop_other, path)
    assert not off_the_path(weight, weight.copy(), np.array([True, False, True, True]), path)


def test_the_memory_sparing_helpers_give_what_the_plain_forms_give(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The what-ifs' arrays made in place or a block at a time (their memory at 10M events):
    the same values as the plain NumPy forms, across block bounds."""
    from opscope.analysis.critical import fixes as fixes_mod
    from opscope.analysis.critical import longest as longest_mod
    from opscope.analysis.critical import path as path_mod

    monkeypatch.setattr(fixes_mod, "_BLOCK", 7)
    monkeypatch.setattr(longest_mod, "_SWAP", 5)
    monkeypatch.setattr(path_mod, "_BLOCK", 6)
    rng = np.random.default_rng(3)
    w = rng.uniform(-1e6, 1e12, 101)
    w[:4] = [0.5, 1.5, 2.5, -0.5]  # ties round to even, as np.rint does
    want = np.rint(w).astype(np.int64)
    got = fixes_mod._rounded_in_place(w.copy())
    assert got.dtype == np.int64 and np.array_equal(got, want)
    for count in (0, 1, 2, 3, 10, 11, 47):
        buf = np.arange(60, dtype=np.int64) * 3
        expect = buf[:count][::-1].copy()
        out = longest_mod._reversed_in_place(buf, count)
        assert np.array_equal(out, expect), count
    weight = rng.integers(0, 10**9, 200)
    edges = rng.permutation(200)[:83]
    assert path_mod._sum_at(weight, edges) == int(weight[edges].sum())


def test_one_walked_path_is_the_python_walk() -> None:
    from opscope.analysis.critical.longest import longest_paths, path_to, paths_to

    rng = np.random.default_rng(5)
    n = 400
    src = rng.integers(0, n - 1, 3000)
    dst = np.minimum(src + rng.integers(1, 20, 3000), n - 1)
    weight = rng.integers(0, 1000, 3000)
    dist, pred = longest_paths(src, dst, weight, n)
    end = int(np.argmax(dist))
    (one,) = paths_to(np.asarray([end]), pred, src)
    assert np.array_equal(one, path_to(end, pred, src))
    assert int(weight[one].sum()) == int(dist[end])
