"""Text formatting: kernel names keep their distinguishing tail, lines never split a value from
its unit, clipped finding text ends at a word."""

from __future__ import annotations

import io

from rich.console import Console

from opscope.analysis.findings.base import clip_words
from opscope.render.fmt import line_spans, print_wrapped, shorten_kernel


def test_kernel_names_keep_the_tail() -> None:
    a = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
    b = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_32x3_nn_align4>(Params)"
    sa, sb = shorten_kernel(a, 40), shorten_kernel(b, 40)
    assert len(sa) <= 40 and len(sb) <= 40
    assert sa != sb
    assert sa.endswith("_nn_align4>") and not sa.startswith("void ")
    assert shorten_kernel("short", 40) == "short"


def test_lines_never_split_a_value_from_its_unit() -> None:
    text = "x" * 90 + " 12.5 µs and then 45 % more and 3.2 GB/s of copies at 1.5 ms each"
    for width in range(20, 110):
        for a, b in line_spans(text, width):
            line = text[a:b]
            assert len(line) <= width or " " not in line
            assert not line.startswith(("µs", "%", "GB/s", "ms"))


def test_print_wrapped_stays_in_the_console_width() -> None:
    console = Console(width=40, record=True, file=io.StringIO())
    print_wrapped(console, "holds 11.8 % of device time (repeated executions: 258 × 229 µs)")
    lines = console.export_text().splitlines()
    assert all(len(line) <= 40 for line in lines)
    assert not any(line.startswith("µs") for line in lines)


def test_clip_words_cuts_at_a_word() -> None:
    text = "the trace is cut short (a profiler killed mid-write?); recovered 1224 events"
    got = clip_words(text, 40)
    assert len(got) <= 40 and got.endswith("…")
    assert text.startswith(got[:-1]) and text[len(got) - 1] == " "
    assert clip_words("short", 40) == "short"
