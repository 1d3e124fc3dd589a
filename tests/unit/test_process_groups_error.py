"""run.json's torch_distributed says why an initialised world could not be read."""

from __future__ import annotations

import pytest

dist = pytest.importorskip("torch.distributed")


def test_an_unreadable_world_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from opscope.capture.distributed import process_groups

    def broken() -> str:
        raise RuntimeError("the default group is gone")

    monkeypatch.setattr(dist, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_backend", broken)
    assert process_groups() == {"error": "RuntimeError: the default group is gone"}


def test_no_world_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from opscope.capture.distributed import process_groups

    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    assert process_groups() is None
