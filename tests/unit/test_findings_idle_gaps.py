"""idle_gaps: data-loading stalls show as host-wait gaps, much larger with num_workers=0."""

from __future__ import annotations

import numpy as np
import pytest
from test_findings_kit import Doc, context, run_rule, shared

from opscope.analysis.findings._view import gaps
from opscope.analysis.findings.idle_gaps import MIN_GAP_US

PAIR = "cuda/dataloader_pair/resnet50_workers{}.pt.trace.json.gz"


def _host_wait_us(workers: int) -> float:
    g = gaps(context(shared(PAIR.format(workers))))
    sel = (g.cause == "host") & (g.length >= MIN_GAP_US * 1e3)
    return float(g.length[sel].sum()) / 1e3


def test_dataloader_workers0_fires_with_the_loader_named() -> None:
    found = run_rule("idle_gaps", shared(PAIR.format(0)))
    host = [f for f in found if f.details["cause"] == "host"]
    assert host, [f.title for f in found]
    top = next(iter(host[0].details["host_activity"]))
    assert "DataLoader" in top
    assert "num_workers" in host[0].recommendation
    assert host[0].share > 0.1


def test_dataloader_workers4_waits_much_less() -> None:
    assert _host_wait_us(0) > 5 * _host_wait_us(4)
    assert not [
        f for f in run_rule("idle_gaps", shared(PAIR.format(4))) if f.details["cause"] == "host"
    ]


def _doc(
    gap_us: float, loader: str = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
) -> Doc:
    d = Doc()
    d.step(1, 0, 10_000)
    t = 0.0
    for i in range(20):
        d.op("aten::relu", t + 1, 6)
        d.launch(t + 2, 3, "relu_kernel", t + 6, 20)
        t += 22
        if i == 9:
            d.op(
                loader,
                t,
                gap_us,
                cat="user_annotation",
            )
            t += gap_us
    return d


def test_hand_made_gap_is_attributed_to_the_host() -> None:
    found = run_rule("idle_gaps", _doc(2000).trace())
    assert len(found) == 1 and found[0].details["cause"] == "host"
    assert found[0].details["gaps"] == 1
    assert 1900 < found[0].time_at_stake_us < 2100
    ev = found[0].evidence[0]
    assert ev.start_ns is not None and ev.end_ns is not None and ev.end_ns > ev.start_ns


@pytest.mark.parametrize("loader", ["my_data_loader.fetch", "Batches._next_data"])
def test_a_loader_named_as_the_critical_path_names_it_gets_the_loader_advice(loader: str) -> None:
    (f,) = run_rule("idle_gaps", _doc(2000, loader).trace())
    assert loader in f.title
    assert f.recommendation.startswith(f"The host spends the gaps in {loader}: load data")


def test_other_host_work_gets_the_general_advice() -> None:
    (f,) = run_rule("idle_gaps", _doc(2000, "my_preprocess").trace())
    assert "my_preprocess" in f.title
    assert f.recommendation.startswith("The device waits for the host.")


def test_short_gaps_do_not_fire() -> None:
    assert run_rule("idle_gaps", _doc(50).trace()) == []


def test_cpu_only_trace_has_no_device_gaps() -> None:
    assert run_rule("idle_gaps", shared("cpu/rank_not_found.json.gz")) == []
    assert np.size(gaps(context(shared("cpu/rank_not_found.json.gz"))).start) == 0
