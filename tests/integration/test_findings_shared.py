"""Every rule over every shared trace: no exception, every finding well-formed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opscope.analysis.findings import RULE_MODULES, Context, rules, run_rules
from opscope.analysis.findings._view import MAX_EVIDENCE_IDS
from opscope.analysis.pipeline import analyze
from opscope.errors import OpscopeError
from opscope.trace import load

SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
TRACES = (
    sorted(
        p.relative_to(SHARED_TRACES).as_posix()
        for p in SHARED_TRACES.rglob("*")
        if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz"))
    )
    if SHARED_TRACES.is_dir()
    else []
)


def test_every_rule_module_is_registered() -> None:
    names = [r.name for r in rules()]
    assert names == list(RULE_MODULES)
    assert set(names) == {
        "hotspots",
        "fusion",
        "h2d_copies",
        "sync_stalls",
        "launch_bound",
        "idle_gaps",
        "compile",
        "dtype",
        "profile_quality",
        "comm_exposed",
        "graph_host_gaps",
        "graph_input_copies",
        "graph_recapture",
    }


@pytest.mark.parametrize("relative", TRACES or ["<none>"])
def test_rules_on_shared_trace(relative: str) -> None:
    if not TRACES:
        pytest.skip("../shared/traces not present (a user's clone)")
    try:
        trace = load(SHARED_TRACES / relative)
    except OpscopeError as exc:  # e.g. an execution trace: not a timed Kineto trace
        pytest.skip(f"not loadable as a trace: {exc}")
    rep = analyze(trace, findings=False)
    ctx = Context(trace=trace, op_table=rep.ops, timeline=rep.timeline, steps=rep.steps)
    found = run_rules(ctx)
    ids = set(np.asarray(trace.events.column("id").to_numpy()).tolist())
    assert [f.id for f in found] == [f"F{i}" for i in range(1, len(found) + 1)]
    stakes = [f.time_at_stake_us for f in found]
    assert stakes == sorted(stakes, reverse=True)
    for f in found:
        assert f.kind in RULE_MODULES
        assert f.severity in ("high", "medium", "low", "info")
        assert f.confidence in ("high", "medium", "low")
        assert f.title and f.recommendation
        assert np.isfinite(f.time_at_stake_us) and f.time_at_stake_us >= 0, f.title
        assert 0.0 <= f.share <= 1.0, f.title
        for ev in f.evidence:
            assert len(ev.event_ids) <= MAX_EVIDENCE_IDS
            assert set(ev.event_ids) <= ids, f.title
            if ev.start_ns is not None:
                assert ev.end_ns is not None and ev.end_ns >= ev.start_ns
        d = f.to_dict()
        assert d["kind"] == f.kind and isinstance(d["details"], dict)
