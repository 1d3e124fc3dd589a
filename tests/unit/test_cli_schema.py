"""``opscope schema``: the list of documents, a document's JSON Schema, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from opscope.cli.main import main
from opscope.documents import DOCUMENTS, json_schema


def test_without_name_lists_every_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(DOCUMENTS)
    for line, name in zip(lines, DOCUMENTS, strict=True):
        assert line.split()[1] == f"opscope.{name}/1" and len(line.split()) > 3


def test_report_prints_its_draft_2020_12_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "report"]) == 0
    captured = capsys.readouterr()
    schema = json.loads(captured.out)
    Draft202012Validator.check_schema(schema)
    assert schema == json_schema("report") and schema["title"] == "opscope.report/1"
    assert captured.out.startswith('{\n  "$schema"')  # indented
    assert captured.err == ""


def test_the_printed_schema_validates_the_report_command_s_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_explorer_api import gpu_doc  # same folder (rootdir on sys.path)

    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(gpu_doc()))
    assert main(["report", str(trace), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert main(["schema", "report"]) == 0
    schema = json.loads(capsys.readouterr().out)
    errors = [e.message for e in Draft202012Validator(schema).iter_errors(report)]
    assert not errors
    broken = {**report, "summary": {**report["summary"], "wall_us": "long"}}
    assert not Draft202012Validator(schema).is_valid(broken)


def test_out_writes_the_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "diff.schema.json"
    assert main(["schema", "diff", "--out", str(target)]) == 0
    assert json.loads(target.read_text(encoding="utf-8")) == json_schema("diff")
    captured = capsys.readouterr()
    assert captured.out == "" and "wrote" in captured.err


def test_all_writes_every_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "schemas"
    assert main(["schema", "--all", str(folder)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.schema.json" for n in DOCUMENTS)
    for name in DOCUMENTS:
        data = json.loads((folder / f"{name}.schema.json").read_text(encoding="utf-8"))
        assert data == json_schema(name)


def test_bad_name_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "repotr"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("opscope schema: error: unknown document 'repotr'")
    for name in DOCUMENTS:
        assert name in err


@pytest.mark.parametrize(
    "args", [["--out", "x.json"], ["report", "--all", "d"], ["--all", "d", "--out", "x"]]
)
def test_inconsistent_options_are_usage_errors(
    args: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["schema", *args]) == 2
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("opscope schema: error:")
    assert not any(tmp_path.iterdir())


def test_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["schema", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "  opscope schema report" in out


def test_help_lists_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "schema" in capsys.readouterr().out
