"""The ``brief`` tool and the first block of ``opscope report`` say one thing: on every shared
trace the brief names the report's first fix with the same saving, in under 2k tokens; every
next step it names works: each fix's ``finding`` call, each ``what_if`` call (whose saving is
the fix's step saving) and each command line, which reopens the trace as it was opened."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from golden_reports import SHARED, trace_files
from mcp_hints import hints
from opscope.cli.main import main
from opscope.mcp.registry import Session
from opscope.mcp.server import answer, registry
from opscope.render.brief import saving
from opscope.service import Workspace

REG = registry()
# 2k tokens, at 3 bytes a token (JSON and trace names tokenise worse than prose's 4)
MAX_BRIEF_BYTES = 6_000


def make(session: Session, written: str) -> Any:
    """Make the call ``written`` (``what_if(changes=[...])``) as a model would."""
    (tool, _, args), *rest = hints(written, REG.specs)
    assert not rest and args is not None, written
    result, is_error = answer(REG, session, tool, args)
    assert not is_error, (written, result.text)
    return result


def check_steps(session: Session, fixes: list[dict[str, Any]]) -> None:
    """Each fix's calls answer; a what-if saves what the fix says it saves (its step saving
    is that what-if's, capped at its time at stake)."""
    for f in fixes:
        got = make(session, f["call"]).data
        assert got["id"] == f["id"], f["call"]
        if f.get("what_if"):
            saved = make(session, f["what_if"]).data["what_if"]["saved_us"]
            step, stake = f["step_savings_us"], f["time_at_stake_us"]
            assert saved == pytest.approx(step, abs=1.0) or (step == stake and saved >= stake)


def report_text(argv: list[str], out: Path) -> str:
    assert main(["report", *argv, "-o", str(out)]) == 0, argv
    return out.read_text()


def in_brief(text: str) -> str:
    """The report's ``In brief`` block, its wrapped lines joined, whitespace folded."""
    block = text.split("In brief", 1)[1].split("\n\n", 1)[0]
    return " ".join(block.split())


def first_fix(f: dict[str, Any]) -> str:
    where = f" rank {f['rank']}" if f.get("rank") is not None else ""
    return f"1. {f['id']} {f['severity']} {f['kind']}{where}: {saving(f)}."


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("relative", trace_files() or ["(no shared traces)"])
def test_brief_names_the_reports_first_fix_in_under_2k_tokens(
    relative: str, tmp_path: Path
) -> None:
    path = SHARED / "traces" / relative
    if not path.exists():
        pytest.skip("../shared/traces not present")
    session = Session(Workspace())
    opened, is_error = answer(REG, session, "open_trace", {"path": str(path)})
    if is_error:
        pytest.skip(f"not a trace the server opens: {opened.text}")
    result, is_error = answer(REG, session, "brief", {})
    assert not is_error, result.text
    data = result.data
    sent = len(result.text.encode()) + len(json.dumps(data, separators=(",", ":")).encode())
    assert sent < MAX_BRIEF_BYTES, sent

    report = session.workspace.report()
    findings = report.get("findings") or []
    fixes = data["fixes"]
    assert data["findings"] == len(findings)
    if not findings:
        assert fixes == [] and "No findings" in result.text
        return
    top = findings[0]
    assert fixes[0]["id"] == top["id"]
    assert fixes[0]["step_savings_us"] == top.get("step_savings_us")
    assert fixes[0]["time_at_stake_us"] == top["time_at_stake_us"]
    # the terminal report's first block names the same first fix with the same saving
    line = first_fix(fixes[0])
    assert line in " ".join(result.text.split())
    assert line in in_brief(report_text([str(path)], tmp_path / "report.txt"))
    check_steps(session, fixes)


def run_command(command: str, out: Path) -> str:
    argv = shlex.split(command)
    assert argv[:2] == ["opscope", "report"], command
    return report_text(argv[2:], out)


@pytest.mark.shared
@pytest.mark.slow
def test_every_command_the_brief_prints_runs(tmp_path: Path) -> None:
    """The commands of the terminal report's brief, run as printed: ``--finding`` prints that
    finding, ``--what-if`` projects the saving the brief states."""
    for relative in (
        "rocm/mi300x_models/owlv2_large.json.gz",
        "cuda/ns_resolution.pt.trace.json.gz",
    ):
        path = SHARED / "traces" / relative
        if not path.exists():
            pytest.skip(f"../shared/traces/{relative} not present")
        text = report_text([str(path)], tmp_path / "report.txt")
        commands = re.findall(r"next: (opscope report .*)", text)
        ws = Workspace()
        fixes = ws.brief(ws.open(path).handle)["fixes"]
        assert [f["command"] for f in fixes] == commands  # each on one line, to copy
        for f in fixes:
            shown = run_command(f["command"], tmp_path / f"{f['id']}.txt")
            if "--what-if" in f["command"]:
                assert "saves" in shown
                assert saving(f).split(" of the path")[0].removeprefix("saves ≤ ") in shown
            else:
                assert shown.startswith(f"{f['id']} "), shown[:200]


def test_a_brief_reopens_the_trace_as_it_was_opened(tmp_path: Path) -> None:
    """On a job opened at one rank and one step window, the brief's calls name the trace asked
    for and its commands carry --steps and --rank; each runs and gives the same finding."""
    from distjobs import write_nccl_job

    folder = tmp_path / "job"
    folder.mkdir()
    write_nccl_job(folder, world=3, late_rank=1, late_us=200.0)
    session = Session(Workspace())
    steps = {"path": str(folder), "rank": 1}
    answer(REG, session, "open_trace", steps)
    first = (session.workspace.report().get("steps") or [{}])[0].get("step")
    assert first is not None
    window = str(first)
    opened, is_error = answer(REG, session, "open_trace", {**steps, "steps": window})
    assert not is_error, opened.text
    handle = opened.data["trace"]
    answer(REG, session, "open_trace", {"path": str(folder)})  # another default trace
    result, is_error = answer(REG, session, "brief", {"trace": handle})
    assert not is_error, result.text
    fixes = result.data["fixes"]
    assert fixes, result.text
    for f in fixes:
        assert f'trace="{handle}"' in f["call"]
        assert "--rank 1" in f["command"]
        assert f"--steps {window} " in f["command"]
    check_steps(session, fixes)
    want = session.workspace.findings(handle, limit=50)["rows"]
    for f in fixes:
        if "--finding" in f["command"]:
            shown = run_command(f["command"], tmp_path / f"{f['id']}.txt")
            title = next(w["title"] for w in want if w["id"] == f["id"])
            assert shown.startswith(f"{f['id']} ") and title[:40] in " ".join(shown.split())
