"""The first read of a trace, built from its report document alone.

* :func:`brief` says what an expert says first: what bounds the step (the critical path's
  labels with their shares of the path), how busy the device is (of the device span), the
  roofline's verdict (shares of the ops' device time compute-, memory- and overhead-bound;
  intensity against the ridge) and the top three fixes, in the report's order, with their
  savings and the exact next tool call and command for each.  Under 2k tokens on any trace.
* :func:`digest` keeps the report's own sections where they are small (``device`` without
  its peak table's source text, ``window``, ``summary``, ``source`` counts) and the head of
  the large ones: the top ops by device time (CPU time on a CPU trace), the top findings
  without their evidence, the critical path's length and what bounds it, and the job's
  communication in one row per rank.  Every figure is the report's.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

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


def digest(data: Mapping[str, Any], *, top: int = 5) -> dict[str, Any]:
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


# -- the brief ---------------------------------------------------------------------------

TOP_FIXES = 3
_TITLE = 240  # a finding's title in the brief at most (a hostile trace names ops with MBs)
_NAME = 80
# a figure in a title (12.3 ms, 52.0 %, 120): the same fix on several ranks differs in these
_FIGURE = re.compile(r"\d[\d,.]*")


def _share(part: Any, whole: Any) -> float | None:
    if part is None or not whole:
        return None
    return float(part) / float(whole)


def _cut(text: Any, limit: int) -> str:
    s = str(text)
    return s if len(s) <= limit else f"{s[:limit]}...[+{len(s) - limit} chars]"


def _bound(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """What bounds the step: the critical path's labels, largest first, with their shares of
    the path, and the path's share of the wall."""
    cp = data.get("critical_path")
    if not isinstance(cp, Mapping) or not cp.get("length_us"):
        return None
    length = float(cp["length_us"])
    labels = sorted(
        ((k, float(v)) for k, v in (cp.get("bound_by_us") or {}).items() if v and float(v) > 0),
        key=lambda kv: -kv[1],
    )
    return {
        "scope": cp.get("scope"),
        "length_us": length,
        "wall_us": cp.get("wall_us"),
        "of_wall": _share(length, cp.get("wall_us")),
        "labels": [{"label": k, "us": v, "share": v / length} for k, v in labels[:4]],
        "top": [
            {
                "label": t.get("label"),
                "name": _cut(t.get("name") or "(untraced host time)", _NAME),
                "dur_us": t.get("dur_us"),
                "pieces": t.get("pieces"),
            }
            for t in (cp.get("top") or [])[:2]
        ],
        "steps": len(cp.get("steps") or []),
    }


def _device(data: Mapping[str, Any]) -> dict[str, Any]:
    """Busy and idle time, as shares of the device span (first start to last end of device
    work), and the wall."""
    s = data.get("summary") or {}
    dev = data.get("device") or {}
    span = s.get("device_span_us")
    return {
        "kind": dev.get("kind"),
        "name": dev.get("name"),
        "is_host": bool(s.get("device_is_host")),
        "wall_us": s.get("wall_us"),
        "span_us": span,
        "busy_us": s.get("device_busy_us"),
        "idle_us": s.get("device_idle_us"),
        "busy_share": _share(s.get("device_busy_us"), span),
        "idle_share": _share(s.get("device_idle_us"), span),
        "of": "device span",
    }


def _roofline(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The roofline's verdict: the shares of the ops' device self time (over every shape
    row) that are compute-, memory- and overhead-bound or unclassified, and the costed work
    placed as one op: its intensity (all its FLOPs over all its bytes) against its ridge (the
    rate its FLOPs would run at on the peaks, over the memory bandwidth).  The intensity is
    below the ridge exactly when the work's time at the memory roof exceeds its time at the
    compute roof."""
    roof = data.get("roofline")
    if not isinstance(roof, Mapping):
        return None
    rows = list(roof.get("op_shapes") or roof.get("ops") or [])
    total = sum(float(r.get("device_self_us") or 0.0) for r in rows)
    if total <= 0:
        return None
    by: dict[str, float] = {"compute": 0.0, "memory": 0.0, "overhead": 0.0, "unclassified": 0.0}
    for r in rows:
        bound = r.get("bound")
        key = bound if bound in by else "unclassified"
        by[key] += float(r.get("device_self_us") or 0.0)
    shares = {k: v / total for k, v in by.items()}
    placed = [
        r
        for r in rows
        if r.get("flops") is not None and r.get("bytes") is not None and r.get("compute_us")
    ]
    flops = sum(float(r["flops"]) for r in placed)
    nbytes = sum(float(r["bytes"]) for r in placed)
    compute_s = sum(float(r["compute_us"]) for r in placed) / 1e6
    peaks = roof.get("peaks")
    bandwidth = float(peaks.get("bandwidth") or 0.0) if isinstance(peaks, Mapping) else 0.0
    classified = {k: v for k, v in shares.items() if k != "unclassified" and v > 0}
    verdict = max(classified, key=lambda k: classified[k]) if classified else None
    return {
        "device_us": total,
        "of": "ops' device self time",
        "shares": shares,
        "verdict": verdict,
        "intensity": flops / nbytes if flops and nbytes else None,
        "ridge": flops / compute_s / bandwidth if flops and compute_s and bandwidth else None,
        "peaks": peaks.get("name") if isinstance(peaks, Mapping) else None,
    }


def _what_if_spec(finding: Mapping[str, Any]) -> str | None:
    """The what-if of a finding's fix (``details.what_if``; its step saving is that what-if's,
    capped at its time at stake), or None: the fix is of particular events, or a name in it
    does not survive the spec's syntax (a comma splits it)."""
    from opscope.analysis.critical.section import WhatIfError, parse_what_if

    spec = (finding.get("details") or {}).get("what_if")
    if not isinstance(spec, str) or not spec:
        return None
    try:
        parse_what_if(spec)
    except WhatIfError:
        return None
    return spec


def _json_call(tool: str, **args: Any) -> str:
    parts = ", ".join(f"{k}={orjson.dumps(v).decode()}" for k, v in args.items())
    return f"{tool}({parts})"


def _fix(f: Mapping[str, Any], trace: str, handle: str | None = None) -> dict[str, Any]:
    """One fix: the finding's head and the exact next steps: ``call``, the tool call that
    gives it in full (evidence, recommendation); ``what_if``, where the fix is one a what-if
    names (a hotspot's ``OP=0``), the call that projects its step saving; ``command``, the
    command line that does the same (that what-if, else the finding in full).  ``handle``:
    the trace the calls name (None: they leave it to the default trace)."""
    on = {"trace": handle} if handle is not None else {}
    out = {k: f[k] for k in _FINDING_KEYS if k in f}
    out["title"] = _cut(f.get("title"), _TITLE)
    fid = str(f.get("id"))
    out["call"] = _json_call("finding", id=fid, **on)
    spec = _what_if_spec(f)
    if spec is not None:
        out["what_if"] = _json_call("what_if", changes=spec.split(","), **on)
        out["command"] = f"opscope report {trace} --what-if {shlex.quote(spec)}"
    else:
        out["command"] = f"opscope report {trace} --finding {fid}"
    return out


def _same_fix(f: Mapping[str, Any]) -> tuple[str, str]:
    """A job's findings of one fix on several ranks share this (their figures differ)."""
    return str(f.get("kind")), _FIGURE.sub("#", str(f.get("title", "")))


def top_fixes(findings: Sequence[Mapping[str, Any]], n: int = TOP_FIXES) -> list[Mapping[str, Any]]:
    """The first ``n`` findings in the report's order (its ranking), one per fix: the same
    finding on other ranks of a job is left out (the first rank's stands for them)."""
    out: list[Mapping[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for f in findings:
        key = _same_fix(f)
        if f.get("rank") is not None and key in seen:
            continue
        seen.add(key)
        out.append(f)
        if len(out) == n:
            break
    return out


def report_args(
    path: str,
    *,
    steps: tuple[int, int] | None = None,
    rank: int | None = None,
    peaks: object = None,
    graph_capture: object = None,
) -> str:
    """The arguments of ``opscope report`` that reopen a trace as it was opened (its window,
    its rank, its peaks file, its graph captures), quoted for a shell: what a brief's
    commands name as ``trace``, so that the finding ids and savings they print are the
    brief's."""
    out = [shlex.quote(path)]
    if steps is not None:
        out.append(f"--steps {steps[0]}" + (f":{steps[1]}" if steps[1] != steps[0] else ""))
    if rank is not None:
        out.append(f"--rank {rank}")
    if isinstance(peaks, str):
        out.append(f"--peaks {shlex.quote(peaks)}")
    if graph_capture is False:
        out.append("--no-graph-capture")
    elif isinstance(graph_capture, str | os.PathLike):
        out.append(f"--graph-capture {shlex.quote(os.fspath(graph_capture))}")
    return " ".join(out)


def brief(
    data: Mapping[str, Any], *, trace: str | None = None, handle: str | None = None
) -> dict[str, Any]:
    """What an expert says first about an ``opscope.report/1`` document (see the module
    docstring); ``trace``: the trace as the commands name it (:func:`report_args`; default:
    the report's path, quoted for a shell); ``handle``: the trace the tool calls name (None:
    the default trace)."""
    paths = list((data.get("source") or {}).get("paths") or [])
    where = trace if trace is not None else (shlex.quote(paths[0]) if len(paths) == 1 else "TRACE")
    findings = list(data.get("findings") or [])
    return {
        "bound": _bound(data),
        "device": _device(data),
        "roofline": _roofline(data),
        "fixes": [_fix(f, where, handle) for f in top_fixes(findings)],
        "findings": len(findings),
        "ranked_by": "step_savings_us (what the fix saves on the critical path), then "
        "time_at_stake_us",
    }
