"""Communication on one rank: how much there is, and how much of it compute hides.

Definitions (per rank, over the analysed window):

* **comm** - the union of the communication intervals.  On a device trace: device events of
  kind ``comm`` (collective and point-to-point kernels, classed at ingest by their names).  On
  a CPU trace (gloo and other CPU backends): the backend's own work, the ``gloo:*``
  annotations it records on its threads (:func:`opscope.trace.commnames.is_host_comm`).
* **compute** - the union of the compute intervals.  On a device trace: device kernels and
  Neuron executions that are not communication (copies and sets are neither).  On a CPU trace:
  the ops that did work of their own (not bookkeeping, views, allocation or dispatch wrappers,
  not communication ops such as ``c10d::allreduce_``: :data:`HOST_COMM_OPS`) on every thread
  but the backend's.
* **overlap** = |comm intersected with compute| = |comm| + |compute| - |comm united with compute|;
  ``overlap_share`` = overlap / comm; ``exposed_comm`` = comm - overlap: communication that no
  compute hides, the time a perfect overlap could win.  Both are None without communication.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from opscope.analysis.intervals import overlap_ns, union_ns
from opscope.analysis.optable import host_work
from opscope.trace.arrays import member, unique_ints
from opscope.trace.commnames import OP_PREFIXES, PARAM_COMMS, collective_of_host_op, is_host_comm

if TYPE_CHECKING:
    from opscope.trace.index import EventIndex

# Host-side ops that issue or wait for communication: not compute (with every name that
# opscope.trace.commnames reads as a collective)
HOST_COMM_OPS = (*OP_PREFIXES, PARAM_COMMS)


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


def is_comm_op(name: str) -> bool:
    """Whether a host op issues or waits for communication (not compute)."""
    return name.startswith(HOST_COMM_OPS) or collective_of_host_op(name) is not None


def host_comm_rows(index: EventIndex, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of ``rows`` (positions in the index) of a CPU trace: those of the backend's
    communication work (:func:`opscope.trace.commnames.is_host_comm`: gloo's), and those of
    the ops that did work of their own on the other threads
    (:func:`opscope.analysis.optable.host_work`), communication ops left out
    (:data:`HOST_COMM_OPS` and the collectives commnames names)."""
    name = index.name
    framework = index.is_framework[rows]
    work = rows[framework & name.passing(is_host_comm)[rows]]
    backend_threads = unique_ints(index.thread[work])
    computing = index.memo("analysis.host_work", lambda: host_work(index))
    compute = (
        framework
        & computing[rows]
        & ~name.passing(is_comm_op)[rows]
        & ~member(index.thread[rows], backend_threads)
    )
    return work, rows[compute]
