"""Reaching a Dask cluster: a ``--cluster`` value parsed (:func:`parse_scheduler`) and
connected to (:func:`connect`: a scheduler's address, a local cluster started and closed
here, or an open ``distributed.Client``).  Dask is imported only here and by the tasks' plugin,
and only when a cluster is asked for."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opscope.analysis import beside
from opscope.errors import OpscopeError

SCHEDULER_ENV = "OPSCOPE_DASK_SCHEDULER"
CONNECT_TIMEOUT_S = 10.0


class ClusterError(OpscopeError):
    """A cluster that cannot be used: a bad address, no scheduler there, no Dask installed."""


@dataclass(frozen=True)
class Scheduler:
    """A parsed ``--cluster`` value: a scheduler's address, or a local cluster of ``workers``."""

    address: str | None
    workers: int | None = None

    @property
    def name(self) -> str:
        if self.address is not None:
            return self.address
        return "local" if self.workers is None else f"local:{self.workers}"


def parse_scheduler(value: str | None) -> Scheduler:
    """``local``, ``local:N``, ``tcp://host:port`` (``tls://`` too) or, for None or an empty
    value, ``$OPSCOPE_DASK_SCHEDULER``; anything else is a :class:`ClusterError`."""
    text = (value or os.environ.get(SCHEDULER_ENV, "")).strip()
    if not text:
        raise ClusterError(
            f"--cluster: no scheduler given and ${SCHEDULER_ENV} is not set "
            "(local, local:N or tcp://host:port)"
        )
    if text == "local":
        return Scheduler(None)
    if text.startswith("local:"):
        n = text.partition(":")[2]
        if not n.isdigit() or int(n) < 1:
            raise ClusterError(f"--cluster {text!r}: local:N needs a worker count N >= 1")
        return Scheduler(None, int(n))
    scheme, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if sep and scheme in ("tcp", "tls") and colon and host and port.isdigit():
        return Scheduler(text)
    raise ClusterError(
        f"--cluster {text!r}: expected local, local:N or a scheduler address tcp://host:port"
    )


def dask() -> Any:
    """The ``distributed`` module, or a :class:`ClusterError` saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise ClusterError(
            "--cluster needs Dask: pip install 'opscope[cluster]' (dask[distributed])"
        ) from None
    return distributed


@contextlib.contextmanager
def connect(cluster: Any, timeout_s: float = CONNECT_TIMEOUT_S) -> Iterator[tuple[Any, str]]:
    """``(client, scheduler name)`` for a ``--cluster`` value or an open
    ``distributed.Client`` (kept open); a local cluster is started and closed here."""
    if hasattr(cluster, "submit") and hasattr(cluster, "scheduler_info"):
        yield cluster, str(getattr(cluster.scheduler, "address", "client"))
        return
    spec = parse_scheduler(cluster if isinstance(cluster, str) else None)
    distributed = dask()
    if spec.address is None:
        import logging

        cpus = os.cpu_count() or 1
        n_workers = spec.workers or max(1, cpus)
        local = distributed.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            # a worker on each core already: a rank's critical path stays on the worker's
            # thread rather than start a second one beside it (analysis.beside)
            env={beside.ENV: "1"} if n_workers >= cpus else {},
            processes=True,
            dashboard_address=None,
            # the scheduler's HTTP routes on a free local port, not Dask's default 8787 (which
            # a notebook's cluster often holds: Dask then warns and moves)
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=logging.ERROR,
        )
        try:
            with distributed.Client(local) as client:
                yield client, spec.name
        finally:
            local.close()
        return
    try:
        client = distributed.Client(spec.address, timeout=timeout_s)
    except (OSError, TimeoutError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ClusterError(
            f"--cluster {spec.address}: no Dask scheduler answers within {timeout_s:g} s ({first})"
        ) from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout_s)
        except (OSError, TimeoutError):
            raise ClusterError(
                f"--cluster {spec.address}: the scheduler has no workers after {timeout_s:g} s"
            ) from None
        yield client, spec.name
    finally:
        client.close()


__all__ = [
    "CONNECT_TIMEOUT_S",
    "SCHEDULER_ENV",
    "ClusterError",
    "Scheduler",
    "connect",
    "dask",
    "parse_scheduler",
]
