"""A job's per-rank analysis on a Dask cluster (``opscope report --cluster``,
``opscope.analyze(paths, cluster=...)``; the ``opscope[cluster]`` extra).

What runs where (``docs/scale.md``), one module each:

* :mod:`.connect`: the ``--cluster`` value parsed and connected to (a scheduler's address, a
  local cluster started here, an open ``distributed.Client``);
* :mod:`.worker`, the map, on the workers, four rounds (a fifth below), each task one rank's
  file: (1) :func:`~.worker.read_rank` reads the file (through the worker's ingest cache, by
  the job's format: :mod:`opscope.trace.formats`) and sends back its metadata, row count and
  time span, or why it cannot be read; (2) :func:`~.worker.analyze_rank` analyses the rank
  exactly as the local path does (its rows placed as the local job table places them: the
  same rank, the same event ids, the job's metadata) and sends back its
  :class:`~opscope.analysis.job.RankReport` (``to_dict()``), optionally writing its event
  table as Parquet (``store``); (3) :func:`~.worker.rank_path` computes the rank's critical
  path with its waits from the job's matching, and its graph contracted for the job path
  (:mod:`opscope.analysis.critical.contract`); (4) :func:`~.worker.expand_path`, for the
  ranks the job path crosses, expands the path's runs there into the rank's pieces.  Every
  task takes the coordinator's settings (:class:`~.worker.Settings`: format, cache, reading
  limits, communication kernels) as an argument, in force for that task only;
* :mod:`.coordinator`, the reduce, from rank reports and contractions only: rank assignment,
  the collectives' matching, :func:`opscope.analysis.job_report.merge`, the job path joined and
  solved from the contractions (:func:`opscope.analysis.critical.job_solve.job_section`, the
  code the local path runs).  No event reaches the coordinator, so its memory grows with
  ranks x (ops + collectives), not with events;
* :mod:`.plugin`: each worker's copies of rank files given by URL, fetched once per worker.

The report is the local path's, with ``source.engine`` added; the job's own findings'
``step_savings_us`` take a fifth round (:func:`~.worker.recontract_rank`: the ranks a fix
touches, contracted again with it), and a what-if (``what_if``) a sixth
(:func:`~.worker.what_if_rank`: every rank contracted before and with the spec's changes, and
its own path projected; the coordinator solves the job path from those).  A task whose
worker dies is run again elsewhere (``retries``); a file that cannot be read is named in the
report (``source.unreadable``, a warning, ``distributed.missing_ranks``), as on the local
path.  A job is read by the format of its files: Kineto JSON rank files or an event store
(``--store``); a format read whole (a Neuron profile, an AIU trace) is refused with what to
do.

Dask is imported only when a cluster is asked for.
"""

from __future__ import annotations

from opscope.analysis.cluster.connect import (
    CONNECT_TIMEOUT_S,
    SCHEDULER_ENV,
    ClusterError,
    Scheduler,
    connect,
    parse_scheduler,
)
from opscope.analysis.cluster.coordinator import RETRIES, Options, Progress, analyze_on_cluster
from opscope.analysis.cluster.worker import (
    Settings,
    analyze_rank,
    rank_path,
    read_rank,
    recontract_rank,
    write_events,
)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "RETRIES",
    "SCHEDULER_ENV",
    "ClusterError",
    "Options",
    "Progress",
    "Scheduler",
    "Settings",
    "analyze_on_cluster",
    "analyze_rank",
    "connect",
    "parse_scheduler",
    "rank_path",
    "read_rank",
    "recontract_rank",
    "write_events",
]
