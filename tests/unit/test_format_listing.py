"""A job's input through the format registry (trace.formats.listing): a folder, a glob, a list
of an event store's rank files as well as Kineto's, each format's name one spelling (registry,
module, the loaded trace's ``meta.format``), and the pieces of a format read whole (Neuron)
refused with what to pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import opscope
from opscope.analysis.cluster import write_events
from opscope.analysis.rank_split import rank_traces
from opscope.errors import TraceError
from opscope.trace import formats, load
from opscope.trace.formats import event_store, kineto
from opscope.trace.formats.listing import is_pattern, job_files, load_job
from trace_checks import mm_step_doc

NEURON = Path(__file__).resolve().parents[2].parent / "shared" / "neuron_fixtures" / "builtin"


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def ranks(tmp_path: Path) -> Path:
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank, ops in ((0, 3), (1, 5), (2, 4)):
        (folder / f"rank{rank}.json").write_text(json.dumps(mm_step_doc(rank, ops, 3)))
    return folder


@pytest.fixture
def store(ranks: Path, tmp_path: Path) -> Path:
    """The ranks' event tables as ``--store`` writes them (the job's ids)."""
    out = tmp_path / "store"
    for t in rank_traces(load(ranks, cache=False)):
        write_events(t.events, out, int(t.meta.ranks[0]))
    (out / "notes.txt").write_text("not a table")
    return out


def test_every_name_is_the_modules_and_the_loaded_traces() -> None:
    for fmt in formats.FORMATS:
        module = fmt.load.__module__
        assert module == f"opscope.trace.formats.{fmt.name}", fmt.name
        assert formats.get(fmt.name) is fmt
    assert [f.name for f in formats.FORMATS if f.by_rank is not None] == ["event_store", "kineto"]


def test_an_event_store_by_folder_glob_and_list(store: Path) -> None:
    whole = load(store)
    assert whole.meta.format == event_store.NAME and whole.meta.ranks == [0, 1, 2]
    job = job_files(store)
    assert job.format.name == "event_store" and job.folder == store
    assert [p.name for p in job.files] == ["rank0.parquet", "rank1.parquet", "rank2.parquet"]
    pattern = str(store / "rank[02].parquet")
    assert is_pattern(pattern)
    some = load(pattern)  # a glob of a store's files: the registry, not Kineto JSON
    assert some.meta.format == "event_store" and some.meta.ranks == [0, 2]
    listed = load_job(job_files([store / "rank2.parquet", store / "rank0.parquet"]))
    assert listed.meta.ranks == [0, 2] and len(listed) == len(some)
    assert job_files(str(store / "*")).format.name == "event_store"  # notes.txt left out


def test_a_glob_of_a_store_reports_as_its_folder(store: Path) -> None:
    a = opscope.analyze(store).to_dict()
    b = opscope.analyze(str(store / "rank*.parquet")).to_dict()
    assert a["source"].pop("paths") == b["source"].pop("paths")
    assert a == b


def test_files_of_two_formats_are_not_one_job(store: Path, ranks: Path) -> None:
    with pytest.raises(TraceError, match=r"files of 2 formats.*event_store.*kineto"):
        job_files([store, ranks])
    (store / "rank7.json").write_text(json.dumps(mm_step_doc(7, 1, 3)))
    with pytest.raises(TraceError, match="files of 2 formats"):
        job_files(str(store / "rank*"))


def test_a_kineto_glob_is_read_as_before(ranks: Path) -> None:
    job = job_files(str(ranks / "rank*.json"))
    assert job.format.name == kineto.NAME and job.folder is None
    assert load_job(job).meta.ranks == [0, 1, 2]


@pytest.mark.skipif(not NEURON.is_dir(), reason="../shared/neuron_fixtures not present")
def test_a_neuron_profiles_pieces_are_refused_with_its_folder() -> None:
    tables = NEURON / "explorer" / "rmsnorm_builtin@latest"
    assert job_files(NEURON).format.name == "neuron"
    assert load(NEURON).meta.format == "neuron"
    with pytest.raises(TraceError, match="a neuron profile, read whole from its folder"):
        load(str(tables / "*.parquet"))
    with pytest.raises(TraceError, match="a neuron profile, read whole"):
        job_files([NEURON, NEURON / "explorer"])


def test_a_refused_file_in_a_list_of_ranks_is_left_out_named(ranks: Path) -> None:
    """As in a glob: an execution trace among rank files is Kineto's reader's to refuse, and
    the job goes on without it."""
    et = ranks / "rank9.json"
    et.write_text(json.dumps({"schema": "1.0.1", "pid": 7, "nodes": [{"name": "a", "id": 1}]}))
    files = [ranks / "rank0.json", et]
    assert job_files(files).format.name == "kineto"
    trace = load_job(job_files(files))
    assert trace.meta.ranks == [0] and "execution trace" in trace.meta.unreadable[0]["reason"]
    assert load(str(ranks / "rank*.json")).meta.ranks == [0, 1, 2]
