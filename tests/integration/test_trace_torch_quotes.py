"""torch's export_chrome_trace does not escape quotes in record_function names; such a trace
still loads, with only that event skipped and said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from opscope.trace import load
from opscope.trace.kineto.file import NOT_JSON


def test_record_function_name_with_quotes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import profile, record_function

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    with profile() as prof:
        with record_function('say "hi"'):
            torch.ones(8) + 1
        with record_function("plain region"):
            torch.ones(8) * 2
    out = tmp_path / "trace.json"
    prof.export_chrome_trace(str(out))
    if b'"say "hi""' not in out.read_bytes():
        pytest.skip("this torch escapes quotes in names: nothing to recover")
    t = load(out, cache=False)
    names = set(t.sql("SELECT name FROM events").column(0).to_pylist())
    assert {"aten::ones", "aten::add", "aten::mul", "plain region"} <= names
    assert t.meta.skipped[NOT_JSON] == 1
    assert any("not JSON" in w and "say" in w for w in t.meta.warnings)
    assert not any("cut short" in w for w in t.meta.warnings)
