"""The Python API's basics: dir(opscope) lists the public API; an OpTable is a sequence."""

from __future__ import annotations

import opscope
from opscope.analysis.optable import OpRow, OpTable


def test_dir_lists_the_public_api() -> None:
    names = dir(opscope)
    assert "analyze" in names and "compare" in names
    assert set(opscope.__all__) <= set(names)
    assert "TYPE_CHECKING" not in names


def test_op_table_has_len_iteration_and_indexing() -> None:
    rows = OpTable.__dataclass_fields__["rows"]
    assert rows is not None
    table = OpTable(rows=[], device_is_host=False, device_time_us=0.0)
    assert len(table) == 0 and list(table) == []
    assert issubclass(OpRow, object)
