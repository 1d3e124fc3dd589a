"""FLOPs and bytes per call against TraceLens's GEMM/SDPA/CONV tables for the MI300X traces.

For every row of ``GEMM.csv``, ``SDPA_fwd.csv`` and ``CONV_fwd.csv`` beside the traces in
``../shared/traces/rocm/mi300x_models``: our FLOPs from the row's recorded ``Input Dims``,
``Input type``, ``Input Strides`` and ``Concrete Inputs`` agree with ``GFLOPS_first`` within
1%, our bytes with ``Data Moved (MB)_first`` within 1% (docs/cost-model.md says where and why
they differ at all), and the same op + shapes is a row of our ``OpTable.by_shape`` whose
roofline FLOPs per call agree too.
"""

from __future__ import annotations

import ast
import csv
import json
import time
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

from opscope.analysis.costs import op_cost
from opscope.analysis.optable import OpTable, op_table
from opscope.analysis.roofline import Roofline, roofline_of
from opscope.trace import Trace, load

pytestmark = pytest.mark.shared

MODELS = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "rocm" / "mi300x_models"
TABLES = ("GEMM.csv", "SDPA_fwd.csv", "CONV_fwd.csv")


def _rows() -> list[tuple[str, int, dict[str, str]]]:
    out: list[tuple[str, int, dict[str, str]]] = []
    if not MODELS.is_dir():
        return out
    for ref in sorted(MODELS.glob("*.tracelens_reference")):
        model = ref.name.removesuffix(".tracelens_reference")
        for table in TABLES:
            path = ref / table
            if path.is_file():
                with path.open(encoding="utf-8", newline="") as fh:
                    for i, row in enumerate(csv.DictReader(fh)):
                        out.append((f"{model}/{table}", i, row))
    return out


ROWS = _rows()
# without ../shared, one placeholder case that skips with the reason (not pytest's "empty
# parameter set")
_CASES = ROWS or [
    pytest.param(
        "", 0, {}, marks=pytest.mark.skip(reason="../shared/traces not present (a user's clone)")
    )
]
_IDS = [f"{t}:{i}" for t, i, _ in ROWS] or ["no-shared"]


def _args(row: dict[str, str]) -> tuple[Any, Any, Any, Any]:
    return (
        json.loads(row["Input Dims_first"]),
        ast.literal_eval(row["Input type_first"]),
        json.loads(row["Input Strides_first"]),
        ast.literal_eval(row["Concrete Inputs_first"]),
    )


@cache
def _analysed(model: str) -> tuple[Trace, OpTable, Roofline]:
    trace = load(MODELS / f"{model}.json.gz")
    table = op_table(trace)
    return trace, table, roofline_of(trace, table)


def _skip_without_shared() -> None:
    if not MODELS.is_dir():
        pytest.skip("../shared/traces not present (a user's clone)")


def test_reference_tables_are_there() -> None:
    _skip_without_shared()
    assert len(ROWS) >= 40  # 48 rows in the reference at the time of writing
    assert {name for name, _, _ in ROWS} >= {f"qwen1.5_0.5b_chat/{t}" for t in TABLES[:2]}


@pytest.mark.parametrize(("table", "index", "row"), _CASES, ids=_IDS)
def test_flops_and_bytes_per_call(table: str, index: int, row: dict[str, str]) -> None:
    dims, types, strides, concrete = _args(row)
    cost = op_cost(row["name"], dims, types, strides, concrete)
    assert cost is not None, f"{row['name']} {dims}"
    ref_flops = float(row["GFLOPS_first"]) * 1e9
    assert cost.flops == pytest.approx(ref_flops, rel=0.01)
    ref_bytes = float(row["Data Moved (MB)_first"]) * 2**20
    assert cost.bytes == pytest.approx(ref_bytes, rel=0.01)


@pytest.mark.parametrize(("table", "index", "row"), _CASES, ids=_IDS)
def test_same_op_and_shapes_in_our_op_table(table: str, index: int, row: dict[str, str]) -> None:
    dims, types, _, _ = _args(row)
    _, ops, rl = _analysed(table.split("/", maxsplit=1)[0])
    key = (row["name"], orjson.dumps(dims).decode(), orjson.dumps(types).decode())
    shapes = {(r.name, r.input_dims, r.input_types) for r in ops.by_shape}
    assert key in shapes, f"{key} not in by_shape"
    ours = next(r for r in rl.op_shapes if (r.name, r.input_dims, r.input_types) == key)
    assert ours.flops_per_call == pytest.approx(float(row["GFLOPS_first"]) * 1e9, rel=0.01)
    # MI300X peaks are known: a row with device time of its own is classified; a wrapper
    # (aten::convolution over aten::miopen_convolution) has FLOPs but no time, so no bound
    assert (ours.bound is not None) == (ours.costed_us > 0)


def test_roofline_of_a_100k_event_trace_is_fast() -> None:
    _skip_without_shared()
    trace, table, _ = _analysed("owlv2_large")
    assert len(trace) > 100_000
    t0 = time.perf_counter()
    rl = roofline_of(trace, table)
    elapsed = time.perf_counter() - t0
    assert rl.to_dict()["totals"]["coverage"] > 0.9
    assert elapsed < 1.0, f"roofline took {elapsed:.2f} s"  # ~0.08 s; loose for slow CI
