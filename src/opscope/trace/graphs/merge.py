"""The merge: every replayed kernel attributed to the op that launched it during capture.

:func:`attribute` pairs each graph replay of an execution trace (:mod:`.replays`) with the
capture that made its graph (:mod:`.captures`: in capture traces given or found beside it, and
in the execution trace itself), pairs the replay's work with the capture's node calls
(:mod:`.align`), and returns a new :class:`~opscope.trace.model.Trace` whose event table is the
execution trace's with, for each paired replay:

* a **copy of every captured op** that launched one of its nodes (with the op's ancestors
  inside the capture): a framework event of the op's name, kind, category and ``args`` (its
  recorded shapes), on the thread and at the instant of the graph launch, with **no
  duration** - the host did not run it again, so every CPU figure stays what it was - its
  parent the copy of its captured parent, or, for the outermost, the graph launch's own parent;
* the replay's work's ``op_id`` set to the copy of the op that launched it.

So the op tables, kernels, roofline, findings, critical path and explorer see the captured
ops, each call once per replay (a graph replayed 10 times gives each captured op 10 calls),
without knowing about graphs.  Work whose node no capture call pairs keeps the op of the
launch (the replay's op) and is counted in ``unmatched_kernels``.

Which capture a replay ran: the one whose node sequence is the replay's (kinds, and kernel
names where the capture records them), else the one pairing most of its nodes (at least half).
Among equals: a capture recorded in the execution trace before the replay (the latest: a graph
captured again), else the capture of the batch size the replay ran at (its vLLM ``execute_N``
or SGLang ``bs=N`` annotation, rounded up to a captured size), else, in turn, the i-th replay
of an iteration's equal graphs the i-th capture (TraceLens pairs them the same way, in order).
How the work was put in order: ``graph_node_ids`` (every kernel records its node id: node
order) or ``kernel_sequence`` (start order on its streams), said in
:attr:`GraphAttribution.method`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from opscope.trace.arrays import ints
from opscope.trace.graphs import align
from opscope.trace.graphs.captures import find_captures
from opscope.trace.graphs.records import Capture, CapturedOp, GraphAttribution
from opscope.trace.graphs.replays import Replay, find_replays
from opscope.trace.graphs.sources import CaptureFile

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex
    from opscope.trace.model import Trace

#: the least share of a replay's nodes a capture must pair when no capture is its sequence
MIN_PAIRED_SHARE = 0.5
#: captures scored per replay sequence when none is its sequence (the nearest lengths)
MAX_SCORED = 16

# the batch size a replay ran at, from the annotations around it
_EXECUTE = re.compile(r"^execute_(\d+)_context_")
_EXECUTE_SPLIT = re.compile(r"^execute_context_\d+\(")
_BS = re.compile(r"\bbs=(\d+)\b")


def batch_hint(index: EventIndex, row: int) -> int | None:
    """The batch size a graph launch ran at, from the annotations around it: vLLM's
    ``execute_N_context_...`` (N tokens; ``execute_context_A(..)_generation_B(..)``: the
    numbers in parentheses summed, as TraceLens reads them) or ``bs=N`` (SGLang's
    ``step[DECODE bs=N]``)."""
    at = int(index.parent[row])
    while at >= 0:
        if index.is_framework[at] and index.kind[at] in ("annotation", "op"):
            name = index.name[at]
            m = _EXECUTE.match(name)
            if m:
                return int(m.group(1))
            if _EXECUTE_SPLIT.match(name):
                return sum(int(v) for v in re.findall(r"\((\d+)\)", name)) or None
            m = _BS.search(name)
            if m:
                return int(m.group(1))
        at = int(index.parent[at])
    return None


def _root(index: EventIndex, row: int) -> int:
    """The outermost op-tree node above a row (an iteration: a step, ``execute_...``)."""
    at, top = int(index.op[row]), -1
    tp = index.tree_parent
    while at >= 0:
        top = at
        at = int(tp[at])
    return top


def _nodes(replay: Replay) -> list[align.Node]:
    return list(zip(replay.kinds, replay.names, strict=True))


def _calls(capture: Capture) -> list[align.Node]:
    return list(zip(capture.kinds, capture.names, strict=True))


class _Chooser:
    """Which capture each replay ran (see the module docstring)."""

    def __init__(self, captures: Sequence[Capture]) -> None:
        self.captures = captures
        self.exact: dict[tuple[Any, ...], list[int]] = {}
        self.kinds: dict[tuple[str, ...], list[int]] = {}
        for i, c in enumerate(captures):
            if c.named:
                self.exact.setdefault((c.kinds, c.names), []).append(i)
            else:
                self.kinds.setdefault(c.kinds, []).append(i)
        self.best: dict[tuple[Any, ...], tuple[list[int], int]] = {}
        self.turn: dict[tuple[Any, ...], int] = {}
        self.root: dict[tuple[Any, ...], int] = {}
        self.by_graph: dict[int, int] = {}  # graph id -> the capture chosen for it

    def candidates(self, replay: Replay) -> list[int]:
        """The captures whose sequence is the replay's, else those pairing most of it."""
        key = (replay.kinds, replay.names)
        got = self.best.get(key)
        if got is None:
            got = self._score(replay)
            self.best[key] = got
        return got[0]

    def _score(self, replay: Replay) -> tuple[list[int], int]:
        n = len(replay.kinds)
        exact = [*self.exact.get((replay.kinds, replay.names), ())]
        exact += [
            i
            for i in self.kinds.get(replay.kinds, ())
            if align.positional(_nodes(replay), _calls(self.captures[i])) is not None
        ]
        if exact:
            return sorted(exact), n
        near = sorted(
            (i for i, c in enumerate(self.captures) if c.named or len(c.kinds) == n),
            key=lambda i: abs(len(self.captures[i].kinds) - n),
        )[:MAX_SCORED]
        scores: list[tuple[int, int]] = []
        streams = replay.streams.tolist()
        for i in near:
            got, _how = align.pair(_nodes(replay), _calls(self.captures[i]), streams)
            scores.append((align.matched(got), i))
        if not scores:
            return [], 0
        top = max(s for s, _ in scores)
        if top < MIN_PAIRED_SHARE * n or top == 0:
            return [], top
        return sorted(i for s, i in scores if s == top), top

    def choose(self, index: EventIndex, replay: Replay) -> int:
        cands = self.candidates(replay)
        if not cands:
            return -1
        start = int(index.start[replay.launch])
        live = [i for i in cands if self.captures[i].in_trace]
        before = [i for i in live if self.captures[i].end_ns <= start]
        if before:
            return max(before, key=lambda i: (self.captures[i].end_ns, i))
        cands = [i for i in cands if not self.captures[i].in_trace]
        if not cands:
            return -1
        if replay.graph_id is not None and self.by_graph.get(replay.graph_id) in cands:
            return self.by_graph[replay.graph_id]  # one graph, one capture
        got = self._pick(index, replay, cands)
        if replay.graph_id is not None:
            self.by_graph[replay.graph_id] = got
        return got

    def _pick(self, index: EventIndex, replay: Replay, cands: list[int]) -> int:
        hint = batch_hint(index, replay.launch)
        sized = [i for i in cands if self.captures[i].batch_size is not None]
        if hint is not None and sized:
            fit = [i for i in sized if int(self.captures[i].batch_size or 0) >= hint]
            if fit:
                size = min(int(self.captures[i].batch_size or 0) for i in fit)
                cands = [i for i in fit if self.captures[i].batch_size == size]
        if len(cands) == 1:
            return cands[0]
        # equal graphs of one iteration: the i-th replay the i-th capture
        key = tuple(cands)
        root = _root(index, replay.launch)
        if self.root.get(key) != root:
            self.root[key] = root
            self.turn[key] = 0
        k = self.turn[key]
        self.turn[key] = k + 1
        return cands[k % len(cands)]


def _read_captures(files: Sequence[CaptureFile], *, cache: bool) -> list[Capture]:
    from opscope.trace.ingest import load

    out: list[Capture] = []
    for f in files:
        t = load(f.path, cache=cache)
        out += find_captures(t, source=str(f.path), batch_size=f.batch_size)
    return out


def needed_files(
    index: EventIndex, replays: Sequence[Replay], files: Sequence[CaptureFile]
) -> list[CaptureFile]:
    """The capture files the replays can have run, by batch size: when every file has one
    (``execution_details.json``) and every replay says its own, the smallest captured size at
    least the replay's for each; else every file."""
    sizes = sorted({f.batch_size for f in files if f.batch_size is not None})
    if not replays or len(sizes) < 2 or any(f.batch_size is None for f in files):
        return list(files)
    want: set[int] = set()
    for r in replays:
        hint = batch_hint(index, r.launch)
        fit = [s for s in sizes if hint is not None and s >= hint]
        if not fit:
            return list(files)
        want.add(fit[0])
    return [f for f in files if f.batch_size in want]


def attribute(
    trace: Trace,
    files: Sequence[CaptureFile] = (),
    *,
    in_trace: bool = True,
    cache: bool = True,
    captures: Sequence[Capture] | None = None,
) -> Trace:
    """``trace`` with its graph replays' work attributed to the captured ops (the module
    docstring); the trace itself when it has no replay or no capture to read.  ``files``:
    capture traces to read (only those of the batch sizes the replays ran at, when
    ``execution_details.json`` gives the sizes: :func:`needed_files`; all of them when a
    replay finds no capture there); ``in_trace``: also use captures recorded in ``trace``;
    ``captures``: captures already read (instead of ``files``)."""
    index = trace.index
    replays = find_replays(index)
    own: list[Capture] = []
    if in_trace:
        own = find_captures(trace, source=", ".join(trace.meta.paths), in_trace=True)
    names = [str(f.path) for f in files]
    if own:
        names += [c.source for c in own[:1]]
    if captures is not None:
        got = list(captures)
    else:
        first = needed_files(index, replays, files)
        got = _read_captures(first, cache=cache)
        if len(first) < len(files):
            probe = _Chooser([*got, *own])
            if any(probe.choose(index, r) < 0 for r in replays):
                rest = [f for f in files if f not in first]
                got += _read_captures(rest, cache=cache)
    everything = [*got, *own]
    if not everything or not replays:
        if not files:
            return trace
        note = "no graph launch in the trace" if not replays else "no capture window found"
        info = GraphAttribution(
            files=names,
            method="kernel_sequence",
            matched_kernels=0,
            unmatched_kernels=sum(len(r.work) for r in replays),
            replays=len(replays),
            matched_replays=0,
            captures=len(everything),
            notes=[note],
        )
        out = _same(trace, trace.events)
        out.graph_capture = info
        return out
    chooser = _Chooser(everything)
    chosen = [chooser.choose(index, r) for r in replays]
    return _merged(trace, replays, everything, chosen, names)


def _same(trace: Trace, events: pa.Table) -> Trace:
    from opscope.trace.model import Trace as TraceType

    out = TraceType(events, replace(trace.meta))
    out.neuron = trace.neuron
    return out


@dataclass(frozen=True)
class _Plan:
    """What one (capture, pairing) adds to a replay: the captured ops to copy (indices among
    the capture's ops, in order), each one's parent among them (-1: the launch's parent), and
    for each replay node the position of its op's copy (-1: none)."""

    ops: np.ndarray
    parent: np.ndarray
    node_copy: np.ndarray


def _plan(cap: Capture, local: np.ndarray) -> _Plan:
    needed: set[int] = set()
    for a in set(local[local >= 0].tolist()):
        needed.update(cap.chain(a))
    order = sorted(needed)
    at = {op: i for i, op in enumerate(order)}
    parent = [at[cap.ops[op].parent] if cap.ops[op].parent >= 0 else -1 for op in order]
    node_copy = np.array([at[a] if a >= 0 else -1 for a in local.tolist()], dtype=np.int64)
    return _Plan(
        ops=np.asarray(order, dtype=np.int64),
        parent=np.asarray(parent, dtype=np.int64),
        node_copy=node_copy,
    )


def _merged(
    trace: Trace,
    replays: list[Replay],
    captures: list[Capture],
    chosen: list[int],
    files: list[str],
) -> Trace:
    index = trace.index
    base_of: list[int] = []
    ops: list[CapturedOp] = []
    for c in captures:
        base_of.append(len(ops))
        ops.extend(c.ops)
    op_col = ints(trace.events.column("op_id")).copy()
    ids = index.ids
    first_id = int(ids.max()) + 1 if len(ids) else 0
    parts_launch: list[np.ndarray] = []
    parts_op: list[np.ndarray] = []
    parts_parent: list[np.ndarray] = []
    work_rows: list[np.ndarray] = []
    work_copy: list[np.ndarray] = []
    matched = unmatched = without_op = 0
    by_method = {"graph_node_ids": 0, "kernel_sequence": 0}
    pairings: dict[str, int] = {}
    plans: dict[tuple[int, bytes], _Plan] = {}
    pairs: dict[tuple[int, tuple[str, ...], tuple[Any, ...], bytes], tuple[list[int], str]] = {}
    copies = 0
    for replay, ci in zip(replays, chosen, strict=True):
        if ci < 0:
            unmatched += len(replay.work)
            continue
        cap = captures[ci]
        pkey = (ci, replay.kinds, replay.names, replay.streams.tobytes())
        got = pairs.get(pkey)
        if got is None:
            got = pairs[pkey] = align.pair(_nodes(replay), _calls(cap), replay.streams.tolist())
        pairing, how = got
        pairings[how] = pairings.get(how, 0) + 1
        pos = np.asarray(pairing, dtype=np.int64)
        ok = pos >= 0
        n_ok = int(ok.sum())
        matched += n_ok
        unmatched += len(pos) - n_ok
        by_method["graph_node_ids" if replay.node_ids is not None else "kernel_sequence"] += n_ok
        local = np.where(ok, cap.launch_op[np.maximum(pos, 0)], -1)
        without_op += int((ok & (local < 0)).sum())
        key = (ci, local.tobytes())
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = _plan(cap, local)
        k = len(plan.ops)
        if not k:
            continue
        parts_launch.append(np.full(k, replay.launch, dtype=np.int64))
        parts_op.append(plan.ops + base_of[ci])
        parts_parent.append(np.where(plan.parent >= 0, plan.parent + copies, -1))
        has = plan.node_copy >= 0
        work_rows.append(replay.work[has])
        work_copy.append(plan.node_copy[has] + copies)
        copies += k
    method = max(by_method, key=lambda m: (by_method[m], m == "kernel_sequence"))
    info = GraphAttribution(
        files=files,
        method=method,
        matched_kernels=matched,
        unmatched_kernels=unmatched,
        replays=len(replays),
        matched_replays=sum(1 for c in chosen if c >= 0),
        captures=len(captures),
        ops=ops,
        replay_capture=list(chosen),
        capture_list=list(captures),
        pairings=pairings,
        kernels_without_op=without_op,
    )
    if unmatched:
        info.notes.append(
            f"{unmatched} replayed device executions are not paired with a captured launch: "
            "they stay on the op of their graph launch"
        )
    empty = np.zeros(0, dtype=np.int64)
    launch = np.concatenate(parts_launch) if parts_launch else empty
    copy_op = np.concatenate(parts_op) if parts_op else empty
    copy_parent = np.concatenate(parts_parent) if parts_parent else empty
    n, m = index.n, copies
    new_ids = first_id + np.arange(m, dtype=np.int64)
    info.copy_rows = np.arange(n, n + m, dtype=np.int64)
    info.copy_op = copy_op
    if work_rows:
        op_col[np.concatenate(work_rows)] = new_ids[np.concatenate(work_copy)]
    events = _with_copies(
        trace,
        launch=launch,
        ops=ops,
        copy_op=copy_op,
        new_ids=new_ids,
        parent=copy_parent,
        op_col=op_col,
    )
    out = _same(trace, events)
    out.graph_capture = info
    return out


def _one(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A column as one array (a dictionary column's chunks on one dictionary)."""
    if isinstance(col, pa.ChunkedArray):
        if pa.types.is_dictionary(col.type) and col.num_chunks > 1:
            col = col.unify_dictionaries()
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def _appended(
    col: pa.ChunkedArray | pa.Array, values: Sequence[str | None], which: np.ndarray
) -> pa.Array:
    """A string or dictionary column with ``values[which]`` appended: a dictionary column keeps
    its type, the values that are new joining its dictionary."""
    arr = _one(col)
    if not pa.types.is_dictionary(arr.type):
        return pa.concat_arrays([arr, pa.array(list(values), arr.type).take(pa.array(which))])
    entries = arr.dictionary.to_pylist()
    at = {v: i for i, v in enumerate(entries)}
    code = np.empty(len(values) + 1, dtype=np.int64)
    for i, v in enumerate(values):
        if v is None:
            code[i] = -1
            continue
        j = at.get(v)
        if j is None:
            j = at[v] = len(entries)
            entries.append(v)
        code[i] = j
    picked = code[which] if len(which) else np.zeros(0, dtype=np.int64)
    tail = pa.array(picked, arr.type.index_type, mask=picked < 0)
    indices = pa.concat_arrays([arr.indices, tail])
    return pa.DictionaryArray.from_arrays(indices, pa.array(entries, arr.type.value_type))


def _repeated(col: pa.ChunkedArray | pa.Array, rows: np.ndarray) -> pa.Array:
    """A column with its own ``rows`` appended (a dictionary column by its indices)."""
    arr = _one(col)
    if pa.types.is_dictionary(arr.type):
        tail = arr.indices.take(pa.array(rows, pa.int64()))
        return pa.DictionaryArray.from_arrays(pa.concat_arrays([arr.indices, tail]), arr.dictionary)
    return pa.concat_arrays([arr, arr.take(pa.array(rows, pa.int64()))])


def _with_copies(
    trace: Trace,
    *,
    launch: np.ndarray,
    ops: list[CapturedOp],
    copy_op: np.ndarray,
    new_ids: np.ndarray,
    parent: np.ndarray,
    op_col: np.ndarray,
) -> pa.Table:
    ev = trace.events
    m = len(copy_op)
    n = ev.num_rows
    parent_id = ints(ev.column("parent_id"))
    launch_parent = parent_id[launch] if m else np.zeros(0, dtype=np.int64)
    copy_parent = np.where(parent >= 0, new_ids[np.maximum(parent, 0)], launch_parent)
    new: dict[str, pa.Array] = {}
    for f in ev.schema:
        name = f.name
        col = ev.column(name)
        if name == "id":
            arr = pa.concat_arrays([_one(col), pa.array(new_ids, f.type)])
        elif name in ("rank", "start_ns", "step", "pid", "tid", "lane"):
            arr = _repeated(col, launch)
        elif name == "dur_ns":
            arr = pa.concat_arrays([_one(col), pa.array(np.zeros(m, np.int64), f.type)])
        elif name == "source":
            arr = _appended(col, ["framework"], np.zeros(m, dtype=np.int64))
        elif name in ("kind", "cat", "name", "args"):
            arr = _appended(col, [getattr(o, name) for o in ops], copy_op)
        elif name == "parent_id":
            arr = _nullable(np.concatenate([parent_id, copy_parent]), f.type)
        elif name == "op_id":
            arr = _nullable(np.concatenate([op_col, new_ids]), f.type)
        else:  # correlation, external_id, launch_id: none for a copy
            arr = pa.concat_arrays([_one(col), pa.nulls(m, f.type)])
        new[name] = arr
    assert all(len(a) == n + m for a in new.values())
    return pa.Table.from_arrays(list(new.values()), schema=ev.schema)


def _nullable(values: np.ndarray, typ: pa.DataType) -> pa.Array:
    mask = values < 0
    return pa.array(values, typ, mask=mask if mask.any() else None)


def with_captures(
    trace: Trace,
    trace_path: str | Path | None,
    graph_capture: str | Path | bool | None = None,
    *,
    cache: bool = True,
) -> Trace:
    """``trace`` attributed as ``graph_capture`` asks: a capture trace or folder (a path),
    ``False`` for none, ``None`` (the default) for the ``capture_traces/`` folder beside
    ``trace_path`` when there is one and the captures recorded in the trace itself.  A trace of
    several ranks is attributed only when asked, and then refused (one rank at a time)."""
    from opscope.errors import UsageError
    from opscope.trace.graphs.sources import capture_paths, default_capture_folder

    if graph_capture is False:
        return trace
    if len(set(trace.meta.ranks)) > 1:
        if graph_capture is None or graph_capture is True:
            return trace
        raise UsageError(
            f"--graph-capture {graph_capture}: the trace holds {len(set(trace.meta.ranks))} "
            "ranks; attribute one rank at a time (--rank N)"
        )
    if graph_capture is None or graph_capture is True:
        folder = default_capture_folder(trace_path) if trace_path is not None else None
        files = capture_paths(folder) if folder is not None else []
    else:
        files = capture_paths(graph_capture)
    # a capture trace reported itself (its own folder is the one beside it): its captures
    # are read from the trace, once
    own = {Path(p).resolve() for p in trace.meta.paths}
    files = [f for f in files if f.path.resolve() not in own]
    if not files and not find_replays(trace.index):
        return trace
    return attribute(trace, files, cache=cache)


__all__ = ["GraphAttribution", "attribute", "batch_hint", "needed_files", "with_captures"]
