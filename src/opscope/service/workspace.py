"""The :class:`Workspace`: open traces by handle and answer the front-ends' questions."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opscope.errors import OpscopeError

if TYPE_CHECKING:
    from opscope.analysis.report import Report
    from opscope.service.collectives import CollectiveLookup
    from opscope.service.queries import EventsRequest, PageRequest
    from opscope.trace import Trace
    from opscope.trace.viewport import Viewport

DEFAULT_SQL_ROWS = 1000
MAX_SQL_ROWS = 5000  # a page past this is a dump, not an answer: ask for aggregates
DEFAULT_SQL_TIMEOUT_S = 10.0
MAX_SQL_TIMEOUT_S = 300.0


class ServiceError(OpscopeError):
    """A question the workspace cannot answer, with what to ask instead."""


class StepsError(ServiceError):
    """Profiler steps asked for that the trace does not have; the message names the argument
    ``steps`` (a front-end that spells it otherwise, such as the CLI's ``--steps``, says so
    in its own words)."""


@dataclass
class OpenTrace:
    """One open trace: its report and timeline index are computed on first use, then kept."""

    handle: str
    path: str
    trace: Trace
    steps: tuple[int, int] | None = None
    #: the job's rank this trace keeps (``open(rank=N)``), None for all it has
    rank: int | None = None
    #: the graph captures asked for (``open(graph_capture=...)``)
    graph_capture: str | Path | bool | None = None
    #: the DataLoader workers' trace files that break the path's data_loading down
    loader_traces: list[str | Path] = field(default_factory=list)
    _report: Report | None = field(default=None, repr=False)
    _data: dict[str, Any] | None = field(default=None, repr=False)
    _index: Viewport | None = field(default=None, repr=False)
    peaks: str | Path | dict[str, Any] | None = None
    #: hold the trace compactly for the analysis (:meth:`Trace.compact`: ``args`` packed, the
    #: string columns and links as the index holds them): for a command that analyses the
    #: trace once and reads no event's details after
    pack_args: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _index_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _error: BaseException | None = field(default=None, repr=False)
    _collectives: CollectiveLookup | None = field(default=None, repr=False)

    @property
    def report(self) -> Report:
        """The analysis (computed once; callers wait while another thread computes it)."""
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._report is None:
                from opscope.analysis.pipeline import analyze

                try:
                    self._report = analyze(
                        self.trace,
                        steps=self.steps,
                        peaks=self.peaks,
                        loader_traces=self.loader_traces,
                        pack_args=self.pack_args,
                    )
                except Exception as exc:
                    self._error = exc
                    raise
            return self._report

    @property
    def data(self) -> dict[str, Any]:
        """The ``opscope.report/1`` document, its critical path's segments lazy (see
        :meth:`Report.to_dict`; serialise with ``default=json_default``)."""
        report = self.report
        with self._lock:
            if self._data is None:
                self._data = report.to_dict(lazy=True)
            return self._data

    def prefetch(self) -> threading.Thread:
        """Start the analysis in the background (a server answers timeline queries meanwhile;
        :attr:`report` waits for it).  An error is raised to whoever asks for the report."""

        def work() -> None:
            try:
                _ = self.data
            except Exception:  # kept in _error, raised to the first caller of .report
                return

        t = threading.Thread(target=work, name=f"opscope-analysis-{self.handle}", daemon=True)
        t.start()
        return t

    @property
    def index(self) -> Viewport:
        """The timeline index (its own lock: it never waits for the analysis)."""
        with self._index_lock:
            if self._index is None:
                from opscope.trace.viewport import Viewport

                self._index = Viewport(self.trace)
            return self._index

    @property
    def collectives(self) -> CollectiveLookup:
        """Event ids -> collective records and instances (built once, from the report)."""
        report = self.report
        with self._lock:
            if self._collectives is None:
                from opscope.service.collectives import CollectiveLookup

                self._collectives = CollectiveLookup.of_report(report, self.trace.meta.ranks)
            return self._collectives

    def describe(self) -> dict[str, Any]:
        meta = self.trace.meta
        return {
            "handle": self.handle,
            "path": self.path,
            "events": len(self.trace),
            "format": meta.format,
            "ranks": list(meta.ranks),
            "device": self.trace.device.to_dict(),
            "steps": None if self.steps is None else list(self.steps),
        }


def check_steps(trace: Trace, steps: tuple[int, int]) -> None:
    """A :class:`StepsError` naming the trace's profiler steps when none is in ``steps``."""
    from opscope.trace.arrays import unique_ints  # NumPy and Arrow: not at the module's import

    col = trace.index.step
    have = unique_ints(col[col >= 0]).tolist()
    first, last = steps
    if any(first <= s <= last for s in have):
        return
    asked = str(first) if first == last else f"{first}:{last}"
    if not have:
        raise StepsError(f"steps {asked}: the trace records no profiler steps")
    shown = ", ".join(str(s) for s in have[:20]) + (" ..." if len(have) > 20 else "")
    raise StepsError(f"steps {asked}: no such step; the trace has steps {shown}")


def only_rank(trace: Trace, rank: int, steps: tuple[int, int] | None = None) -> Trace:
    """The events of one rank of ``trace`` as a trace of their own, its role in the job (the
    job's collectives matched, :func:`opscope.analysis.job_role.job_role`) in its metadata's
    ``extra["job_role"]``."""
    from opscope.analysis.job_role import job_role
    from opscope.analysis.rank_split import rank_traces

    ranks = list(trace.meta.ranks) or [0]
    if rank not in ranks:
        shown = ", ".join(str(r) for r in ranks[:20]) + (" ..." if len(ranks) > 20 else "")
        raise ServiceError(f"rank {rank}: not in this trace (its ranks: {shown})")
    if len(ranks) == 1:
        return trace
    subs = {t.meta.ranks[0]: t for t in rank_traces(trace)}
    chosen = subs[rank]
    chosen.meta.extra = {**chosen.meta.extra, "job_role": job_role(subs, rank, steps)}
    return chosen


class Workspace:
    """Open traces under handles (``t1``, ``t2``, ...); the last one opened answers every call
    that names none.  Safe to share between the threads of a server."""

    def __init__(self) -> None:
        self._traces: dict[str, OpenTrace] = {}
        self._last: str | None = None
        self._counter = 0
        self._lock = threading.Lock()
        self._diffs: dict[tuple[str, str], dict[str, Any]] = {}

    # -- opening ---------------------------------------------------------------------------

    def open(
        self,
        path: str | Path,
        *,
        steps: tuple[int, int] | None = None,
        cache: bool = True,
        handle: str | None = None,
        peaks: str | Path | dict[str, Any] | None = None,
        prefetch: bool = False,
        rank: int | None = None,
        make_default: bool = True,
        graph_capture: str | Path | bool | None = None,
        loader_traces: str | Path | list[str | Path] | bool | None = None,
    ) -> OpenTrace:
        """Load a trace file, run folder or folder of ranks; returns its :class:`OpenTrace`.

        ``peaks``: device peaks for the roofline (a file or dict, see ``analysis.peaks``);
        ``prefetch``: start the analysis in the background now; ``rank``: keep that rank of a
        job only (:class:`ServiceError` naming the ranks there when it has no such rank);
        ``make_default``: false to leave the default trace as it is (the new trace becomes the
        default only when none is open); ``graph_capture``: the CUDA/HIP graph captures that
        attribute the trace's replays (a capture trace or a folder of them; ``False``: none;
        ``None``: the ``capture_traces/`` folder beside the trace and the captures in the trace
        itself, see :func:`opscope.trace.graphs.with_captures`); ``loader_traces``: the
        DataLoader workers' traces (files, folders or globs; ``False``: none; ``None``: a
        ``loader_traces/`` folder beside the trace, see :func:`opscope.analysis.api.analyze`)."""
        from opscope.trace import load
        from opscope.trace.loader_work import loader_files

        loaders = loader_files(path, loader_traces)
        trace = load(path, cache=cache)
        if rank is not None:
            trace = only_rank(trace, rank, steps)
        # the graph captures' modules once the trace is read (the read needs none of them)
        from opscope.trace.graphs import with_captures

        trace = with_captures(trace, path, graph_capture, cache=cache)
        if steps is not None:
            check_steps(trace, steps)
        opened = self.add(
            trace, path=str(path), steps=steps, handle=handle, make_default=make_default
        )
        opened.peaks = peaks
        opened.rank = rank
        opened.graph_capture = graph_capture
        opened.loader_traces = loaders
        if prefetch:
            opened.prefetch()
        return opened

    def add(
        self,
        trace: Trace,
        *,
        path: str | None = None,
        steps: tuple[int, int] | None = None,
        handle: str | None = None,
        report: Report | None = None,
        make_default: bool = True,
    ) -> OpenTrace:
        """Register an already loaded trace (and, optionally, its report); ``make_default``:
        as in :meth:`open`."""
        with self._lock:
            if handle is None:
                self._counter += 1
                handle = f"t{self._counter}"
            opened = OpenTrace(
                handle=handle,
                path=path or ", ".join(trace.meta.paths),
                trace=trace,
                steps=steps,
                _report=report,
            )
            self._traces[handle] = opened
            if make_default or self._last is None:
                self._last = handle
            return opened

    def adopt(self, opened: OpenTrace, handle: str) -> OpenTrace:
        """Register a trace already open elsewhere (its report and index come along) under
        ``handle`` here (``opened.handle`` stays the name it has where it was opened)."""
        with self._lock:
            self._traces[handle] = opened
            self._last = handle
            self._diffs = {k: v for k, v in self._diffs.items() if handle not in k}
        return opened

    def close(self, handle: str) -> None:
        with self._lock:
            opened = self._traces.pop(handle, None)
            if opened is None:
                raise ServiceError(self._unknown(handle))
            self._diffs = {k: v for k, v in self._diffs.items() if handle not in k}
            if self._last == handle:
                self._last = next(reversed(self._traces), None)
        opened.trace.close()

    def handles(self) -> list[dict[str, Any]]:
        return [t.describe() for t in self._traces.values()]

    def get(self, handle: str | None = None) -> OpenTrace:
        """The trace named ``handle``, else the last opened."""
        key = handle if handle is not None else self._last
        if key is None:
            raise ServiceError("no trace is open: open one first (a trace file or folder)")
        opened = self._traces.get(key)
        if opened is None:
            raise ServiceError(self._unknown(key))
        return opened

    def _unknown(self, handle: str) -> str:
        known = ", ".join(self._traces) or "none"
        return f"no open trace {handle!r} (open: {known})"

    # -- questions -------------------------------------------------------------------------

    def report(self, handle: str | None = None) -> dict[str, Any]:
        """The ``opscope.report/1`` document of a trace."""
        return self.get(handle).data

    def analysis(self, handle: str | None = None) -> Report:
        """The :class:`~opscope.analysis.report.Report` object of a trace."""
        return self.get(handle).report

    def lanes(self, handle: str | None = None) -> dict[str, Any]:
        return self.get(handle).index.lanes_dict()

    def window(
        self,
        lanes: list[int] | None,
        t0: int,
        t1: int,
        px: int,
        handle: str | None = None,
    ) -> dict[str, Any]:
        """Events of the lanes in [t0, t1) (ns relative to the index origin) at ``px``
        pixels' resolution (see :meth:`Viewport.window`)."""
        return self.get(handle).index.window(lanes, t0, t1, px)

    def event(self, event_id: int, handle: str | None = None) -> dict[str, Any] | None:
        """One event with its args, or None when the id is not in the trace."""
        return self.get(handle).index.event(event_id)

    def chain(self, event_id: int, handle: str | None = None) -> dict[str, Any]:
        """The dependency chain of an event: dispatch, runtime call, device execution."""
        from opscope.analysis.chain import dependency_chain

        return dependency_chain(self.get(handle).index, event_id)

    def what_if(self, spec: str, handle: str | None = None) -> dict[str, Any]:
        """The critical path recomputed with ``spec``'s changes (``"aten::mul=0.5"``,
        ``"launch_overhead=0"``; see :mod:`opscope.analysis.whatif`): the path length now and
        projected, per step; a job answers per rank (each rank's own path)."""
        from opscope.analysis.critical.section import WhatIfError
        from opscope.analysis.whatif import what_if

        try:
            return what_if(self.analysis(handle), spec)
        except WhatIfError as exc:
            raise ServiceError(str(exc)) from None

    def critical_path(self, handle: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """The report's ``critical_path`` section (the job's path for a job) with each segment
        placed on the timeline: ``lane``, ``row``, ``t`` (ns relative to the timeline's
        origin) and ``dur_ns``, plus ``i``, ``segments_total``, ``truncated`` and
        ``origin_ns``; at most ``limit`` segments (default
        :data:`opscope.service.critical.MAX_SEGMENTS`, the longest kept).  See
        :mod:`opscope.service.critical`.  :class:`ServiceError` when the report has none."""
        from opscope.service.critical import MAX_SEGMENTS, drawn_path

        opened = self.get(handle)
        section = opened.data.get("critical_path")
        if not isinstance(section, dict):
            raise ServiceError("this report has no critical path (no events in its window)")
        return drawn_path(section, opened.index, MAX_SEGMENTS if limit is None else limit)

    def collective(self, event_id: int, handle: str | None = None) -> dict[str, Any]:
        """The collective an event belongs to, across the ranks of the job.

        ``event_id``: the anchor of a collective call (its ``c10d::*`` op), an event nested in
        it (``record_param_comms``, ``nccl:*``), its work (a comm kernel, a gloo range) or the
        runtime launch of that work, on any rank.  The answer: ``name``, ``pg``, ``seq`` (the
        key the ranks were matched by: the seq, or the index), ``bytes``, ``last_rank``,
        ``start_skew_us``, ``end_skew_us``, ``dur_us``, ``matched``, ``rank`` (the selected
        event's) and ``ranks``, one entry per rank of the instance in rank order: ``rank``,
        ``arrival_ns``, ``end_ns`` (as recorded, that rank's clock), ``t0``/``t1`` (the same
        relative to the timeline's origin), ``wait_us`` (as the report's matching has it:
        clock-corrected where the report's ``distributed.clock`` is applied), ``event_id``,
        ``work_event_ids`` and ``drawn`` (lane, row, ``t`` and ``dur_ns`` of the work events,
        for a timeline).

        A trace of one rank, or a record no instance holds (point-to-point calls, records
        after a mismatch stopped the matching), answers that record alone: ``matched`` false,
        ``ranks`` of one entry with ``wait_us`` 0.  ``KeyError`` when the id is not in the
        trace; :class:`ServiceError` when the event is part of no collective.  The lookup is
        built once per open trace (it needs the report)."""
        opened = self.get(handle)
        index = opened.index
        row = index.row_of(event_id)
        if row < 0:
            raise KeyError(event_id)
        lookup = opened.collectives
        hit = lookup.find(index, row)
        if hit is None:
            raise ServiceError(
                f"event {event_id} is part of no collective (select a c10d op, its comm "
                "kernel or its gloo range)"
            )
        return lookup.answer(index, *hit)

    def occurrences(self, name: str, handle: str | None = None) -> dict[str, Any]:
        """Every event of one name, in time order."""
        return self.get(handle).index.occurrences(name)

    def chain_of_op(
        self, name: str, occurrence: int = 0, handle: str | None = None
    ) -> dict[str, Any]:
        """The chain of the ``occurrence``-th call (0-based, time order) of the op ``name``."""
        found = self.occurrences(name, handle)
        ids = [int(i) for i in found.get("ids", [])]
        if not ids:
            raise ServiceError(f"no event named {name!r} in the trace (list ops to see names)")
        if not 0 <= occurrence < len(ids):
            raise ServiceError(f"{name!r} occurs {len(ids)} times: occurrence is 0..{len(ids) - 1}")
        return self.chain(ids[occurrence], handle)

    def sql(
        self,
        query: str,
        handle: str | None = None,
        limit: int = DEFAULT_SQL_ROWS,
        *,
        offset: int = 0,
        timeout_s: float = DEFAULT_SQL_TIMEOUT_S,
    ) -> dict[str, Any]:
        """Run one read-only SQL query over ``events``, ``ops`` and ``kernels`` (and the
        ``neuron_*`` tables of a Neuron profile), always in the sandbox of
        :mod:`opscope.trace.sqlsafe`: no file or network access, one SELECT, stopped after
        ``timeout_s`` seconds.

        Returns ``columns``, ``rows`` (up to ``limit`` objects from row ``offset``, values
        JSON-safe: see :func:`opscope.trace.sqlrows.json_rows`), ``row_count`` (the rows
        *returned*: the total is not known without running the whole query), ``truncated``
        (more rows follow), ``offset`` and ``next_offset`` (the offset of the next page, or
        ``None``).  Only as many rows as asked for are computed, so ask for aggregates.
        """
        if not 1 <= limit <= MAX_SQL_ROWS:
            raise ServiceError(
                f"limit must be between 1 and {MAX_SQL_ROWS} (results should be aggregates; "
                "page with offset)"
            )
        if offset < 0:
            raise ServiceError("offset must be 0 or more")
        if not 0 < timeout_s <= MAX_SQL_TIMEOUT_S:
            raise ServiceError(f"timeout_s must be more than 0 and at most {MAX_SQL_TIMEOUT_S:g}")
        from opscope.trace.sqlrows import unique_columns

        result = self.get(handle).trace.query(
            query, limit=limit, offset=offset, timeout_s=timeout_s
        )
        rows = result.json_rows()
        return {
            "columns": unique_columns(result.columns),
            "rows": rows,
            "row_count": len(rows),
            "truncated": result.truncated,
            "offset": result.offset,
            "next_offset": result.next_offset,
        }

    def diff(self, a: str, b: str) -> dict[str, Any]:
        """The ``opscope.diff/1`` document of trace ``b`` against trace ``a``."""
        key = (a, b)
        cached = self._diffs.get(key)
        if cached is not None:
            return cached
        from opscope.analysis.diff import diff_reports

        out = diff_reports(self.get(a).report, self.get(b).report)
        with self._lock:
            self._diffs[key] = out
        return out

    # -- pages (for front-ends that take a bounded answer: see opscope.service.queries) ----

    def digest(self, handle: str | None = None) -> dict[str, Any]:
        """The compact digest of a trace's report (:func:`opscope.service.brief.digest`)
        under ``brief``, with the trace's handle, path and event count."""
        from opscope.service.brief import digest

        opened = self.get(handle)
        return {**opened.describe(), "brief": digest(opened.data)}

    def brief(self, handle: str | None = None) -> dict[str, Any]:
        """What an expert says first about a trace (:func:`opscope.service.brief.brief`:
        what bounds it, device busy and idle, the roofline's verdict, the top fixes and the
        next call for each), with the trace's handle and path; the calls name the trace when
        ``handle`` does, the commands reopen it as it was opened (window, rank, peaks)."""
        from opscope.service.brief import brief, report_args

        opened = self.get(handle)
        args = report_args(
            opened.path,
            steps=opened.steps,
            rank=opened.rank,
            peaks=opened.peaks,
            graph_capture=opened.graph_capture,
        )
        named = opened.handle if handle is not None else None  # its calls name it as asked
        return {
            "handle": opened.handle,
            "path": opened.path,
            **brief(opened.data, trace=args, handle=named),
        }

    def table(
        self, table: str, handle: str | None = None, *, request: PageRequest | None = None
    ) -> dict[str, Any]:
        """One page of a report table: ``ops``, ``op_shapes``, ``kernels`` or ``roofline``
        (its per-op rows), sorted and filtered as ``request`` says (see
        :func:`opscope.service.queries.page_rows`)."""
        from opscope.service.queries import PageRequest, page_rows

        data = self.get(handle).data
        req = request or PageRequest()
        if table in ("ops", "op_shapes"):
            return page_rows(data.get(table) or [], "ops", req)
        if table == "kernels":
            return page_rows(data.get("kernels") or [], "kernels", req)
        if table == "roofline":
            roof = data.get("roofline") or {}
            page = page_rows(roof.get("ops") or [], "roofline", req)
            extra = {k: roof.get(k) for k in ("device", "peaks", "totals", "notes")}
            return {**extra, **page}
        raise ServiceError(f"no table {table!r}: use ops, op_shapes, kernels or roofline")

    def findings(
        self,
        handle: str | None = None,
        *,
        min_severity: str | None = None,
        kind: str | None = None,
        rank: int | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> dict[str, Any]:
        """One page of the ranked findings (``rank``: a job's rank, -1 the job's own), each
        without evidence and details
        (:func:`opscope.service.brief.finding_head`); :meth:`finding` has one in full."""
        from opscope.service.brief import finding_head
        from opscope.service.queries import page_findings

        page = page_findings(
            self.get(handle).data.get("findings") or [],
            min_severity=min_severity,
            kind=kind,
            rank=rank,
            limit=limit,
            offset=offset,
        )
        page["rows"] = [finding_head(f) for f in page["rows"]]
        return page

    def finding(
        self, finding_id: str, handle: str | None = None, *, events: int = 10
    ) -> dict[str, Any]:
        """One finding in full, plus ``evidence_events``: the first ``events`` events its
        evidence names, each as a short record."""
        from opscope.service.queries import evidence_events, find_finding

        opened = self.get(handle)
        found = find_finding(opened.data.get("findings") or [], finding_id)
        return {**found, "evidence_events": evidence_events(opened.index, found, events)}

    def events(self, handle: str | None = None, *, request: EventsRequest) -> dict[str, Any]:
        """One page of the timeline's events in a window (see
        :class:`opscope.service.queries.EventsRequest`)."""
        from opscope.service.queries import events_slice

        return events_slice(self.get(handle).index, request)

    def tables(self, handle: str | None = None) -> list[dict[str, Any]]:
        """The tables SQL can read (``events``, ``ops``, ``kernels``, a Neuron profile's
        ``neuron_*``): ``name``, ``rows`` and ``columns`` (``name``, ``type``)."""
        trace = self.get(handle).trace
        tables = [(name, trace.sql_table(name)) for name in trace.sql_tables]
        return [
            {
                "name": name,
                "rows": int(t.num_rows),
                "columns": [{"name": f.name, "type": _sql_type(f.type)} for f in t.schema],
            }
            for name, t in tables
        ]


def _sql_type(arrow_type: Any) -> str:
    """A column's type as SQL sees it (a dictionary-encoded string is a string)."""
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    return str(arrow_type)
