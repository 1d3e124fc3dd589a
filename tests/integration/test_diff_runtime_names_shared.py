"""opscope compare on the shared same-vendor pairs: matching by vendor-neutral runtime keys
changes nothing there (every name is spelled the same on both sides)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from opscope.analysis.diff import diff_reports
from opscope.analysis.pipeline import analyze

_NUMBER = re.compile(r"[-+]?\d[\d.,]*\s*(?:[µm]?s|%|×|x)?")


def _recorded_key(f: dict[str, Any]) -> tuple[str, str]:
    """How findings were matched before runtime names were normalised."""
    details = f.get("details") or {}
    subject = details.get("op") or details.get("name") or _NUMBER.sub("#", str(f["title"]))
    return str(f["kind"]), str(subject)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("cuda/diff_pair/control_a100.json.gz", "cuda/diff_pair/test_v100.json.gz"),
        (
            "cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz",
            "cuda/dataloader_pair/resnet50_workers4.pt.trace.json.gz",
        ),
    ],
)
def test_same_vendor_pairs_match_as_recorded(a: str, b: str, shared: Callable[[str], Path]) -> None:
    ra, rb = analyze(shared(a)), analyze(shared(b))
    d = diff_reports(ra, rb)
    assert {r["name"] for r in d["ops"]} == {o.name for o in ra.ops.rows} | {
        o.name for o in rb.ops.rows
    }
    assert {r["name"] for r in d["kernels"]} == {k.name for k in ra.kernels} | {
        k.name for k in rb.kernels
    }
    assert not any("names" in r for r in d["ops"] + d["kernels"])
    f = d["findings"]
    assert not any(m["renamed"] for m in f["matched"])
    ka = {_recorded_key(x) for x in ra.findings}
    kb = {_recorded_key(x) for x in rb.findings}
    assert {_recorded_key(x) for x in f["resolved"]} == ka - kb
    assert {_recorded_key(x) for x in f["new"]} == kb - ka
    assert {_recorded_key(x) for x in f["persisting"]} == ka & kb
