"""A job's findings grouped for reading (render.finding_groups): the same finding on several
ranks shown once, in the text, Markdown and HTML reports."""

from __future__ import annotations

from typing import Any

from opscope.render import html, markdown, text
from opscope.render.finding_groups import group_findings, rank_ranges


def finding(kind: str, title: str, rank: int | None, stake: float) -> dict[str, Any]:
    return {
        "id": "F",
        "kind": kind,
        "title": title,
        "rank": rank,
        "severity": "high",
        "time_at_stake_us": stake,
        "share": 0.1,
        "recommendation": "do the thing",
        "details": {},
    }


def test_rank_ranges() -> None:
    assert rank_ranges([3, 0, 1, 2, 5, 7, 8, 9]) == "0-3, 5, 7-9"
    assert rank_ranges([4]) == "4"


def test_the_same_finding_on_several_ranks_is_one_group() -> None:
    found = [
        finding("idle_gaps", "Device idle 64.5 % of the time in 1277 gaps ≥ 100 µs", 3, 441.6),
        finding("hotspots", "aten::conv2d holds 20 % of device time (9 calls × 4.1 ms)", 3, 9.0),
        finding("idle_gaps", "Device idle 60.6 % of the time in 1172 gaps ≥ 100 µs", 2, 414.9),
        finding("hotspots", "aten::conv1d holds 20 % of device time (9 calls × 900 µs)", 3, 8.0),
        finding("straggler", "rank 2 arrives last at 3 collectives", None, 5.0),
        finding("idle_gaps", "Device idle 64.6 % of the time in 1282 gaps ≥ 100 µs", 0, 442.1),
    ]
    groups = group_findings(found)
    # conv1d and conv2d differ in a name, not a figure: two groups
    assert [len(g.members) for g in groups] == [3, 1, 1, 1]
    assert groups[0].lead["rank"] == 3 and groups[0].ranks == [0, 2, 3]
    assert groups[0].rank_label() == "ranks 0, 2-3"
    assert groups[0].stakes_us() == (414.9, 442.1)
    assert groups[3].rank_label() is None  # the job's own finding
    assert "on rank 3 (415 µs to 442 µs on each of 3 ranks" in groups[0].spread()
    assert groups[1].spread() == ""


def test_the_reports_show_a_group_once() -> None:
    found = [
        finding("idle_gaps", f"Device idle {60 + r} % of the time", r, 100.0) for r in range(4)
    ]
    data: dict[str, Any] = {"findings": found}
    out = text.render_text(_doc(data), width=120)
    assert out.count("Device idle") == 1 and "[ranks 0-3]" in out
    assert "the same on each of 4 ranks" in out
    md = markdown.render_markdown(_doc(data))
    assert md.count("Device idle") == 1 and "[ranks 0-3]" in md
    page = html.plain_tables(_doc(data))
    assert page.count("Device idle") == 1 and "[ranks 0-3]" in page


def _doc(extra: dict[str, Any]) -> dict[str, Any]:
    """A minimal report document of a CPU trace, with ``extra`` on top."""
    import opscope
    from opscope.trace import load_document

    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5}
        for i in range(4)
    ]
    doc = opscope.analyze(load_document({"traceEvents": events}), roofline=False).to_dict()
    doc.update(extra)
    return doc
