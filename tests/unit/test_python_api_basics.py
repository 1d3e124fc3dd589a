"""The Python API's basics: dir(opscope) lists the public API; an OpTable is a sequence."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("bad", ["2:4", (1,), (3, 1), ("a", "b"), (True, 2), 1.5])
def test_analyze_checks_its_steps_argument(tmp_path: Path, bad: object) -> None:
    import json

    from opscope.errors import OpscopeError

    path = tmp_path / "t.json"
    event = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}
    path.write_text(json.dumps({"traceEvents": [event]}))
    with pytest.raises(OpscopeError, match="steps"):
        opscope.analyze(path, steps=bad)  # type: ignore[arg-type]


def test_analyze_takes_one_step_as_an_int() -> None:
    from opscope.analysis.api import steps_arg

    assert steps_arg(7) == (7, 7) and steps_arg([5, 8]) == (5, 8) and steps_arg(None) is None


def test_print_of_a_report_shows_the_text_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    event = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 9}
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [event]}))
    report = opscope.analyze(path)
    print(report)
    out = capsys.readouterr().out
    assert "1 events" in out and "aten::mm" in out and "Report(" not in out
    assert "Report(" in repr(report)  # repr stays the dataclass's


def test_optimize_is_callable_before_and_after_its_package_is_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``opscope.optimize(...)`` is the API whether it resolves to the lazy function or, once
    any of its modules was imported, to the package (made callable by the top package, so
    the core package need not import the API that prints its results)."""
    import importlib

    import opscope
    import opscope.experiment

    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(
        opscope.experiment, "optimize", lambda *a, **kw: calls.append((*a, kw)) or "result"
    )
    importlib.import_module("opscope.optimize.result")
    assert isinstance(opscope.optimize, types.ModuleType)
    assert opscope.optimize.result.OptimizeResult  # still the package
    assert opscope.optimize("f", ("x",), "cpu", budget_s=0) == "result"
    assert calls == [("f", ("x",), "cpu", {"budget_s": 0})]
    src = (Path(opscope.__file__).parent / "optimize" / "__init__.py").read_text()
    assert "opscope.experiment" not in src
