"""Compile time, measured apart from the profiled steps.

Contract: ``with watch_compile() as rec: f(x)`` fills the :class:`CompileRecord` ``rec`` on exit
with what Dynamo did inside the block: wall seconds, compile ids, frames compiled, recompile
reasons, graph breaks (count and reasons), failures and per-phase compile seconds.  It diffs
Dynamo's process-wide bookkeeping before and after the block:

- ``torch._dynamo.utils.counters`` (``frames``, ``stats.unique_graphs``, ``graph_break``),
- ``torch._dynamo.utils.compilation_time_metrics`` (seconds per compile phase),
- ``torch._dynamo.utils.get_compilation_metrics()`` (one record per compiled frame, with
  ``compile_id``, ``recompile_reason``, ``fail_reason``, ``graph_op_count``, …).

These are private APIs that change between torch versions, so each is feature-detected and
read inside ``try``; ``CompileRecord.sources`` names what was available and ``errors`` what
failed.  Nothing here imports torch: if Dynamo was never imported, nothing was compiled.

The point (docs/capture.md): the first call of a compiled function compiles, often for seconds.
Run the warm-up calls inside ``watch_compile()`` *before* the profiled steps and hand the record
to ``ProfileSession.record_compile`` so it lands in ``run.json``; the measured window then
holds steady-state work only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_DYNAMO_UTILS = "torch._dynamo.utils"
_REASON_CHARS = 2000  # graph-break reasons carry multi-paragraph hints; keep run.json readable

# Per-frame fields copied from CompilationMetrics when present (they vary by torch version).
_FRAME_FIELDS = (
    "compile_id",
    "co_name",
    "co_filename",
    "co_firstlineno",
    "graph_op_count",
    "graph_node_count",
    "graph_input_count",
    "guard_count",
    "entire_frame_compile_time_s",
    "backend_compile_time_s",
    "inductor_compile_time_s",
    "code_gen_time_s",
    "duration_us",
    "fail_type",
    "fail_reason",
    "recompile_reason",
    "restart_reasons",
    "num_graph_breaks",
    "cache_size",
)


@dataclass
class CompileRecord:
    """What Dynamo compiled during one ``watch_compile()`` block."""

    label: str | None = None
    wall_s: float = 0.0
    compile_ids: list[str] = field(default_factory=list)
    frames_compiled: int = 0  # Dynamo frames compiled successfully (counters frames.ok)
    frames_seen: int = 0  # frames Dynamo looked at (counters frames.total)
    unique_graphs: int = 0
    recompile_reasons: list[str] = field(default_factory=list)
    graph_breaks: int = 0
    graph_break_reasons: dict[str, int] = field(default_factory=dict)
    fail_reasons: list[str] = field(default_factory=list)
    phase_s: dict[str, float] = field(default_factory=dict)  # compilation_time_metrics delta
    frames: list[dict[str, Any]] = field(default_factory=list)  # per compiled frame
    sources: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def recompiles(self) -> int:
        return len(self.recompile_reasons)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "wall_s": round(self.wall_s, 6),
            "compile_ids": self.compile_ids,
            "frames_compiled": self.frames_compiled,
            "frames_seen": self.frames_seen,
            "unique_graphs": self.unique_graphs,
            "recompiles": self.recompiles,
            "recompile_reasons": self.recompile_reasons,
            "graph_breaks": self.graph_breaks,
            "graph_break_reasons": self.graph_break_reasons,
            "fail_reasons": self.fail_reasons,
            "phase_s": {k: round(v, 6) for k, v in self.phase_s.items()},
            "frames": self.frames,
            "sources": self.sources,
            "errors": self.errors,
        }


@dataclass
class _Snapshot:
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    phase_counts: dict[str, int] = field(default_factory=dict)
    metrics: list[Any] = field(default_factory=list)  # kept alive so id() stays unique


@contextmanager
def watch_compile(label: str | None = None) -> Iterator[CompileRecord]:
    """Measure the compile work done inside the block; see the module docstring."""
    record = CompileRecord(label=label)
    before = _snapshot(record.errors)
    start = time.perf_counter()
    try:
        yield record
    finally:
        record.wall_s = time.perf_counter() - start
        _fill(record, before, _snapshot(record.errors))


def frames_compiled_so_far() -> int | None:
    """Dynamo's process-wide count of frames compiled (0 if Dynamo was never imported; None
    where its counters cannot be read, so that a caller never concludes that nothing was
    compiled from a counter it could not see).

    Cheap (a dict lookup): the session reads it around each step to notice compilation inside
    the measured window.
    """
    utils = sys.modules.get(_DYNAMO_UTILS)
    if utils is None:
        return 0
    try:
        return int(utils.counters["frames"]["ok"])
    except (AttributeError, KeyError, TypeError, ValueError):  # a Dynamo without the counter
        return None


def _snapshot(errors: list[str]) -> _Snapshot:
    snap = _Snapshot()
    utils = sys.modules.get(_DYNAMO_UTILS)
    if utils is None:  # Dynamo never imported: nothing compiled yet
        return snap
    try:
        snap.counters = {
            str(k): {str(n): int(v) for n, v in c.items()} for k, c in utils.counters.items()
        }
    except Exception as exc:
        errors.append(f"counters: {type(exc).__name__}: {exc}")
    try:
        snap.phase_counts = {str(k): len(v) for k, v in utils.compilation_time_metrics.items()}
    except Exception as exc:
        errors.append(f"compilation_time_metrics: {type(exc).__name__}: {exc}")
    getter = getattr(utils, "get_compilation_metrics", None)
    if getter is not None:
        try:
            snap.metrics = list(getter())
        except Exception as exc:
            errors.append(f"get_compilation_metrics: {type(exc).__name__}: {exc}")
    return snap


def _fill(record: CompileRecord, before: _Snapshot, after: _Snapshot) -> None:
    utils = sys.modules.get(_DYNAMO_UTILS)
    if utils is None:
        return
    if hasattr(utils, "counters"):
        record.sources.append("counters")

        def delta(group: str, key: str) -> int:
            return after.counters.get(group, {}).get(key, 0) - before.counters.get(group, {}).get(
                key, 0
            )

        record.frames_compiled = delta("frames", "ok")
        record.frames_seen = delta("frames", "total")
        record.unique_graphs = delta("stats", "unique_graphs")
        for reason, count in after.counters.get("graph_break", {}).items():
            new = count - before.counters.get("graph_break", {}).get(reason, 0)
            if new > 0:
                record.graph_break_reasons[_short(reason)] = new
                record.graph_breaks += new
    if hasattr(utils, "compilation_time_metrics"):
        record.sources.append("compilation_time_metrics")
        try:
            for phase, values in utils.compilation_time_metrics.items():
                fresh = list(values)[before.phase_counts.get(str(phase), 0) :]
                if fresh:
                    record.phase_s[str(phase)] = float(sum(fresh))
        except Exception as exc:
            record.errors.append(f"compilation_time_metrics: {type(exc).__name__}: {exc}")
    if hasattr(utils, "get_compilation_metrics"):
        record.sources.append("compilation_metrics")
        seen = {id(m) for m in before.metrics}
        for m in after.metrics:
            if id(m) in seen:
                continue
            frame = {k: _jsonable(getattr(m, k)) for k in _FRAME_FIELDS if hasattr(m, k)}
            record.frames.append(frame)
            cid = frame.get("compile_id")
            if cid is not None:
                record.compile_ids.append(str(cid))
            recompile = frame.get("recompile_reason")
            if recompile:
                record.recompile_reasons.append(_short(str(recompile)))
            fail = frame.get("fail_reason")
            if fail:
                record.fail_reasons.append(_short(str(fail)))


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _short(value)
    if isinstance(value, (set, frozenset)):  # sorted, so run.json is stable
        return sorted((_jsonable(v) for v in value), key=str)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)
