"""sync_stalls: .item() and explicit syncs with the device idle time after them."""

from __future__ import annotations

from test_findings_kit import Doc, run_rule, shared


def test_event_sync_trace_fires_on_item() -> None:
    found = run_rule("sync_stalls", shared("cuda/critical_path_event_sync.json.gz"))
    assert found
    f = found[0]
    assert f.details["call"] == "cudaStreamSynchronize"
    assert "aten::item" in f.details["issued_by"]
    assert f.details["device_idle_after_us"] > 50
    # the host waited 6 µs: that bounds what removing the sync can recover
    assert f.time_at_stake_us <= f.details["host_wait_us"] + 1e-6
    assert ".item()" in f.recommendation


def test_multi_stream_trace_syncs_at_the_end_only() -> None:
    assert (
        run_rule("sync_stalls", shared("cuda/critical_path_event_sync_multi_stream.json.gz")) == []
    )


def _doc(inside_opscope_range: bool) -> Doc:
    d = Doc()
    t = 0.0
    for i in range(3):
        d.step(i, t, 1000)
        d.op("aten::mm", t + 10, 20)
        d.launch(t + 12, 5, "gemm", t + 30, 400)
        if inside_opscope_range:
            d.op("opscope::synchronize", t + 40, 400, cat="user_annotation")
        d.runtime("cudaDeviceSynchronize", t + 41, 390)
        # the host takes a while to launch the next work: the device idles
        d.op("aten::add", t + 700, 20)
        d.launch(t + 702, 5, "add_kernel", t + 720, 50)
        t += 1000
    return d


def test_explicit_device_synchronize_fires() -> None:
    found = run_rule("sync_stalls", _doc(inside_opscope_range=False).trace())
    assert len(found) == 1
    f = found[0]
    assert f.details["call"] == "cudaDeviceSynchronize" and f.details["count"] == 3
    assert f.details["device_idle_after_us"] > 3 * 250
    assert f.time_at_stake_us > 0


def test_opscope_own_synchronize_is_excluded() -> None:
    assert run_rule("sync_stalls", _doc(inside_opscope_range=True).trace()) == []
