"""Roofline: classification on hand-made numbers, a hand-made GPU trace end to end, the
report annotation, and the SVG/text views (well-formed, escaped, no scripts)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from opscope.analysis.peaks import DevicePeaks
from opscope.analysis.pipeline import analyze
from opscope.analysis.roofline import OVERHEAD_FACTOR, annotate, classify, roofline
from opscope.render.roofline import render_svg, render_text
from opscope.trace import load_document

H100 = "NVIDIA H100 80GB HBM3"
EVIL = '<script>alert("x")</script>&op'


def test_classify() -> None:
    assert classify(10.0, compute_us=8.0, memory_us=2.0) == "compute"
    assert classify(10.0, compute_us=2.0, memory_us=8.0) == "memory"
    assert classify(100.0, compute_us=2.0, memory_us=8.0) == "overhead"  # 12.5x the roofline
    assert classify(80.0, compute_us=2.0, memory_us=8.0) == "memory"  # exactly 10x is not
    assert classify(1.0, compute_us=0.0, memory_us=0.0) == "overhead"  # no work at all
    assert classify(0.0, 1.0, 1.0) is None and classify(1.0, None, 1.0) is None
    assert OVERHEAD_FACTOR == 10.0


def _gpu_trace(ops: list[tuple[str, list[Any], list[str], float]]) -> dict[str, Any]:
    """One cpu_op per entry, each launching one kernel of the given duration (µs)."""
    ev: list[dict[str, Any]] = []
    t = 1000.0
    for i, (name, dims, types, kernel_us) in enumerate(ops):
        ext, corr = 100 + i, 500 + i
        ev.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 10.0,
                "args": {
                    "External id": ext,
                    "Input Dims": dims,
                    "Input type": types,
                    "Input Strides": [[] for _ in dims],
                    "Concrete Inputs": ["" for _ in dims],
                },
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t + 1,
                "dur": 5.0,
                "args": {"External id": ext, "correlation": corr},
            }
        )
        ev.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"kernel_{i}",
                "pid": 0,
                "tid": 7,
                "ts": t + 20,
                "dur": kernel_us,
                "args": {"External id": ext, "correlation": corr, "device": 0, "stream": 7},
            }
        )
        t += 1000 + kernel_us
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": H100}], "traceEvents": ev}


BF = "c10::BFloat16"
# 4096^3 bf16 GEMM: 137.4 GFLOP -> 138.9 µs at 989.5 TFLOP/s; 100.7 MB -> 30 µs at 3.35 TB/s
GEMM = ("aten::mm", [[4096, 4096], [4096, 4096]], [BF, BF], 200.0)
# 1M-element fp32 add: 12.6 MB -> 3.76 µs at 3.35 TB/s
ADD_FAST = ("aten::add", [[1024, 1024], [1024, 1024]], ["float", "float"], 5.0)
ADD_SLOW = ("aten::add", [[1024, 1024], [1024]], ["float", "float"], 100.0)


@pytest.fixture()
def report_and_roofline() -> tuple[Any, Any]:
    trace = load_document(_gpu_trace([GEMM, ADD_FAST, ADD_SLOW, (EVIL, [[4]], ["float"], 1.0)]))
    rep = analyze(trace, findings=False, roofline=False)  # annotate() is what is under test
    return rep, roofline(rep)


def test_hand_made_trace_is_classified(report_and_roofline: tuple[Any, Any]) -> None:
    _, rl = report_and_roofline
    assert rl.peaks is not None and rl.peaks.key == "h100-sxm"
    shapes = {(r.name, r.input_dims): r for r in rl.op_shapes}
    mm = shapes[("aten::mm", "[[4096,4096],[4096,4096]]")]
    assert mm.flops == 2 * 4096**3 and mm.bound == "compute"
    assert mm.roofline_share == pytest.approx(2 * 4096**3 / 989.5e12 / 200e-6, rel=1e-6)
    assert mm.achieved_flops == pytest.approx(2 * 4096**3 / 200e-6)
    fast = shapes[("aten::add", "[[1024,1024],[1024,1024]]")]
    assert fast.bound == "memory" and fast.bytes == 3 * 2**20 * 4
    slow = shapes[("aten::add", "[[1024,1024],[1024]]")]
    assert slow.bound == "overhead"
    # per name: the two adds together (their roofline times summed against their device time)
    add = rl.row("aten::add")
    assert add is not None and add.flops == 2 * 2**20 and add.bound == "overhead"
    assert rl.row(EVIL) is not None and rl.row(EVIL).flops is None  # unknown op: no numbers


def test_annotate_adds_exactly_the_report_keys(report_and_roofline: tuple[Any, Any]) -> None:
    rep, rl = report_and_roofline
    d = rep.to_dict()
    before_ops = {k for op in d["ops"] for k in op}
    before_shapes = {k for op in d["op_shapes"] for k in op}
    annotate(d, rl)
    assert {k for op in d["ops"] for k in op} - before_ops == {"flops", "bytes", "bound"}
    assert {k for op in d["op_shapes"] for k in op} - before_shapes == {
        "flops_per_call",
        "bytes_per_call",
        "intensity",
        "bound",
    }
    mm = next(op for op in d["ops"] if op["name"] == "aten::mm")
    assert mm["flops"] == 2 * 4096**3 and mm["bound"] == "compute"
    assert d["device"]["peaks"]["key"] == "h100-sxm"
    json.dumps(d)  # still plain JSON


def test_without_peaks_rows_have_numbers_but_no_bound() -> None:
    doc = _gpu_trace([GEMM])
    doc["deviceProperties"] = [{"id": 0, "name": "Mystery Accelerator"}]
    rl = roofline(analyze(load_document(doc), findings=False))
    mm = rl.row("aten::mm")
    assert rl.peaks is None and mm is not None and mm.flops == 2 * 4096**3
    assert mm.bound is None and mm.achieved_flops == pytest.approx(2 * 4096**3 / 200e-6)
    assert any("no peaks" in n for n in rl.notes)


def test_explicit_peaks_and_impossible_speed_note() -> None:
    tiny = DevicePeaks("toy", "Toy", {"fp32": 1e9, "bf16": 1e9}, 1e9, "test")
    rl = roofline(analyze(load_document(_gpu_trace([GEMM])), findings=False), peaks=tiny)
    mm = rl.row("aten::mm")
    assert mm is not None and mm.roofline_share is not None and mm.roofline_share > 100
    assert any("faster than the roofline" in n for n in rl.notes)


def test_svg_is_well_formed_escaped_and_inert(report_and_roofline: tuple[Any, Any]) -> None:
    _, rl = report_and_roofline
    data = rl.to_dict()
    # make the evil op a placed point too
    data["op_shapes"].append({**data["op_shapes"][0], "name": EVIL})
    svg = render_svg(data)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    assert not list(root.iter(f"{ns}script"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    titles = [t.text or "" for t in root.iter(f"{ns}title")]
    assert any(t.startswith(EVIL) for t in titles)  # the tooltip shows the name as text
    circles = list(root.iter(f"{ns}circle"))
    assert len(circles) >= 4  # points, the ridge, the legend
    assert "onload" not in svg and "href" not in svg


def test_svg_without_points_or_peaks() -> None:
    svg = render_svg({"device": {"name": "x"}, "peaks": None, "op_shapes": []})
    ET.fromstring(svg)
    assert "No op" in svg


def test_text_view(report_and_roofline: tuple[Any, Any]) -> None:
    _, rl = report_and_roofline
    out = render_text(rl.to_dict(), top=5)
    assert "aten::mm" in out and "compute" in out and "H100" in out


@pytest.mark.parametrize("width", [80, 100, 160])
def test_text_view_fits_its_width_by_dropping_columns(
    report_and_roofline: tuple[Any, Any], width: int
) -> None:
    _, rl = report_and_roofline
    data = rl.to_dict()
    row = next(r for r in data["op_shapes"] if r.get("flops") is not None)
    row["name"] = "aten::" + "very_long_op_name_" * 6  # would need 100+ columns alone
    out = render_text(data, top=5, width=width)
    table = [ln for ln in out.splitlines() if ln[:1] in "┏┃┡│└"]
    assert table and max(len(ln) for ln in table) <= width
    header = next(ln for ln in table if ln.startswith("┃"))
    for kept in ("op", "dev self", "of roof", "bound"):  # what the roofline is read for
        assert kept in header
    assert ("B/call" in header) == (width >= 160)  # dropped first, not squeezed
    assert "…" not in header  # no header is cut


def test_an_empty_roofline_says_why() -> None:
    no_shapes = render_text({"peaks": None, "op_shapes": [{"name": "a", "flops": None}]})
    assert "records no input shapes" in no_shapes and "record_shapes=True" in no_shapes
    unknown = render_text(
        {"peaks": None, "op_shapes": [{"name": "a", "flops": None, "input_dims": "[[2]]"}]}
    )
    assert "is in the cost model" in unknown and "none of the ops" in unknown


@pytest.mark.parametrize("seed", range(30))
def test_row_dict_is_the_rows_fields_and_properties(seed: int) -> None:
    """``to_dict`` computes the derived values inline: the same as the properties, in the same
    key order, including the rows with none of them (no cost, no calls, no device time)."""
    import random

    from opscope.analysis.roofline import RooflineRow

    rnd = random.Random(seed)

    def maybe(x: float) -> float | None:
        return None if rnd.random() < 0.3 else x

    row = RooflineRow(
        name="aten::mm",
        input_dims=rnd.choice([None, "[[2, 3], [3, 4]]"]),
        input_types=rnd.choice([None, '["float", "float"]']),
        calls=rnd.randint(0, 9),
        device_self_us=rnd.random() * 100,
        flops=maybe(rnd.choice([0.0, rnd.random() * 1e9])),
        bytes=maybe(rnd.choice([0.0, rnd.random() * 1e6])),
        costed_calls=rnd.randint(0, 3),
        costed_us=rnd.choice([0.0, -1.0, rnd.random() * 50]),
        compute_us=maybe(rnd.random()),
        memory_us=maybe(rnd.random()),
        bound=rnd.choice([None, "memory"]),
    )
    want: dict[str, Any] = {"name": row.name}
    if row.input_dims is not None or row.input_types is not None:
        want |= {"input_dims": row.input_dims, "input_types": row.input_types}
    want |= {
        "calls": row.calls,
        "costed_calls": row.costed_calls,
        "device_self_us": row.device_self_us,
        "costed_us": row.costed_us,
        "flops": row.flops,
        "bytes": row.bytes,
        "flops_per_call": row.flops_per_call,
        "bytes_per_call": row.bytes_per_call,
        "intensity": row.intensity,
        "achieved_flops": row.achieved_flops,
        "achieved_bandwidth": row.achieved_bandwidth,
        "compute_us": row.compute_us,
        "memory_us": row.memory_us,
        "roofline_us": row.roofline_us,
        "roofline_share": row.roofline_share,
        "bound": row.bound,
        "dtype": row.dtype,
        "matrix": row.matrix,
        "formula": row.formula,
    }
    got = row.to_dict()
    assert list(got.items()) == list(want.items())
