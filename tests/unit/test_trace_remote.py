"""Rank files by URL (trace.remote): listed and fetched through fsspec (its in-memory
filesystem here), the job's format told by the registry from the names, and refused with a
hint where no cluster reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.errors import TraceError
from opscope.trace import load
from opscope.trace.remote import Downloads, is_url, remote_files, url_format

fsspec = pytest.importorskip("fsspec")


@pytest.fixture()
def store() -> str:
    fs = fsspec.filesystem("memory")
    root = "/job-" + str(id(fs))[-6:]
    for r in range(3):
        doc = {"traceEvents": [{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": r, "dur": 1}]}
        fs.pipe(f"{root}/rank{r}.json", json.dumps(doc).encode())
    fs.pipe(f"{root}/run.json", b"{}")
    fs.pipe(f"{root}/notes.txt", b"not a trace")
    return f"memory://{root}"


def test_is_url() -> None:
    assert is_url("s3://bucket/job/") and is_url("file:///tmp/x.json")
    assert not is_url("/tmp/x.json") and not is_url("tcp://127.0.0.1:8786")
    assert not is_url("ranks/*.json")


def test_a_folder_a_glob_a_file_and_a_list(store: str) -> None:
    names = [f"{store}/rank{r}.json" for r in range(3)]
    assert remote_files(store) == names  # run.json and notes.txt are not traces
    assert remote_files(store + "/rank[01].json") == names[:2]
    assert remote_files(names[2]) == [names[2]]
    assert remote_files([names[1], store]) == [names[1], names[0], names[2]]
    with pytest.raises(TraceError, match="no such file or folder"):
        remote_files(store + "/missing/")
    with pytest.raises(TraceError, match="no trace files match"):
        remote_files(store + "/*.parquet")


def test_a_copy_is_fetched_once_and_loads(store: str) -> None:
    url = f"{store}/rank1.json"
    with Downloads() as downloads:
        first = downloads.fetch(url)
        assert first.name == "rank1.json" and downloads.fetch(url) == first
        assert len(load(first, cache=False)) == 1
        assert downloads.local_path("/tmp/x.json") == Path("/tmp/x.json")
        with pytest.raises(TraceError, match="cannot be read"):
            downloads.fetch(f"{store}/nothing.json")
    assert not first.exists()  # the owner's copies go when it closes


def test_two_owners_keep_their_own_copies(store: str) -> None:
    """The copies are the owner's (a worker's plugin, a coordinator's job), not the
    process's: closing one leaves the other's."""
    url = f"{store}/rank0.json"
    with Downloads() as a, Downloads() as b:
        mine, theirs = a.fetch(url), b.fetch(url)
        assert mine != theirs
        a.close()
        assert not mine.exists() and theirs.exists()
        assert a.fetch(url).exists()  # fetched again after a close


def test_loading_a_url_here_says_how(store: str) -> None:
    with pytest.raises(TraceError, match="--cluster local"):
        load(store)


def test_a_file_over_the_bound_is_not_fetched(store: str, monkeypatch: Any) -> None:
    with Downloads() as downloads, pytest.raises(TraceError, match="not fetched"):
        downloads.fetch(f"{store}/rank2.json", max_bytes=10)
    monkeypatch.setenv("OPSCOPE_MAX_TRACE_BYTES", "10")
    with Downloads() as downloads, pytest.raises(TraceError, match="not fetched"):
        downloads.fetch(f"{store}/rank2.json")


def test_an_event_store_by_url_is_listed_through_the_registry(tmp_path: Path) -> None:
    """A store's ``rank<N>.parquet`` files by URL: listed (a folder, a glob), told to be an
    event store by their names, and each fetched copy read by that format's reader."""
    import pyarrow.parquet as pq

    from opscope.trace import formats
    from opscope.trace.formats import event_store
    from opscope.trace.schema import EVENT_SCHEMA

    fs = fsspec.filesystem("memory")
    root = "/store-" + str(id(tmp_path))[-6:]
    local = tmp_path / "rank0.parquet"
    pq.write_table(EVENT_SCHEMA.empty_table(), local)
    for r in (0, 1, 10):
        fs.pipe(f"{root}/rank{r}.parquet", local.read_bytes())
    fs.pipe(f"{root}/notes.txt", b"not a trace")
    url = f"memory://{root}"
    names = [f"{url}/rank{r}.parquet" for r in (0, 1, 10)]
    assert remote_files(url) == names
    assert remote_files(url + "/rank1*.parquet") == names[1:]
    assert url_format(names) is formats.get(event_store.NAME)
    with Downloads() as downloads:
        part = event_store.read_part(downloads.fetch(names[1]))
    assert part.meta["format"] == "event_store" and part.table.num_rows == 0
    fs.pipe(f"{root}/rank2.json", b"{}")
    with pytest.raises(TraceError, match="files of 2 formats"):
        url_format(remote_files(url))


def test_a_neuron_profile_by_url_is_refused_by_name() -> None:
    fs = fsspec.filesystem("memory")
    root = "/neuron-" + str(id(fs))[-6:]
    fs.pipe(f"{root}/SystemProfileEvents.parquet", b"")
    fs.pipe(f"{root}/Instruction_0.parquet", b"")
    with pytest.raises(TraceError, match="a neuron profile, read whole"):
        remote_files(f"memory://{root}")
    with pytest.raises(TraceError, match="a neuron profile, read whole"):
        remote_files(f"memory://{root}/*.parquet")
