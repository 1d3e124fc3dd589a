"""The first read of a trace: a compact digest of its report (for an agent's first call, a
status line), built from the report document alone.

:func:`brief` keeps the report's own sections where they are small (``device`` without its
peak table's source text, ``window``, ``summary``, ``source`` counts) and the head of the
large ones: the top ops by device time (CPU time on a CPU trace), the top findings without
their evidence, the critical path's length and what bounds it, and the job's communication
in one row per rank.  Every figure is the report's; nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_FINDING_KEYS = (
    "id",
    "kind",
    "severity",
    "title",
    "time_at_stake_us",
    "step_savings_us",
    "share",
    "rank",
)
_OP_KEYS = (
    "name",
    "calls",
    "cpu_self_us",
    "cpu_total_us",
    "device_self_us",
    "device_total_us",
    "device_share",
)


def finding_head(finding: Mapping[str, Any]) -> dict[str, Any]:
    """A finding without its evidence, details and recommendation (what a list shows)."""
    return {k: finding[k] for k in _FINDING_KEYS if k in finding}


def brief(data: Mapping[str, Any], *, top: int = 5) -> dict[str, Any]:
    """The digest of an ``opscope.report/1`` document (see the module docstring)."""
    summary = dict(data.get("summary") or {})
    device = {k: v for k, v in (data.get("device") or {}).items() if k != "peaks"}
    peaks = (data.get("device") or {}).get("peaks")
    if isinstance(peaks, Mapping):
        device["peaks_key"] = peaks.get("key")
    source = data.get("source") or {}
    ops = list(data.get("ops") or [])
    on_host = bool(summary.get("device_is_host"))
    key = "device_self_us" if not on_host else "cpu_self_us"
    ops.sort(key=lambda r: -float(r.get(key) or 0.0))
    out: dict[str, Any] = {
        "device": device,
        "source": {
            "format": source.get("format"),
            "events": source.get("events"),
            "ranks": source.get("ranks"),
            "warnings": len(source.get("warnings") or []),
        },
        "window": data.get("window"),
        "summary": summary,
        "steps": len(data.get("steps") or []),
        "top_ops_by": key,
        "top_ops": [{k: r.get(k) for k in _OP_KEYS} for r in ops[:top]],
        "findings": len(data.get("findings") or []),
        "top_findings": [finding_head(f) for f in (data.get("findings") or [])[:top]],
    }
    cp = data.get("critical_path")
    if isinstance(cp, Mapping):
        bound = {k: v for k, v in (cp.get("bound_by_us") or {}).items() if v}
        out["critical_path"] = {
            "scope": cp.get("scope"),
            "length_us": cp.get("length_us"),
            "wall_us": cp.get("wall_us"),
            "bound_by_us": dict(sorted(bound.items(), key=lambda kv: -float(kv[1]))),
        }
    dist = data.get("distributed")
    if isinstance(dist, Mapping):
        out["distributed"] = {
            "world_size": dist.get("world_size"),
            "ranks": dist.get("ranks"),
            "missing_ranks": dist.get("missing_ranks"),
            "per_rank": dist.get("per_rank"),
            "stragglers": dist.get("stragglers"),
        }
    return out
