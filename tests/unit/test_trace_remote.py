"""Rank files by URL (trace.remote): listed and fetched through fsspec (its in-memory
filesystem here), and refused with a hint where no cluster reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opscope.errors import TraceError
from opscope.trace import load
from opscope.trace.remote import is_url, local_copy, local_path, remote_files

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
    first = local_copy(url)
    assert first.name == "rank1.json" and local_copy(url) == first
    assert len(load(first, cache=False)) == 1
    assert local_path("/tmp/x.json") == Path("/tmp/x.json")
    with pytest.raises(TraceError, match="cannot be read"):
        local_copy(f"{store}/nothing.json")


def test_loading_a_url_here_says_how(store: str) -> None:
    with pytest.raises(TraceError, match="--cluster local"):
        load(store)


def test_a_file_over_the_bound_is_not_fetched(store: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("OPSCOPE_MAX_TRACE_BYTES", "10")
    with pytest.raises(TraceError, match="not fetched"):
        local_copy(f"{store}/rank2.json")
