"""Golden reports: the ``opscope.report/1`` document of every shared trace, frozen.

The golden files under ``tests/golden/`` were written by ``python tests/golden_reports.py
--write`` before the analysis was reworked; ``tests/integration/test_golden_reports.py``
checks that every trace still gives the same document.  What is compared:

* every key and value, except event ids (``IGNORED_KEYS``): ids are positions in the event
  table, which the trace engine is free to renumber;
* integers and strings exactly; floats to a relative 1e-9 (a vectorised sum may add the same
  numbers in another order; nothing a reader sees moves);
* source paths relative to ``../shared`` (so the check runs from any checkout);
* top-level sections added since (``NEW_SECTIONS``), and keys added to the summary since
  (``NEW_SUMMARY_KEYS``), are not in the goldens and not compared.

An execution trace with a ``capture_traces/`` folder beside it (CUDA/HIP graph replays and the
trace recorded while the graphs were captured) has two cases: the trace as read
(``analysis.pipeline.analyze``: each graph a unit of the kernel table) and ``<path>+graph_capture``,
the report ``opscope report`` gives by default, with the capture merged
(:func:`opscope.trace.graphs.with_captures`).

Rows an op table ranks equal (``TIED_ROWS``: the same name and times, other shapes) are
compared in one canonical order: their order was Arrow's hash grouper's when the goldens were
written, and is the order of each shape's first event since the group-by moved to NumPy
(``opscope.trace.groupby``; a unit test holds that order).

CPU peaks are measured on the machine at hand; the goldens fix them through a ``cpu`` peaks
entry (``CPU_PEAKS``) so that CPU roofline figures do not depend on the machine.
"""

from __future__ import annotations

import gzip
import math
import sys
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
GOLDEN = ROOT / "tests" / "golden"

# event ids: positions in the event table, not results
IGNORED_KEYS = frozenset({"event_ids", "event_id", "first_event_id", "ids"})
# top-level sections the rework added on purpose (nothing the goldens hold may change)
NEW_SECTIONS = frozenset({"neuron", "distributed", "critical_path"})
# finding rules added since: their findings are left out (the others renumbered) before comparing
NEW_FINDING_KINDS = frozenset(
    {"comm_exposed", "comm_bandwidth", "graph_host_gaps", "graph_input_copies", "graph_recapture"}
)
# keys added since to each finding (the critical path's bound on what its fix saves)
NEW_FINDING_KEYS = frozenset({"step_savings_us"})
SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2, "info": 3}
# keys added since to the ``summary`` sections (communication overlap)
NEW_SUMMARY_KEYS = frozenset({"exposed_comm_us", "overlap_share", "compute_work_us"})

CPU_PEAKS: dict[str, Any] = {
    "devices": {
        "cpu": {
            "name": "golden CPU",
            "tflops": {"fp32": 1.0, "fp64": 0.5, "bf16": 1.0, "fp16": 1.0, "vector": 0.25},
            "bandwidth_gbs": 20.0,
            "source": "fixed for the golden reports",
        }
    }
}


def trace_files() -> list[str]:
    """Every shared trace file, as a path relative to ``../shared/traces`` (none where absent)."""
    traces = SHARED / "traces"
    if not traces.is_dir():
        return []
    return sorted(
        str(p.relative_to(traces))
        for p in traces.rglob("*")
        if p.is_file() and p.name.endswith((".json", ".json.gz"))
    )


def cases() -> list[str]:
    """Every shared trace file and each Neuron fixture (one capture folder), as paths relative
    to ``../shared``.  Folders of several traces are left out on purpose: their report changes
    by design when a folder becomes a job of per-rank reports."""
    if not SHARED.is_dir():
        return []
    files = [SHARED / "traces" / rel for rel in trace_files()]
    out = [str(p.relative_to(SHARED)) for p in files]
    out += [str(p.relative_to(SHARED)) + CAPTURED for p in files if _capture_beside(p)]
    fixtures = SHARED / "neuron_fixtures"
    if fixtures.is_dir():
        out += sorted(
            str(p.relative_to(SHARED))
            for p in fixtures.iterdir()
            if (p / "expected.json").is_file()
        )
    return out


CAPTURED = "+graph_capture"  # a case: the trace with the capture beside it merged


def _capture_beside(path: Path) -> bool:
    """Whether ``path`` is an execution trace with a capture folder beside it (not a capture
    trace in that folder)."""
    from opscope.trace.graphs.sources import default_capture_folder

    folder = default_capture_folder(path)
    return folder is not None and folder != path.parent


def golden_path(rel: str) -> Path:
    return GOLDEN / (rel.replace("/", "__") + ".report.json.gz")


def _relative(p: str) -> str:
    try:
        return str(Path(p).resolve().relative_to(SHARED.resolve()))
    except ValueError:
        return p


def canonical(data: dict[str, Any]) -> dict[str, Any]:
    """The report as compared: JSON types only, source paths relative to ``../shared``."""
    doc: dict[str, Any] = orjson.loads(orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY))
    src = doc.get("source", {})
    src["paths"] = [_relative(p) for p in src.get("paths", [])]
    if isinstance(src.get("graph_capture"), dict):  # the capture files read
        cap = src["graph_capture"]
        cap["files"] = [_relative(p) for p in cap.get("files", [])]
    for rank in doc.get("ranks") or []:  # a job's per-rank summaries name their files too
        if isinstance(rank, dict) and "paths" in rank:
            rank["paths"] = [_relative(p) for p in rank["paths"]]
    return doc


def report_of(rel: str, *, pack_args: bool = False) -> dict[str, Any] | None:
    """The canonical report of one case, or None for a trace opscope refuses (with reason);
    ``pack_args``: with the trace's ``args`` packed for the analysis, as ``opscope report``
    has it."""
    from opscope.analysis.pipeline import analyze
    from opscope.errors import TraceError

    try:
        if rel.endswith(CAPTURED):
            from opscope.trace import load
            from opscope.trace.graphs import with_captures

            path = SHARED / rel.removesuffix(CAPTURED)
            report = analyze(with_captures(load(path), path), peaks=CPU_PEAKS, pack_args=pack_args)
        else:
            report = analyze(SHARED / rel, peaks=CPU_PEAKS, pack_args=pack_args)
    except TraceError as exc:
        text = str(exc)
        for prefix in {str(SHARED.resolve()), str(SHARED), str(SHARED.absolute())}:
            text = text.replace(prefix, "<shared>")
        return {"refused": text}
    return canonical(report.to_dict())


def without_new_findings(doc: Any) -> Any:
    """``doc`` without the findings of ``NEW_FINDING_KINDS``, the others without the keys added
    since (``NEW_FINDING_KEYS``), put in the goldens' order (by time at stake: findings are now
    ranked by the step time they save on the critical path) and renumbered F1, F2..."""
    if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
        return doc
    kept = [
        {k: v for k, v in f.items() if k not in NEW_FINDING_KEYS}
        for f in doc["findings"]
        if f.get("kind") not in NEW_FINDING_KINDS
    ]
    kept.sort(
        key=lambda f: (
            -float(f.get("time_at_stake_us") or 0.0),
            SEVERITY_ORDER.get(str(f.get("severity")), 9),
            str(f.get("title", "")),
        )
    )
    for i, f in enumerate(kept, 1):
        if "id" in f:
            f["id"] = f"F{i}"
    return {**doc, "findings": kept}


# lists of rows whose order among equals is not compared: path -> the keys a row is ranked on
TIED_ROWS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("op_shapes",): ("device_self_us", "cpu_total_us", "name"),
    ("roofline", "op_shapes"): ("device_self_us", "name"),
}


def ties_in_one_order(doc: Any) -> Any:
    """``doc`` with each run of consecutive ``TIED_ROWS`` rows equal on their rank keys put in
    one order (by their JSON text), so that only their order among themselves is ignored."""
    if not isinstance(doc, dict):
        return doc
    out = dict(doc)
    for path, rank_keys in TIED_ROWS.items():
        holder: Any = out
        for part in path[:-1]:
            if not isinstance(holder.get(part), dict):
                holder = None
                break
            holder[part] = dict(holder[part])
            holder = holder[part]
        rows = holder.get(path[-1]) if isinstance(holder, dict) else None
        if not isinstance(rows, list):
            continue
        ordered: list[Any] = []
        run: list[Any] = []
        for row in [*rows, None]:
            if run and (row is None or _rank(row, rank_keys) != _rank(run[0], rank_keys)):
                ordered += sorted(run, key=lambda r: orjson.dumps(r, option=orjson.OPT_SORT_KEYS))
                run = []
            if row is not None:
                run.append(row)
        holder[path[-1]] = ordered
    return out


def _rank(row: Any, keys: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(row.get(k) for k in keys) if isinstance(row, dict) else (id(row),)


def differences(want: Any, got: Any, where: str = "$", out: list[str] | None = None) -> list[str]:
    """Where two documents differ (ignoring ``IGNORED_KEYS``), first 50 places."""
    out = [] if out is None else out
    if len(out) >= 50:
        return out
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if k in IGNORED_KEYS or (where == "$" and k in NEW_SECTIONS and k not in want):
                continue
            if where.endswith(".summary") and k in NEW_SUMMARY_KEYS and k not in want:
                continue
            if k not in got:
                out.append(f"{where}.{k}: missing")
            elif k not in want:
                out.append(f"{where}.{k}: new key")
            else:
                differences(want[k], got[k], f"{where}.{k}", out)
    elif isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            out.append(f"{where}: {len(want)} items, now {len(got)}")
        for i, (a, b) in enumerate(zip(want, got, strict=False)):
            differences(a, b, f"{where}[{i}]", out)
    elif isinstance(want, float) or isinstance(got, float):
        if not (isinstance(want, (int, float)) and isinstance(got, (int, float))) or not (
            math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-9)
        ):
            out.append(f"{where}: {want!r} -> {got!r}")
    elif want != got or type(want) is not type(got):
        out.append(f"{where}: {want!r} -> {got!r}")
    return out


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print("usage: python tests/golden_reports.py --write", file=sys.stderr)
        return 2
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for rel in cases():
        doc = report_of(rel)
        golden_path(rel).write_bytes(
            gzip.compress(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS), mtime=0)
        )
        print("wrote", golden_path(rel).name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
