"""The explorer on a Neuron profile (the RMSNorm study's builtin scenario): the framework,
runtime and hardware lanes, and the chain from the aten op to the NeuronCore execution."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "neuron_fixtures"

pytestmark = pytest.mark.e2e


def test_neuron_lanes_and_chain_to_the_neuron_core(
    page: Any, serve: Callable[..., str], shot: Callable[[Any, str], Path]
) -> None:
    builtin = FIXTURES / "builtin"
    if not builtin.is_dir():
        pytest.skip("../shared/neuron_fixtures not present (a user's clone)")
    page.goto(serve(builtin))
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    page.click("#tabs button[data-view=timeline]")
    page.wait_for_function("() => window.__opscope && window.__opscope.lanesDrawn > 0")
    # lane groups are drawn on the canvas; the page publishes them for tests
    groups = page.evaluate("() => window.__opscope.groups")
    assert {"framework", "runtime", "hardware"} <= set(groups), groups
    assert page.evaluate("() => window.__opscope.lanes") >= 3
    # the top op by device time is the fused kernel's aten op; its chain reaches the core
    page.click("#tabs button[data-view=ops]")
    top = page.locator("#ops-table tbody tr").first
    assert top.get_attribute("data-op") == "aten::_fused_rms_norm"
    top.click()
    page.wait_for_selector("#mini-chain [data-role='device execution']")
    assert "nc_exec_running" in (page.text_content("#mini-chain") or "")
    shot(page, "neuron-chain")
    assert page.errors == [], page.errors
