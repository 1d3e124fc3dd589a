"""The profiler-chatter filter on descriptor 2: what it drops and what it keeps."""

from __future__ import annotations

import os
import threading

from opscope.capture.stderr_filter import DROPPED, _forward


def test_only_torchs_start_stop_lines_match() -> None:
    assert DROPPED.match(
        b"USDT:2026-12-01 16:55:32 3228:3228 SyncActivityProfilerHandler.cpp:59] profiler_stop"
    )
    assert DROPPED.match(b"USDT:x 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start")
    for kept in (b"USDT: a line of the program's own", b"profiler_start", b"x] profiler_stop"):
        assert not DROPPED.match(kept)


def test_forward_keeps_order_partial_lines_and_counts_drops() -> None:
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    dropped = [0]
    t = threading.Thread(target=_forward, args=(r_in, w_out, dropped))
    t.start()
    stop = b"USDT:2026 1:1 SyncActivityProfilerHandler.cpp:59] profiler_stop\n"
    for piece in (b"first\nsec", b"ond\n" + stop, b"USDT: mine\n", b"no newline at the end"):
        os.write(w_in, piece)
    os.close(w_in)
    t.join(timeout=10)
    os.close(w_out)
    got = b""
    while chunk := os.read(r_out, 1 << 16):
        got += chunk
    os.close(r_out)
    assert got == b"first\nsecond\nUSDT: mine\nno newline at the end"
    assert dropped == [1]
