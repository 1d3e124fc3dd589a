"""The op table's device time over a window of steps: the device executions of those steps,
read off the trace's index, by hand."""

from __future__ import annotations

from test_findings_kit import Doc

from opscope.analysis.optable import op_table
from opscope.trace import Trace, load_document


def _trace() -> Trace:
    d = Doc()
    # three steps, each an op launching one kernel (10, 20, 40 us); then a launch in no step
    for n, (t, k) in enumerate([(0, 10.0), (100, 20.0), (200, 40.0)], start=1):
        d.step(n, t, 90)
        d.op("aten::mul", t + 1, 20)
        d.launch(t + 2, 5, f"kernel_{n}", t + 10, k)
    d.op("aten::add", 400, 20)
    d.launch(402, 5, "kernel_late", 410, 80.0)
    return load_document(d.doc())


def test_device_time_is_the_windows_device_work() -> None:
    trace = _trace()
    assert op_table(trace, None).device_time_us == 10 + 20 + 40 + 80
    assert op_table(trace, (2, 3)).device_time_us == 20 + 40
    assert op_table(trace, (1, 1)).device_time_us == 10
    assert op_table(trace, (5, 9)).device_time_us == 0
