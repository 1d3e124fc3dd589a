"""One set of op families: the cost model, the fusion finding and the dtype finding agree."""

from __future__ import annotations

from opscope.analysis.costs import FORMULAS
from opscope.analysis.findings import dtype, fusion
from opscope.analysis.opsets import ELEMENTWISE, MATMULS, REDUCTIONS


def test_the_cost_model_knows_every_matmul_and_reduction() -> None:
    assert set(FORMULAS) >= MATMULS
    assert set(FORMULAS) >= REDUCTIONS


def test_the_findings_use_the_same_families() -> None:
    assert fusion.MATMULS is MATMULS and fusion.REDUCTIONS is REDUCTIONS
    assert fusion.FUSABLE == ELEMENTWISE | REDUCTIONS
    assert {fusion.base_name(n) for n in dtype.MATMUL_OPS} == MATMULS
