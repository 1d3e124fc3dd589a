"""graph_input_copies' bytes of the device copies under a set of copy ops: the chains walked a
level a pass for every device copy at once give what the walk of one device copy at a time,
reading each one's ``args``, gives (the oracle below), on shared traces and sets of copies."""

from __future__ import annotations

import numpy as np
import pytest
from test_findings_kit import context, shared

from opscope.analysis.findings import graph_input_copies as rule
from opscope.analysis.findings._view import EventView, view


def _oracle(v: EventView, copies: np.ndarray, rows: np.ndarray) -> int:
    """The bytes of the device copies under ``rows``, each once: one device copy at a time."""
    idx = v.index
    work = np.flatnonzero(idx.is_work & idx.kind.eq("memcpy") & (idx.op >= 0) & v.in_window)
    is_copy = np.zeros(idx.n, dtype=bool)
    is_copy[copies] = True
    wanted = set(rows.tolist())
    total = 0
    for r in work.tolist():
        at = int(idx.op[r])
        chain = []
        while at >= 0:
            if is_copy[at]:
                chain.append(at)
            at = int(idx.tree_parent[at])
        b = v.args(r).get("bytes")
        if not (isinstance(b, int) or (isinstance(b, str) and b.isdigit())):
            continue
        if wanted.intersection(chain):
            total += int(b)
    return total


@pytest.mark.parametrize(
    "relative",
    [
        "cuda/a100_cudagraph_rank0_of16.json.gz",
        "cuda/diff_pair/test_v100.json.gz",
        "rocm/mi300x_resnet_act_checkpoint_rank0_of8.json.gz",
        "rocm/sglang_qwen3_8b_decode.json.gz",
    ],
)
def test_the_bytes_under_copies_are_the_walk_of_each_device_copy(relative: str) -> None:
    v = view(context(shared(relative)))
    copies = rule._copies(v)
    if not len(copies):
        pytest.skip(f"{relative}: no copy ops")
    got = rule._CopyBytes(v, copies)
    rng = np.random.default_rng(0)
    subsets = [copies, copies[:1], copies[-3:]]
    subsets += [rng.choice(copies, size=max(1, len(copies) // 3), replace=False) for _ in range(3)]
    nonzero = 0
    for rows in subsets:
        want = _oracle(v, copies, rows)
        assert got.of(rows) == want
        nonzero += want > 0
    assert nonzero or relative != "cuda/diff_pair/test_v100.json.gz"  # it records bytes
