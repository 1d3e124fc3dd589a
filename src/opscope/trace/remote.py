"""Rank files given by URL (``s3://bucket/job/``, ``gs://...``, ``file:///...``): listed and
fetched through fsspec, where a cluster's workers can reach them.

fsspec comes with Dask (the ``opscope[cluster]`` extra); an object store needs its own fsspec
package too (``s3fs``, ``gcsfs``, ``adlfs``).  :func:`remote_files` lists what a URL stands
for on the coordinator (a file, a folder of rank files, a glob): the names the formats whose
traces come one file per rank claim (:mod:`opscope.trace.formats.listing`; the job's format
is told from them, :func:`url_format`).  A :class:`Downloads` fetches each file once into
a temporary folder of its own, removed when it is closed, so that every round a worker runs
on that rank reads it from its disk; its owner (a cluster worker's plugin, a job's
coordinator) says how long it lives.  Only the ingest reads the copy: the report names the URL.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from opscope.errors import TraceError
from opscope.trace.formats import Format
from opscope.trace.formats.listing import GLOB_CHARS, by_rank_formats, claimant, one_format
from opscope.trace.readers import max_decompressed_bytes

_LOCAL_SCHEMES = ("tcp", "tls")  # scheduler addresses, never files


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


def _name(path: str) -> str:
    return str(path).rstrip("/").rsplit("/", 1)[-1]


def _claimed(name: str) -> bool:
    return any(f.claims(name) for f in by_rank_formats())


def remote_files(source: str | Sequence[str]) -> list[str]:
    """The rank files' URLs that ``source`` (a URL of a file, a folder or a glob, or a list of
    those) stands for, in name order: the names a format claims (:func:`_claimed`)."""
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
            listed = sorted(fs.glob(path))
            found = [p for p in listed if _claimed(_name(p))]
            if not found:
                _refuse_whole(source, listed)
                raise TraceError(f"{source}: no trace files match this pattern")
        elif fs.isdir(path):
            where = path.rstrip("/") + "/traces" if fs.isdir(path.rstrip("/") + "/traces") else path
            listed = sorted(str(p) for p in fs.ls(where, detail=False))
            found = [p for p in listed if _claimed(_name(p))]
            if not found:
                _refuse_whole(source, listed)
                raise TraceError(
                    f"{source}: no trace files (*.json, *.json.gz, rank<N>.parquet) in this folder"
                )
        elif fs.isfile(path):
            found = [path]
        else:
            raise TraceError(f"{source}: no such file or folder")
    except OSError as exc:
        raise TraceError(f"{source}: cannot be listed ({exc})") from None
    return [str(fs.unstrip_protocol(p)) for p in found]


def _refuse_whole(source: str, listed: list[str]) -> None:
    """Refuse a listing of a format read whole (a Neuron profile's tables)."""
    for p in listed:
        fmt = claimant(_name(p))
        if fmt is not None and fmt.by_rank is None:
            raise TraceError(
                f"{source}: a {fmt.name} profile, read whole from its folder, not file by file "
                "on a cluster's workers: copy it here and run without --cluster"
            )


def url_format(urls: Sequence[str]) -> Format:
    """The format of a job's rank files by URL, told from their names (the first by-rank
    format that claims each; Kineto JSON for a name none claims); files of several formats
    are a :class:`TraceError`."""
    fallback = by_rank_formats()[-1]

    def of(url: str) -> Format:
        fmt = claimant(_name(url))
        return fmt if fmt is not None and fmt.by_rank is not None else fallback

    return one_format(((_name(u), of(u)) for u in urls), urls[0] if urls else "the URLs")


class Downloads:
    """Files fetched from URLs onto this machine's disk, each once (then reused), into a
    temporary folder of this object's; :meth:`close` (or leaving a ``with`` block) removes it."""

    def __init__(self) -> None:
        self._copies: dict[str, Path] = {}
        self._folder: Path | None = None

    def __enter__(self) -> Downloads:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Remove the copies (a later fetch makes a new folder)."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
        self._folder = None
        self._copies.clear()

    def fetch(self, url: str, max_bytes: int | None = None) -> Path:
        """The file at ``url`` on this machine's disk (fetched once, then reused); a file over
        ``max_bytes`` (default :func:`~opscope.trace.readers.max_decompressed_bytes`) is not
        fetched."""
        got = self._copies.get(url)
        if got is not None and got.exists():
            return got
        fs, path = _filesystem(url)
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="opscope-remote-"))
        name = _name(path) or "trace.json"
        digest = hashlib.sha1(url.encode()).hexdigest()[:16]
        dest = self._folder / digest / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        _copy(fs, path, url, dest, max_decompressed_bytes(max_bytes))
        self._copies[url] = dest
        return dest

    def local_path(self, path: str, max_bytes: int | None = None) -> Path:
        """``path`` as a file on this machine: a URL's local copy, else the path itself."""
        return self.fetch(path, max_bytes) if is_url(path) else Path(path)


def _copy(fs: Any, path: str, url: str, dest: Path, cap: int) -> None:
    """``path`` of ``fs`` copied to ``dest`` through a temporary name, refused past ``cap``
    bytes (a file is never larger than what it may decompress to)."""
    tmp = dest.with_name(f".{dest.name}.part")
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


__all__ = ["Downloads", "is_url", "remote_files", "url_format"]
