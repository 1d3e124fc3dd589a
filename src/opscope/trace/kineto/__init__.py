"""Kineto / Chrome-trace events -> event-table columns (Arrow), one run of events at a time.

Contract: :class:`~opscope.trace.kineto.builder.KinetoBuilder` is fed decoded runs of
``traceEvents`` (lists of dicts, see :mod:`opscope.trace.jsonstream`) and returns, from
:meth:`~opscope.trace.kineto.builder.KinetoBuilder.finish`, a
:class:`~opscope.trace.kineto.columns.KinetoParse`: the timed events as an Arrow table
(``cat``, ``name``, ``pid``, ``tid``, ``source``, ``kind``, ``lane``, ``start_ns``, ``dur_ns``,
``correlation``, ``external_id``, ``args``), the flow endpoints, process/thread names and what
was skipped, by reason.

* Timed events: ``ph`` X, and B/E pairs (matched per pid/tid, innermost first).
* Metadata events (``ph`` M) name processes and threads.
* Flow events (``ph`` s/f/t) are kept aside for linking (:mod:`opscope.trace.link`).
* Everything else is counted in ``skipped`` with the reason (instant events, counters, events
  without a usable ``ts``, negative durations, non-objects, ...).

Modules, each one step:

* :mod:`.times`: ``ts``/``dur`` microseconds -> exact integer nanoseconds.
* :mod:`.columns`: :class:`~.columns.KinetoParse`, the raw and flow column schemas, text columns.
* :mod:`.convert`: one run of events -> its columns, through the C scanner, the typed decoder or
  dicts (:class:`~.convert.RunParts`, no cross-run state).
* :mod:`.classify`: ``source``, ``kind`` and ``lane`` per distinct category and name.
* :mod:`.builder`: runs merged in file order (B/E pairs, names, skip counts), then classified.
* :mod:`.file`: one file streamed, its runs converted in worker processes or threads.
"""
