"""A count in a finding's text agrees with the report's tables: ``N calls``, ``runs N times``
and ``N × <op>`` of the op a finding names are that op's ``calls`` in the op table (or the
kernel table's for a kernel); a count of anything else names its unit (``device executions``,
``copies``, ``occurrences``, ``gaps``...) and is not compared."""

from __future__ import annotations

import re
from typing import Any

import pytest

from opscope import analyze

CALLS = re.compile(r"(?<![\w.])(\d+) calls?\b")
TIMES = re.compile(r"\bruns (\d+) times\b")
# "75 × cudaStreamSynchronize": a count of the name that follows
TIMES_NAME = re.compile(r"(?<![\w.])(\d+) × ([A-Za-z_][\w:.<>#\[\]=, -]*?)(?=: |[(;]| from |$)")
# "1465 × 144 µs": a count that says neither what it counts nor whose
BARE = re.compile(r"(?<![\w.])(\d+) × \d")

TRACES = [
    "cuda/ns_resolution.pt.trace.json.gz",  # a convolution's 265 calls run 1465 executions
    "cuda/a100_nccl_rank0_of2.json.gz",
    "cuda/a100_cudagraph_rank0_of16.json.gz",  # a copy's calls outnumber its executions
    "cuda/dataloader_pair/resnet50_workers0.pt.trace.json.gz",
    "cuda/et_pair/linear_kineto.json.gz",
    "cuda/gpu_user_annotation.json.gz",
    "cpu/rank_not_found.json.gz",
    "mtia/mtia_inference_rank0.json.gz",
    "rocm/mi300x_models/owlv2_large.json.gz",
    "rocm/mi300x_resnet_act_checkpoint_rank0_of8.json.gz",
    "rocm/sglang_qwen3_8b_decode.json.gz",
]


def _named(finding: dict[str, Any], ops: dict[str, int]) -> str | None:
    """The op a finding is about: ``details.op``, or the op of the collective it names."""
    det = finding.get("details") or {}
    if det.get("op") in ops:
        return str(det["op"])
    coll = det.get("collective")
    if coll:
        match = [n for n in ops if n == coll or n.endswith(f":{coll}")]
        return match[0] if len(match) == 1 else None
    return None


def count_problems(doc: dict[str, Any]) -> list[str]:
    """The counts of a report's findings that disagree with its op or kernel table."""
    ops = {o["name"]: int(o["calls"]) for o in doc.get("ops") or []}
    kernels = {k["name"]: int(k["calls"]) for k in doc.get("kernels") or []}
    out: list[str] = []
    for f in doc.get("findings") or []:
        text = f"{f['title']} || {f.get('recommendation') or ''}"
        op = _named(f, ops)
        for m in [*CALLS.finditer(text), *TIMES.finditer(text)]:
            n = int(m.group(1))
            if op is None:
                out.append(f"{f['kind']}: {m.group(0)!r} counts calls of no op in the table")
            elif n != ops[op]:
                out.append(f"{f['kind']}: {m.group(0)!r} but the op table has {op}: {ops[op]}")
        out += [f"{f['kind']}: {m.group(0)!r} names no unit" for m in BARE.finditer(text)]
        for m in TIMES_NAME.finditer(f["title"]):
            n, name = int(m.group(1)), m.group(2).strip()
            table = ops if name in ops else kernels if name in kernels else None
            if table is not None and n != table[name]:
                out.append(f"{f['kind']}: {m.group(0)!r} but the table has {name}: {table[name]}")
    return out


def test_the_check_sees_a_count_of_another_unit() -> None:
    doc = {
        "ops": [
            {"name": "aten::convolution_backward", "calls": 265},
            {"name": "aten::mm", "calls": 3},
        ],
        "kernels": [{"name": "sgemm", "calls": 7}],
        "findings": [
            {
                "kind": "hotspots",
                "title": "aten::convolution_backward holds 44.8 % (repeated: 1465 × 144 µs)",
                "recommendation": "aten::convolution_backward runs 1465 times at 144 µs each",
                "details": {"op": "aten::convolution_backward"},
            },
            {"kind": "x", "title": "2 × aten::mm: slow; 6 × sgemm", "details": {}},
            {"kind": "y", "title": "12 calls of something", "details": {}},
        ],
    }
    problems = count_problems(doc)
    assert sorted(problems) == [
        "hotspots: '1465 × 1' names no unit",
        "hotspots: 'runs 1465 times' but the op table has aten::convolution_backward: 265",
        "x: '2 × aten::mm' but the table has aten::mm: 3",
        "x: '6 × sgemm' but the table has sgemm: 7",
        "y: '12 calls' counts calls of no op in the table",
    ]
    doc["findings"] = [
        {
            "kind": "hotspots",
            "title": "aten::convolution_backward holds 44.8 % (repeated executions: 265 calls, "
            "1465 device executions × 144 µs)",
            "recommendation": "aten::convolution_backward's 265 calls run 1465 device executions",
            "details": {"op": "aten::convolution_backward"},
        },
        {"kind": "x", "title": "3 × aten::mm: slow; 7 × sgemm", "details": {}},
        {"kind": "h2d_copies", "title": "35 host-to-device copies caused by aten::mm"},
    ]
    assert count_problems(doc) == []


@pytest.mark.parametrize("relative", TRACES)
def test_finding_counts_agree_with_the_tables(relative: str, shared: Any) -> None:
    doc = analyze(shared(relative), roofline=False).to_dict()
    assert doc["findings"], "a trace with findings to check"
    problems = count_problems(doc)
    assert not problems, f"{relative}:\n" + "\n".join(problems)
