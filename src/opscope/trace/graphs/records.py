"""The records of the graph merge, with no dependency on the trace model: a captured op, a
capture window, and what the merge did (:class:`GraphAttribution`, kept on the merged trace
as ``Trace.graph_capture``).  See :mod:`opscope.trace.graphs`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CapturedOp:
    """An op that ran inside a capture window and launched (in its subtree) graph nodes."""

    row: int
    """Its row in the capture trace."""
    name: str
    kind: str
    """``op`` or ``annotation``."""
    cat: str | None
    args: str | None
    """Its ``args`` text, as recorded (the shapes)."""
    parent: int
    """Index of its parent among the capture's ops, -1 for a root."""
    module: str | None
    """The nearest ``nn.Module: X`` frame around it (instance number dropped)."""
    stack: tuple[str, ...]
    """The frames and ops above it inside the window, outermost first."""


@dataclass
class Capture:
    """One capture window and the graph nodes it made, in order."""

    source: str
    """The file it was read from."""
    begin: int
    end: int
    """Rows of the begin and end calls."""
    start_ns: int
    end_ns: int
    """The window: end of the begin call to start of the end call."""
    launches: np.ndarray
    """Rows of the node calls, in node order."""
    kinds: tuple[str, ...]
    names: tuple[str | None, ...]
    """The kernel each call names (None: not recorded, a copy or a set)."""
    node_ids: tuple[int | None, ...]
    launch_op: np.ndarray
    """Index in :attr:`ops` of the innermost captured op of each node call, -1 for none."""
    ops: list[CapturedOp]
    label: str | None = None
    """The annotation around the capture (``capture_32_FULL``), when there is one."""
    batch_size: int | None = None
    in_trace: bool = False
    """Recorded in the execution trace itself (a graph captured, or captured again, while
    it was profiled)."""
    thread: int = -1
    _chains: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)

    @property
    def named(self) -> bool:
        """Whether the kernel launches name their kernels (ROCm)."""
        return any(n is not None for n in self.names)

    def chain(self, op: int) -> tuple[int, ...]:
        """``op`` and its ancestors among the captured ops, innermost first."""
        got = self._chains.get(op)
        if got is None:
            out: list[int] = []
            at = op
            while at >= 0:
                out.append(at)
                at = self.ops[at].parent
            got = self._chains[op] = tuple(out)
        return got


@dataclass
class GraphAttribution:
    """What the merge did (``source.graph_capture`` of the report)."""

    files: list[str]
    method: str
    """``graph_node_ids`` or ``kernel_sequence``: how the replays' work was ordered (the one
    that ordered most of the paired work when both did)."""
    matched_kernels: int
    unmatched_kernels: int
    replays: int
    matched_replays: int
    captures: int
    """Capture windows read."""
    ops: list[CapturedOp] = field(default_factory=list)
    """The captured ops of every capture read (copies point at them)."""
    copy_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Rows of the copies in the merged event table."""
    copy_op: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Index in :attr:`ops` of each copy's captured op."""
    replay_capture: list[int] = field(default_factory=list)
    """Per replay (in launch order): the capture it was paired with, -1 for none."""
    capture_list: list[Capture] = field(default_factory=list, repr=False)
    pairings: dict[str, int] = field(default_factory=dict)
    """How the work was paired: positional, streams, by_name, forward_scan -> replays."""
    kernels_without_op: int = 0
    """Paired work whose capture call ran outside any captured op."""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "files": list(self.files),
            "method": self.method,
            "matched_kernels": self.matched_kernels,
            "unmatched_kernels": self.unmatched_kernels,
            "replays": self.replays,
            "matched_replays": self.matched_replays,
            "captures": self.captures,
            "pairings": dict(self.pairings),
            "kernels_without_op": self.kernels_without_op,
        }
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def op_of_rows(self, rows: np.ndarray) -> np.ndarray:
        """The captured op (index in :attr:`ops`) of each of ``rows`` of the merged table, -1
        for a row that is no copy."""
        out = np.full(len(rows), -1, dtype=np.int64)
        if not len(self.copy_rows):
            return out
        pos = np.searchsorted(self.copy_rows, rows)
        pos = np.minimum(pos, len(self.copy_rows) - 1)
        hit = self.copy_rows[pos] == rows
        out[hit] = self.copy_op[pos[hit]]
        return out


__all__ = ["Capture", "CapturedOp", "GraphAttribution"]
