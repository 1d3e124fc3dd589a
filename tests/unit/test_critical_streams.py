"""The stream lookups of the critical path's sync edges: the vectorised forms against the
one-at-a-time lookups they replace."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from opscope.analysis.critical.device import Streams, _blocking_pairs


def _streams(seed: int) -> Streams:
    """A Streams over random work: 2 ranks, 2 devices each, 1-3 streams per device, some empty,
    issue times with ties."""
    rng = np.random.default_rng(seed)
    st = Streams.__new__(Streams)
    rows: list[np.ndarray] = []
    iss: list[np.ndarray] = []
    st.slices, st.by_device = {}, {}
    at, stream = 0, 0
    for rank in (0, 1):
        for dev in (0, 1):
            for _ in range(int(rng.integers(1, 4))):
                n = int(rng.integers(0, 12))
                rows.append(rng.permutation(1000)[:n] + 1000 * stream)
                iss.append(np.sort(rng.integers(0, 50, n)))
                st.slices[stream] = (at, at + n)
                st.by_device.setdefault((rank, dev), []).append(stream)
                at += n
                stream += 1
    st.rows = np.concatenate(rows).astype(np.int64)
    st.iss = np.concatenate(iss).astype(np.int64)
    n_calls = 40
    st.idx = SimpleNamespace(
        rank=rng.integers(0, 3, n_calls),  # rank 2 has no streams
        start=rng.integers(-5, 60, n_calls),
    )
    return st


@pytest.mark.parametrize("seed", range(20))
def test_last_before_each_is_last_before_of_each_time(seed: int) -> None:
    st = _streams(seed)
    times = np.arange(-3, 60)
    for s in [*st.slices, 999]:  # 999: a stream the window does not have
        got = st.last_before_each(s, times).tolist()
        assert got == [st.last_before(s, int(t)) for t in times]


@pytest.mark.parametrize("seed", range(20))
def test_blocking_pairs_match_the_loop_over_calls_and_streams(seed: int) -> None:
    st = _streams(seed)
    callers = np.flatnonzero(np.random.default_rng(seed + 100).random(40) < 0.7)
    want: list[tuple[int, int]] = []
    for caller in callers.tolist():
        r = int(st.idx.rank[caller])
        for (rr, _p), streams in st.by_device.items():
            if rr == r:
                for s in streams:
                    got = st.last_before(s, int(st.idx.start[caller]))
                    if got >= 0:
                        want.append((got, caller))
    assert _blocking_pairs(st, callers) == want
    assert want, "the random jobs should wait on something"


def test_blocking_pairs_of_no_calls() -> None:
    assert _blocking_pairs(_streams(0), np.zeros(0, dtype=np.int64)) == []
