"""Communication on one rank: how much there is, and how much of it compute hides.

Definitions (per rank, over the analysed window):

* **comm** - the union of the communication intervals.  On a device trace: device events of
  kind ``comm`` (collective and point-to-point kernels, classed at ingest by their names).  On
  a CPU trace (gloo and other CPU backends): the backend's own work, the ``gloo:*``
  annotations it records on its threads (:data:`HOST_COMM_WORK`).
* **compute** - the union of the compute intervals.  On a device trace: device kernels and
  Neuron executions that are not communication (copies and sets are neither).  On a CPU trace:
  the computing leaf ops (not bookkeeping, not views or allocation, not communication ops such
  as ``c10d::allreduce_``: :data:`HOST_COMM_OPS`) on every thread but the backend's.
* **overlap** = |comm intersected with compute| = |comm| + |compute| - |comm united with compute|;
  ``overlap_share`` = overlap / comm; ``exposed_comm`` = comm - overlap: communication that no
  compute hides, the time a perfect overlap could win.  Both are None without communication.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from opscope.analysis.intervals import overlap_ns, union_ns
from opscope.analysis.optable import BOOKKEEPING_NAMES, NO_COMPUTE_OPS
from opscope.trace.arrays import member

if TYPE_CHECKING:
    from opscope.trace.arrays import Codes
    from opscope.trace.index import EventIndex

# The work a CPU communication backend records on its own threads
HOST_COMM_WORK = ("gloo:",)
# Host-side ops that issue or wait for communication: not compute
HOST_COMM_OPS = ("c10d::", "c10d_functional::", "record_param_comms", "nccl:", "gloo:")


@dataclass(frozen=True)
class CommFigures:
    """Union lengths in ns: communication, compute, and their intersection."""

    comm_ns: int
    compute_ns: int
    overlap_ns: int

    @property
    def exposed_ns(self) -> int:
        return max(0, self.comm_ns - self.overlap_ns)

    @property
    def overlap_share(self) -> float | None:
        return self.overlap_ns / self.comm_ns if self.comm_ns > 0 else None


def figures(
    comm_start: np.ndarray, comm_end: np.ndarray, comp_start: np.ndarray, comp_end: np.ndarray
) -> CommFigures:
    """The :class:`CommFigures` of communication and compute intervals."""
    return CommFigures(
        comm_ns=union_ns(comm_start, comm_end),
        compute_ns=union_ns(comp_start, comp_end),
        overlap_ns=overlap_ns(comm_start, comm_end, comp_start, comp_end),
    )


def _prefixed(codes: Codes, prefixes: tuple[str, ...]) -> np.ndarray:
    """Rows whose string starts with one of ``prefixes``."""
    hit = np.fromiter(
        (str(v).startswith(prefixes) for v in codes.values), dtype=bool, count=len(codes.values)
    )
    return codes.rows(hit)


def host_comm_rows(index: EventIndex, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of ``rows`` (positions in the index) of a CPU trace: those of the backend's
    communication work (:data:`HOST_COMM_WORK`), and those of the computing leaf ops on the
    other threads (not bookkeeping, views or allocation, not :data:`HOST_COMM_OPS`)."""
    name = index.name
    framework = index.is_framework[rows]
    work = rows[framework & _prefixed(name, HOST_COMM_WORK)[rows]]
    backend_threads = np.unique(index.thread[work])
    compute = (
        framework
        & index.is_leaf[rows]
        & index.kind.eq("op")[rows]
        & ~name.isin(BOOKKEEPING_NAMES | NO_COMPUTE_OPS)[rows]
        & ~_prefixed(name, HOST_COMM_OPS)[rows]
        & ~member(index.thread[rows], backend_threads)
    )
    return work, rows[compute]
