"""``Report.to_dict()``: plain data (no lazy segments), and a copy that the caller may change
without changing the report or the next document."""

from __future__ import annotations

import copy
from typing import Any

from test_findings_kit import Doc

from opscope.analysis.critical.path import Segments
from opscope.analysis.pipeline import analyze


def _doc() -> Doc:
    d = Doc()
    d.op("aten::mul", 0, 100)
    d.launch(10, 10, "k_mul", 30, 170)
    d.op("aten::add", 300, 12.0)
    d.launch(305, 5, "k_add", 320, 40)
    return d


def _containers(x: Any, out: list[Any]) -> list[Any]:
    if isinstance(x, dict):
        out.append(x)
        for v in x.values():
            _containers(v, out)
    elif isinstance(x, list):
        out.append(x)
        for v in x:
            _containers(v, out)
    return out


def test_the_document_is_plain_data() -> None:
    doc = analyze(_doc().trace()).to_dict()
    found = _containers(doc, [])
    assert all(type(c) in (dict, list) for c in found)
    assert not any(isinstance(c, Segments) for c in found)
    assert doc["ops"] and doc["critical_path"]["segments"] and doc["findings"] is not None


def test_changing_the_document_changes_neither_the_report_nor_the_next_one() -> None:
    rep = analyze(_doc().trace())
    first = rep.to_dict()
    want = copy.deepcopy(first)
    for c in _containers(first, []):  # empty every dict and list of the first document
        c.clear()
    again = rep.to_dict()
    assert again == want
    lazy = rep.to_dict(lazy=True)
    assert (
        lazy["ops"] == want["ops"]
        and list(lazy["critical_path"]["segments"]) == (want["critical_path"]["segments"])
    )
    assert not set(map(id, _containers(again, []))) & set(map(id, _containers(lazy, [])))
