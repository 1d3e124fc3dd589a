"""Shared fixtures: paths to the traces recorded by others, and an isolated compile cache."""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]

# Every test (and every subprocess a test starts) uses a fresh cache: the ingest cache and the
# CPU peaks measured for the roofline never leak in from, or out to, the user's cache.
os.environ.setdefault("OPSCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="opscope-test-cache-"))
SHARED = REPO.parent / "shared"
SHARED_TRACES = SHARED / "traces"


def shared_trace(relative: str) -> Path:
    """A trace under ../shared/traces, or skip the test with the reason."""
    path = SHARED_TRACES / relative
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces not present (a user's clone): shared-trace tests skipped")
    if not path.exists():
        pytest.skip(f"../shared/traces/{relative} not present")
    return path


@pytest.fixture(scope="session")
def compile_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """TMPDIR and TORCHINDUCTOR_CACHE_DIR inside pytest's temp dir, shared by the session so
    that only the first compile of a graph is cold (Inductor writes a large precompiled header
    under $TMPDIR)."""
    root = tmp_path_factory.mktemp("inductor")
    (root / "tmp").mkdir()
    env = {"TMPDIR": str(root / "tmp"), "TORCHINDUCTOR_CACHE_DIR": str(root / "cache")}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def shared() -> Callable[[str], Path]:
    """``shared("cuda/x.json.gz")``: the path of a shared trace, or skip with the reason."""
    return shared_trace


@pytest.fixture
def load_gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Holds every ``Workspace.open`` (the explorer's load of a whole trace) until the test
    sets the event; set at the end in any case."""
    from opscope.service import Workspace

    go = threading.Event()
    original = Workspace.open

    def held(self: Workspace, *args: Any, **kwargs: Any) -> Any:
        assert go.wait(120), "the test never let the load go"
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Workspace, "open", held)
    yield go
    go.set()
