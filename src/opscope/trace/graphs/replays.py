"""Graph replays: each CUDA/HIP graph launch of a trace and the device work it ran.

A graph launch (``cudaGraphLaunch``, ``hipGraphLaunch``, ``cuGraphLaunch``) is one runtime call
on the host and every node of the graph on the device: each kernel, copy and set it ran
carries the launch's correlation (or ends one of its ``ac2g`` flows), so the trace engine links
them all to the one call (``launch_id``, :mod:`opscope.trace.link`).

The order of a replay's work is the graph's **node order** where the device events record it:
CUPTI gives every kernel of a graph launch its ``graph id`` and ``graph node id`` (Kineto
writes them as args), node ids are handed out as the nodes are created, so they are the order
in which the capture launched them whatever the streams and the device's scheduling did.
Traces that do not record them (ROCm today, older CUDA) are ordered by start time (then
stream): the kernel sequence, which the capture follows on one stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex

#: runtime calls that launch a whole graph (matched case-insensitively on the call's name)
GRAPH_LAUNCH_PATTERN = "graphlaunch"
#: the args Kineto writes on a graph's device work (CUPTI's graphId / graphNodeId)
GRAPH_ID_ARG = "graph id"
NODE_ID_ARG = "graph node id"


@dataclass(frozen=True)
class Replay:
    """One graph launch: the call, the op it belongs to and the device work it ran."""

    launch: int
    """Row of the graph launch call."""
    op: int
    """Row of the op the call belongs to (its innermost op or annotation), -1 when none."""
    work: np.ndarray
    """Rows of the device work it ran, in node order."""
    names: tuple[str, ...]
    """The work's names, in that order."""
    kinds: tuple[str, ...]
    """``kernel``, ``memcpy`` or ``memset`` per work row (collectives count as kernels)."""
    streams: np.ndarray
    """The device lane (a code) of each work row."""
    graph_id: int | None
    """The ``graph id`` its work records (one per captured graph), None where absent."""
    node_ids: np.ndarray | None
    """The ``graph node id`` of each work row when every row records one."""

    @property
    def ordered_by(self) -> str:
        """``graph_node_ids`` when the work is in node-id order, else ``start``."""
        return "graph_node_ids" if self.node_ids is not None else "start"

    def key(self) -> tuple[object, ...]:
        """What tells one graph from another: its ``graph id``, else its work's sequence."""
        if self.graph_id is not None:
            return ("id", self.graph_id)
        return ("seq", self.kinds, self.names)


def work_kind(kind: str) -> str:
    """The node kind of a device event's kind: ``memcpy``, ``memset``, else ``kernel``."""
    return kind if kind in ("memcpy", "memset") else "kernel"


def graph_launch_rows(index: EventIndex) -> np.ndarray:
    """Rows of the runtime calls that launch a graph."""
    hit = index.is_runtime & index.name.matches(GRAPH_LAUNCH_PATTERN, ignore_case=True)
    return np.flatnonzero(hit)


def _int_arg(args: pa.Array, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The integer ``key`` of each args text (compact JSON, as the event table keeps it) and
    whether it was there."""
    if len(args) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    pattern = '"' + key + r'"\s*:\s*(?P<v>-?\d+)'
    got = pc.extract_regex(args.fill_null(""), pattern)
    values = got.field("v")
    ok = np.asarray(got.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    out = np.zeros(len(args), dtype=np.int64)
    if ok.any():
        out[ok] = np.asarray(
            pc.cast(values.filter(pa.array(ok)), pa.int64()).to_numpy(zero_copy_only=False)
        )
    return out, ok


def find_replays(index: EventIndex) -> list[Replay]:
    """Every graph launch of the trace that ran device work, in the order of the calls."""
    launches = graph_launch_rows(index)
    if not len(launches):
        return []
    is_launch = np.zeros(index.n, dtype=bool)
    is_launch[launches] = True
    launch = index.launch
    work = np.flatnonzero(index.is_work & (launch >= 0))
    work = work[is_launch[launch[work]]]
    if not len(work):
        return []
    stream = index.lane.codes[work].astype(np.int64)
    order = np.lexsort((work, stream, index.start[work], launch[work]))
    work, stream = work[order], stream[order]
    args = index.args_take(work)
    has_any = bool(pc.any(pc.match_substring(args.fill_null(""), NODE_ID_ARG)).as_py())
    if has_any:
        node, node_ok = _int_arg(args, NODE_ID_ARG)
        gid, gid_ok = _int_arg(args, GRAPH_ID_ARG)
    else:
        node = gid = np.zeros(len(work), dtype=np.int64)
        node_ok = gid_ok = np.zeros(len(work), dtype=bool)
    names = index.name.values_at(work)
    kinds = [work_kind(k or "") for k in index.kind.values_at(work)]
    bounds = np.flatnonzero(np.diff(launch[work])) + 1
    out: list[Replay] = []
    for lo, hi in zip(
        np.concatenate(([0], bounds)).tolist(),
        np.concatenate((bounds, [len(work)])).tolist(),
        strict=True,
    ):
        part = np.arange(lo, hi)
        node_ids = None
        if node_ok[part].all():
            part = part[np.argsort(node[part], kind="stable")]
            node_ids = node[part]
        ids = np.unique(gid[part][gid_ok[part]])
        g = int(launch[work[lo]])
        out.append(
            Replay(
                launch=g,
                op=int(index.op[g]),
                work=work[part],
                names=tuple(str(names[i] or "") for i in part.tolist()),
                kinds=tuple(kinds[i] for i in part.tolist()),
                streams=stream[part],
                graph_id=int(ids[0]) if len(ids) == 1 and gid_ok[part].all() else None,
                node_ids=node_ids,
            )
        )
    out.sort(key=lambda r: (int(index.start[r.launch]), r.launch))
    return out


def replay_bounds(index: EventIndex, replay: Replay) -> tuple[int, int]:
    """First start and last end of a replay's device work, ns."""
    return int(index.start[replay.work].min()), int(index.end[replay.work].max())


__all__ = [
    "GRAPH_LAUNCH_PATTERN",
    "Replay",
    "find_replays",
    "graph_launch_rows",
    "replay_bounds",
    "work_kind",
]
