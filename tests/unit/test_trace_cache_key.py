"""The ingest cache's key of a large file: SHA-256 of equal ranges hashed on threads, then of
the size and the ranges' digests; every byte counts."""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import pytest

from opscope import __version__
from opscope.trace import cache
from opscope.trace.schema import EVENT_SCHEMA_VERSION


def _by_hand(path: Path, n: int) -> str:
    data = path.read_bytes()
    h = hashlib.sha256()
    h.update(
        f"opscope {__version__} schema {EVENT_SCHEMA_VERSION} {cache._reader_digest()}\n".encode()
    )
    cuts = [len(data) * i // n for i in range(n + 1)]
    h.update(f"ranges {len(data)} {n}\n".encode())
    for lo, hi in itertools.pairwise(cuts):
        h.update(hashlib.sha256(data[lo:hi]).digest())
    return h.hexdigest()


def test_a_large_file_is_hashed_in_ranges_and_every_byte_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache, "_PARALLEL_HASH_BYTES", 1 << 10)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)  # three ranges, on three threads
    monkeypatch.setattr(cache, "user_patterns", lambda: None)
    path = tmp_path / "trace.json"
    data = bytearray(os.urandom(10_000))
    path.write_bytes(data)
    key = cache.content_key(path)
    assert key == _by_hand(path, 3)
    for at in (0, 3_333, 3_334, 9_999):  # each range, and the cuts' neighbours
        changed = bytearray(data)
        changed[at] ^= 1
        path.write_bytes(changed)
        assert cache.content_key(path) != key, at
    path.write_bytes(data)
    assert cache.content_key(path) == key
