"""Rank files given by URL (``s3://bucket/job/``, ``gs://...``, ``file:///...``): listed and
fetched through fsspec, where a cluster's workers can reach them.

fsspec comes with Dask (the ``opscope[cluster]`` extra); an object store needs its own fsspec
package too (``s3fs``, ``gcsfs``, ``adlfs``).  :func:`remote_files` lists what a URL stands
for on the coordinator (a file, a folder of rank files, a glob); :func:`local_copy` fetches
one file into the process's own temporary folder once, so that every round a worker runs on
that rank reads it from its disk.  Only the ingest reads the copy: the report names the URL.
"""

from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opscope.errors import TraceError
from opscope.trace.formats.kineto_json import GLOB_CHARS, is_trace_name
from opscope.trace.readers import max_decompressed_bytes

_LOCAL_SCHEMES = ("tcp", "tls")  # scheduler addresses, never files
_copies: dict[str, Path] = {}
_folder: list[Path] = []  # this process's folder of copies, made on first use


def is_url(text: str | Path) -> bool:
    """``scheme://...`` that is no path on this machine (a scheduler address is not)."""
    s = str(text)
    scheme, sep, _rest = s.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme not in _LOCAL_SCHEMES


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError:
        raise TraceError(
            "rank files by URL need fsspec: pip install 'opscope[cluster]' (and the store's "
            "own fsspec package: s3fs, gcsfs, adlfs)"
        ) from None
    return fsspec


def _filesystem(url: str) -> tuple[Any, str]:
    fsspec = _fsspec()
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise TraceError(f"{url}: cannot be read ({exc})") from None
    return fs, path


def remote_files(source: str | Sequence[str]) -> list[str]:
    """The rank files' URLs that ``source`` (a URL of a file, a folder or a glob, or a list of
    those) stands for, in name order."""
    if not isinstance(source, str):
        out: list[str] = []
        for item in source:
            out += [u for u in remote_files(str(item)) if u not in out]
        if not out:
            raise TraceError("no trace files given")
        return out
    fs, path = _filesystem(source)
    try:
        if any(c in path for c in GLOB_CHARS):
            found = sorted(p for p in fs.glob(path) if is_trace_name(p.rsplit("/", 1)[-1]))
            if not found:
                raise TraceError(f"{source}: no trace files match this pattern")
        elif fs.isdir(path):
            where = path.rstrip("/") + "/traces" if fs.isdir(path.rstrip("/") + "/traces") else path
            found = sorted(
                p for p in fs.ls(where, detail=False) if is_trace_name(str(p).rsplit("/", 1)[-1])
            )
            if not found:
                raise TraceError(f"{source}: no trace files (*.json, *.json.gz) in this folder")
        elif fs.isfile(path):
            found = [path]
        else:
            raise TraceError(f"{source}: no such file or folder")
    except OSError as exc:
        raise TraceError(f"{source}: cannot be listed ({exc})") from None
    return [str(fs.unstrip_protocol(p)) for p in found]


def local_copy(url: str) -> Path:
    """The file at ``url`` on this machine's disk (fetched once per process, then reused)."""
    if url in _copies and _copies[url].exists():
        return _copies[url]
    fs, path = _filesystem(url)
    if not _folder:
        _folder.append(Path(tempfile.mkdtemp(prefix="opscope-remote-")))
        atexit.register(shutil.rmtree, _folder[0], True)
    name = path.rstrip("/").rsplit("/", 1)[-1] or "trace.json"
    digest = hashlib.sha1(url.encode()).hexdigest()[:16]
    dest = _folder[0] / digest / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{name}.part")
    cap = max_decompressed_bytes()  # a file is never larger than what it may decompress to
    try:
        with fs.open(path, "rb") as src, tmp.open("wb") as out:
            copied = 0
            while chunk := src.read(1 << 20):
                copied += len(chunk)
                if copied > cap:
                    raise TraceError(
                        f"{url}: over {cap / 2**30:g} GiB, not fetched "
                        "(OPSCOPE_MAX_TRACE_BYTES sets the bound)"
                    )
                out.write(chunk)
    except TraceError:
        tmp.unlink(missing_ok=True)
        raise
    except (OSError, ValueError) as exc:
        tmp.unlink(missing_ok=True)
        raise TraceError(f"{url}: cannot be read ({exc})") from None
    tmp.replace(dest)
    _copies[url] = dest
    return dest


def local_path(path: str) -> Path:
    """``path`` as a file on this machine: a URL's local copy, else the path itself."""
    return local_copy(path) if is_url(path) else Path(path)


__all__ = ["is_url", "local_copy", "local_path", "remote_files"]
