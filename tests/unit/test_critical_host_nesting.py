"""The host rows' nesting, read by pointer doubling (``critical.host.owners`` and
``nesting_depth``), is what the walk one level a pass gives: on random forests of every
shape (chains, deep and flat trees, containers under containers, containers with no op
above) and on the shared traces' host rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from opscope.analysis.critical import host
from opscope.trace import load


def _owners_by_levels(parent: np.ndarray, container: np.ndarray) -> np.ndarray:
    """The oracle: each container climbs one level a pass to its first non-container."""
    owner = np.arange(len(parent), dtype=parent.dtype)
    act = np.flatnonzero(container)
    cur = parent[act]
    while len(act):
        keep = cur >= 0
        act, cur = act[keep], cur[keep]
        hit = ~container[cur]
        owner[act[hit]] = cur[hit]
        act, cur = act[~hit], parent[cur[~hit]]
    return owner


def _depth_by_levels(parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The oracle: every row climbs one level a pass, counting."""
    depth = np.zeros(len(parent), dtype=np.int32)
    p = parent[rows]
    act, p = rows[p >= 0], p[p >= 0]
    while len(act):
        depth[act] += 1
        p = parent[p]
        keep = p >= 0
        act, p = act[keep], p[keep]
    return depth


def _forest(rng: np.random.Generator, n: int, shape: str) -> np.ndarray:
    """A parent array of ``n`` rows (parents before children, -1 roots), shuffled."""
    parent = np.full(n, -1, dtype=np.int64)
    for i in range(1, n):
        if shape == "chain":
            parent[i] = i - 1
        elif shape == "deep":
            parent[i] = i - 1 - rng.integers(0, min(i, 3))
        elif shape == "flat":
            parent[i] = rng.integers(-1, min(i, 4))
        else:  # any earlier row, or none
            parent[i] = rng.integers(-1, i)
    perm = rng.permutation(n)  # rows in any order: ids are not depth-ordered
    inv = np.argsort(perm)
    out = np.where(parent[perm] >= 0, inv[np.maximum(parent[perm], 0)], -1)
    return out.astype(rng.choice([np.int32, np.int64]))


@pytest.mark.parametrize("shape", ["chain", "deep", "flat", "any"])
def test_doubling_gives_the_walks_nesting_on_random_forests(shape: str) -> None:
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 3, 17, 200, 1500):
        for share in (0.0, 0.3, 0.9, 1.0):
            parent = _forest(rng, n, shape)
            container = rng.random(n) < share
            got = host.owners(parent, container)
            assert got.dtype == parent.dtype
            assert np.array_equal(got, _owners_by_levels(parent, container)), (shape, n, share)
            rows = np.arange(n, dtype=np.int64)
            depth = host.nesting_depth(parent, rows)
            assert depth.dtype == np.int32
            assert np.array_equal(depth, _depth_by_levels(parent, rows)), (shape, n)


def test_a_chain_deeper_than_a_walk_would_like() -> None:
    """4,000 levels: the doubling's passes grow as the log of the depth."""
    n = 4000
    parent = np.arange(-1, n - 1, dtype=np.int32)
    assert np.array_equal(host.nesting_depth(parent, np.arange(n)), np.arange(n))
    container = np.ones(n, dtype=bool)
    container[0] = False  # the root is an op: every container below it is its
    assert np.array_equal(host.owners(parent, container)[1:], np.zeros(n - 1))


SHARED = [
    "rocm/mi300x_models/owlv2_large.json.gz",  # Python frames 45 deep, 65k containers
    "rocm/mi300x_models/qwen1.5_0.5b_chat.json.gz",
    "cuda/a100_cudagraph_rank0_of16.json.gz",
    "cuda/critical_path_alexnet.json.gz",
    "cuda/ns_resolution.pt.trace.json.gz",
    "mtia/mtia_inference_rank0.json.gz",
]


@pytest.mark.parametrize("relative", SHARED)
def test_doubling_gives_the_walks_nesting_on_the_shared_traces(
    relative: str, shared: Callable[[str], Path]
) -> None:
    """The host rows' nesting as the critical path's graph reads it (framework frames and
    annotations included), on every shared trace."""
    idx = load(shared(relative), cache=False).index
    host_rows = np.flatnonzero(np.asarray(idx.is_framework) | np.asarray(idx.is_runtime))
    is_host = np.zeros(idx.n, dtype=bool)
    is_host[host_rows] = True
    for parent in (host.nest_parent(idx, is_host), host.host_parent(idx, is_host)):
        assert np.array_equal(
            host.nesting_depth(parent, host_rows), _depth_by_levels(parent, host_rows)
        )
        container = is_host & ~np.asarray(idx.is_runtime) & (np.asarray(idx.dur) > 0)
        assert np.array_equal(host.owners(parent, container), _owners_by_levels(parent, container))
