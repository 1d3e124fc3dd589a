"""The op table's folding of dispatcher duplicates (an op whose only child op has its name),
made with the step markers and the bookkeeping rows in one filter of the table: by hand on a small
trace, and the same table as filtering first and folding after on the shared traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from test_findings_kit import Doc

from opscope.analysis.optable import (
    _OP_TABLE_COLUMNS,
    BOOKKEEPING_NAMES,
    merge_duplicate_nodes,
    op_table,
    select_window,
)
from opscope.trace import Trace, load, load_document
from opscope.trace.arrays import Codes

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def _trace() -> Trace:
    d = Doc()
    for n, t in enumerate((0, 100, 200), start=1):
        d.step(n, t, 90)
        d.op("TorchDynamo Cache Lookup", t + 0.5, 0.4)  # bookkeeping: never a row
        d.op("aten::mean", t + 1, 30)
        d.op("aten::mean", t + 2, 20)  # the only child of the same name: folded
        if n == 3:
            d.op("aten::mean", t + 3, 15)  # a third level: folded into the first too
        d.op("aten::sum", t + 5, 10)
        d.launch(t + 6, 2, f"kernel_{n}", t + 10, 5.0 * n)
    return load_document(d.doc())


def _keep(ops: pa.Table) -> np.ndarray:
    keep: np.ndarray = ~Codes.of(ops.column("kind")).eq("step") & ~Codes.of(
        ops.column("name")
    ).isin(BOOKKEEPING_NAMES)
    return keep


def _both(trace: Trace, steps: tuple[int, int] | None) -> tuple[pa.Table, pa.Table]:
    ops = select_window(trace.ops.select(_OP_TABLE_COLUMNS), steps)
    keep = _keep(ops)
    return merge_duplicate_nodes(ops.filter(pa.array(keep))), merge_duplicate_nodes(ops, keep)


@pytest.mark.parametrize("steps", [None, (2, 3), (3, 3), (5, 9)])
def test_one_filter_is_filtering_then_folding(steps: tuple[int, int] | None) -> None:
    filtered_first, one_filter = _both(_trace(), steps)
    assert one_filter.equals(filtered_first)


def test_the_duplicates_fold_into_their_outermost_op() -> None:
    rows = {r.name: r for r in op_table(_trace(), None).rows}
    assert set(rows) == {"aten::mean", "aten::sum"}
    mean = rows["aten::mean"]
    # one call a step; each adopts its duplicates' self time: 10 + 10, and 10 + 5 + 5
    assert mean.calls == 3
    assert mean.cpu_self_us == pytest.approx(60.0)
    assert mean.cpu_total_us == pytest.approx(90.0)
    assert mean.device_total_us == pytest.approx(5.0 + 10.0 + 15.0)
    window = {r.name: r for r in op_table(_trace(), (2, 3)).rows}
    assert window["aten::mean"].calls == 2
    assert window["aten::mean"].cpu_self_us == pytest.approx(40.0)
    assert window["aten::sum"].device_self_us == pytest.approx(10.0 + 15.0)


def _shared() -> list[Path]:
    return sorted(p for p in SHARED.glob("**/*.json.gz") if "_et." not in p.name)


@pytest.mark.shared
@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces not present (a user's clone)")
def test_one_filter_on_the_shared_traces() -> None:
    checked = folded = 0
    for path in _shared():
        try:
            trace = load(path, cache=False)
        except Exception:  # not a Kineto trace (capture details, execution traces)
            continue
        for steps in (None, (1, 2)):
            filtered_first, one_filter = _both(trace, steps)
            assert one_filter.equals(filtered_first), (path.name, steps)
            checked += 1
        ops = trace.ops.select(_OP_TABLE_COLUMNS)
        folded += int(_keep(ops).sum()) > _both(trace, None)[1].num_rows  # a fold made
    assert checked >= 40 and folded >= 5, (checked, folded)
