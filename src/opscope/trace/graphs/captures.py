"""Graph captures: what a trace recorded while a CUDA/HIP graph was being captured.

A capture window runs from the end of a ``StreamBeginCapture`` call to the start of the
``StreamEndCapture`` call that follows it on the same thread (``cudaStreamBeginCapture``,
``hipStreamBeginCapture``, ``cuStreamBeginCapture``...).  Inside it nothing runs on the
device: every kernel launch, copy and set the thread issues (the **node calls**: runtime calls
whose name says ``Launch``, ``Memcpy`` or ``Memset``, not a graph launch or a host function)
becomes one node of the graph, in that order, and the framework ops around the calls are the
ops that launched them.  Those ops are the **captured ops** (:class:`CapturedOp`): the op-tree
ancestors of the node calls that lie inside the window (an annotation that encloses the whole
capture, or the step, is outside it and is not one), each with the module it ran in (the
nearest ``nn.Module: X`` Python frame, its instance number dropped, as TraceLens names it) and
its call stack (the Python frames and ops above it inside the window, outermost first).

ROCm records the kernel a launch call names (its ``kernel`` arg); CUDA does not, so a CUDA
capture is known by the kinds of its nodes only.  A capture's batch size is read from
``execution_details.json`` beside the capture files (TraceLens's mapping of files to batch
size and mode, :mod:`.sources`), else from the annotation around the capture
(``capture_32_FULL``) or the file's name (``bs_32_rank0.json.gz``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from opscope.trace.args import decode_args
from opscope.trace.graphs.records import Capture, CapturedOp
from opscope.trace.graphs.replays import NODE_ID_ARG

if TYPE_CHECKING:
    from collections.abc import Callable

    from opscope.trace.model import Trace

BEGIN_PATTERN = "streambegincapture"
END_PATTERN = "streamendcapture"
MODULE_PREFIX = "nn.Module: "
_BATCH_IN_LABEL = re.compile(r"(?:^|_)capture_(\d+)(?:_|$)|\bbs[_= ]?(\d+)\b")


def is_node_call(name: str) -> bool:
    """Whether a runtime call made inside a capture window becomes a graph node."""
    low = name.lower()
    if "graph" in low or "hostfunc" in low or "occupancy" in low:
        return False
    return "launch" in low or "memcpy" in low or "memset" in low


def node_kind(name: str) -> str:
    """The node a node call makes: ``memcpy``, ``memset`` or ``kernel``."""
    low = name.lower()
    if "memcpy" in low:
        return "memcpy"
    if "memset" in low:
        return "memset"
    return "kernel"


def module_name(frame: str) -> str:
    """``nn.Module: GraphModule_0`` -> ``nn.Module: GraphModule`` (the instance dropped)."""
    return re.sub(r"_\d+$", "", frame)


def find_captures(
    trace: Trace,
    *,
    source: str,
    in_trace: bool = False,
    batch_size: int | None = None,
) -> list[Capture]:
    """Every capture window of ``trace`` that made at least one node, in time order."""
    idx = trace.index
    rt = idx.is_runtime
    begins = np.flatnonzero(rt & idx.name.matches(BEGIN_PATTERN, ignore_case=True))
    ends = np.flatnonzero(rt & idx.name.matches(END_PATTERN, ignore_case=True))
    if not len(begins) or not len(ends):
        return []
    node = rt & idx.name.passing(is_node_call)
    thread = idx.thread
    node_rows = np.flatnonzero(node)
    node_rows = node_rows[np.lexsort((node_rows, idx.start[node_rows]))]
    node_starts = idx.start[node_rows]
    out: list[Capture] = []
    used_end: set[int] = set()
    for b in sorted(begins.tolist(), key=lambda r: (int(idx.start[r]), r)):
        later = ends[(thread[ends] == thread[b]) & (idx.start[ends] >= idx.end[b])]
        later = [e for e in later.tolist() if e not in used_end]
        if not later:
            continue
        e = min(later, key=lambda r: (int(idx.start[r]), r))
        used_end.add(e)
        lo, hi = int(idx.end[b]), int(idx.start[e])
        a = int(np.searchsorted(node_starts, lo, side="left"))
        z = int(np.searchsorted(node_starts, hi, side="right"))
        calls = node_rows[a:z]
        calls = calls[(thread[calls] == thread[b]) & (idx.end[calls] <= hi)]
        if len(calls):
            par = idx.parent[calls]
            nested = (par >= 0) & node[np.maximum(par, 0)]
            calls = calls[~nested]
        if not len(calls):
            continue
        label = _label(trace, b)
        bs = batch_size
        if bs is None and label is not None:
            bs = batch_of(label)
        if bs is None:
            bs = batch_of(source.replace("\\", "/").rsplit("/", 1)[-1])
        out.append(
            _capture(
                trace,
                calls,
                begin=b,
                end=e,
                window=(lo, hi),
                source=source,
                label=label,
                batch_size=bs,
                in_trace=in_trace,
            )
        )
    return out


def batch_of(text: str) -> int | None:
    """The batch size a capture's label or file name gives (``capture_32_FULL``,
    ``bs_32_rank0.json.gz``), None when it gives none."""
    m = _BATCH_IN_LABEL.search(text)
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


def _label(trace: Trace, begin: int) -> str | None:
    """The innermost annotation enclosing the begin call."""
    idx = trace.index
    at = int(idx.parent[begin])
    while at >= 0:
        if idx.is_framework[at] and idx.kind[at] == "annotation":
            return idx.name[at]
        at = int(idx.parent[at])
    return None


def _capture(
    trace: Trace,
    calls: np.ndarray,
    *,
    begin: int,
    end: int,
    window: tuple[int, int],
    source: str,
    label: str | None,
    batch_size: int | None,
    in_trace: bool,
) -> Capture:
    idx = trace.index
    lo, hi = window
    names = idx.name.values_at(calls)
    kinds = tuple(node_kind(n or "") for n in names)
    kernel_names: list[str | None] = []
    node_ids: list[int | None] = []
    for row, kind in zip(calls.tolist(), kinds, strict=True):
        a = decode_args(idx.args_text(row))
        k = a.get("kernel")
        kernel_names.append(str(k) if kind == "kernel" and isinstance(k, str) else None)
        n = a.get(NODE_ID_ARG)
        node_ids.append(int(n) if isinstance(n, int) and not isinstance(n, bool) else None)
    start, stop = idx.start, idx.end
    tp = idx.tree_parent
    ok = idx.in_tree & ~idx.kind.eq("step")

    def inside(row: int) -> bool:
        return bool(lo <= start[row] and stop[row] <= hi)

    # the captured ops: every op-tree ancestor of a node call inside the window
    op_of: dict[int, int] = {}
    order: list[int] = []
    launch_top: list[int] = []
    for row in calls.tolist():
        at = int(idx.op[row])
        first = -1
        while at >= 0 and ok[at] and inside(at):
            if first < 0:
                first = at
            if at in op_of:
                break
            op_of[at] = -1
            order.append(at)
            at = int(tp[at])
        launch_top.append(first)
    order.sort()
    for i, row in enumerate(order):
        op_of[row] = i
    ops = [_captured_op(trace, row, op_of, inside) for row in order]
    launch_op = np.array([op_of[r] if r >= 0 else -1 for r in launch_top], dtype=np.int64)
    return Capture(
        source=source,
        begin=begin,
        end=end,
        start_ns=lo,
        end_ns=hi,
        launches=calls,
        kinds=kinds,
        names=tuple(kernel_names),
        node_ids=tuple(node_ids),
        launch_op=launch_op,
        ops=ops,
        label=label,
        batch_size=batch_size,
        in_trace=in_trace,
        thread=int(idx.thread[begin]),
    )


def _captured_op(
    trace: Trace, row: int, op_of: dict[int, int], inside: Callable[[int], bool]
) -> CapturedOp:
    idx = trace.index
    parent = int(idx.tree_parent[row])
    frames: list[str] = []
    module = None
    at = int(idx.parent[row])
    while at >= 0 and inside(at):
        name = idx.name[at]
        frames.append(name)
        if module is None and name.startswith(MODULE_PREFIX):
            module = module_name(name)
        at = int(idx.parent[at])
    frames.reverse()
    return CapturedOp(
        row=row,
        name=idx.name[row],
        kind=idx.kind[row],
        cat=idx.cat[row] or None,
        args=idx.args_text(row),
        parent=op_of.get(parent, -1) if parent >= 0 else -1,
        module=module,
        stack=tuple(frames),
    )


__all__ = [
    "Capture",
    "CapturedOp",
    "batch_of",
    "find_captures",
    "is_node_call",
    "module_name",
    "node_kind",
]
