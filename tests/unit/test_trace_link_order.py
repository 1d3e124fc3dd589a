"""The host-event order used for nesting equals a full lexsort, however many ties."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from opscope.trace.link import host_order


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),  # lane (few lanes: radix path)
            st.integers(0, 12),  # start: many ties
            st.integers(0, 3),  # duration
            st.integers(0, 2),  # source
        ),
        max_size=60,
    ),
    st.sampled_from([1, 40_000, -1]),  # lane codes as they are, beyond 16 bits, negative
    st.booleans(),  # rows nearly sorted by start, as in traces
)
def test_host_order_is_the_lexsort(
    rows: list[tuple[int, int, int, int]], scale: int, presorted: bool
) -> None:
    if presorted:
        rows = sorted(rows, key=lambda r: r[1])
    a = np.array(rows, dtype=np.int64).reshape(-1, 4)
    lane, start, dur, src = a[:, 0] * scale, a[:, 1], a[:, 2], a[:, 3]
    expected = np.lexsort((src, -dur, start, lane))
    assert host_order(lane, start, dur, src).tolist() == expected.tolist()
