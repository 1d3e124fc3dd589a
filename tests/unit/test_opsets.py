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


def test_one_data_loading_predicate() -> None:
    from opscope.analysis.opsets import is_data_loading

    for name in (
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        "my_data_loader.fetch",
        "torch/utils/data/dataloader.py(675): _next_data",
        "MyIter._next_data",
        "DATALOADER",
    ):
        assert is_data_loading(name), name
    for name in ("aten::mm", "data", "loader", "cudaDeviceSynchronize"):
        assert not is_data_loading(name), name
