"""Are these files ranks of one job?  Their ``distributedInfo`` must agree.

Files of one job agree on what every rank records of the job: the world size, the backend and
its version (``nccl_version``), and, for a process group that two files both name, its size;
no two name the same rank.  :func:`job_groups` puts the files into groups whose metadata
agree (a file without ``distributedInfo`` joins none: nothing says whose it is), and
:func:`mixed_jobs` gives the one-line error when there is more than one.  The time windows
are the analysis's to check (:func:`opscope.analysis.job_files.unrelated_files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opscope.errors import UsageError


class MixedJobsError(UsageError):
    """Files of different jobs given as one (the CLI exits 2)."""


def _info(meta: dict[str, Any]) -> dict[str, Any] | None:
    info = meta.get("distributed_info")
    return info if isinstance(info, dict) else None


def _key(info: dict[str, Any]) -> tuple[Any, ...]:
    return (info.get("world_size"), info.get("backend"), info.get("nccl_version"))


def _groups_of(info: dict[str, Any]) -> dict[str, Any]:
    """``{process group name: its size}`` of the file's ``pg_config``."""
    pgs = info.get("pg_config")
    if not isinstance(pgs, list):
        return {}
    return {
        str(p.get("pg_name")): p.get("pg_size")
        for p in pgs
        if isinstance(p, dict) and p.get("pg_name") is not None
    }


def _agrees(group: list[dict[str, Any]], info: dict[str, Any]) -> bool:
    first = group[0]
    if _key(first) != _key(info):
        return False
    rank = info.get("rank")
    if rank is not None and any(g.get("rank") == rank for g in group):
        return False
    mine = _groups_of(info)
    for g in group:
        theirs = _groups_of(g)
        if any(theirs[k] != v for k, v in mine.items() if k in theirs):
            return False
    return True


def job_groups(metas: Sequence[dict[str, Any]]) -> list[list[int]]:
    """The positions of the files (``metas``: each one's ``FilePart.meta``) per job, in the
    order first met; files without ``distributedInfo`` are in no group."""
    groups: list[list[int]] = []
    infos: list[list[dict[str, Any]]] = []
    for i, meta in enumerate(metas):
        info = _info(meta)
        if info is None:
            continue
        for members, got in zip(groups, infos, strict=True):
            if _agrees(got, info):
                members.append(i)
                got.append(info)
                break
        else:
            groups.append([i])
            infos.append([info])
    return groups


def _describe(info: dict[str, Any]) -> str:
    parts = [f"world size {info.get('world_size')}"]
    if info.get("backend"):
        parts.append(
            str(info["backend"]) + (f" {info['nccl_version']}" if info.get("nccl_version") else "")
        )
    return ", ".join(parts)


def mixed_jobs(files: Sequence[Path], metas: Sequence[dict[str, Any]]) -> str | None:
    """Why ``files`` are not ranks of one job (see the module docstring), or None."""
    groups = job_groups(metas)
    if len(groups) < 2:
        return None
    shown = []
    for members in groups[:4]:
        info = _info(metas[members[0]]) or {}
        names = ", ".join(Path(files[i]).name for i in members[:2])
        more = f" +{len(members) - 2}" if len(members) > 2 else ""
        shown.append(f"{names}{more} ({_describe(info)}, rank {info.get('rank')})")
    rest = f"; and {len(groups) - 4} more" if len(groups) > 4 else ""
    return (
        f"{len(files)} files from {len(groups)} different jobs: {'; '.join(shown)}{rest}; their "
        "distributedInfo disagree (world size, backend, process groups, or a rank twice), so "
        "nothing is merged: report each job on its own (opscope report FILE_OR_FOLDER)"
    )


__all__ = ["MixedJobsError", "job_groups", "mixed_jobs"]
