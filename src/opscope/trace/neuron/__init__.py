"""AWS Neuron (Trainium / Inferentia) profiles -> the event table, plus the Neuron tables.

Inputs (``docs/neuron.md`` has the user's view; ``../shared/NEURON.md`` the sources), each a
format of :mod:`opscope.trace.formats`:

* **Neuron Explorer Parquet** (``neuron-explorer view``, profile schema 7.4.0): a folder per
  processed profile, one ``<Table>.parquet`` per table or ``<Table>_0.parquet``,
  ``<Table>_1.parquet``... for big ones.  A *system profile* folder holds
  ``SystemProfileEvents`` (framework, ``neuron_rt`` and ``neuron_hw`` events on the CPU clock)
  and ``SystemProfileMetadata``; a *device profile* folder holds ``Metadata``, ``Instruction``,
  ``ActiveTime``, ``Summary``, ``ExecutionInfo``, ``Warning``... on the device's clock.
* **A raw capture folder** (``<instance>_pid_<pid>/<timestamp>/``: ``trace.json``,
  ``ntrace.pb``, ``trace_info.pb``, ``*.neff``, ``*.ntff``): NEFF and NTFF files are paired by
  their numeric id; ``trace.json`` (the Kineto framework trace) is read; the Parquet tables
  come from ``neuron-explorer view``, which loading never runs: they are read where that
  command writes them (``explorer/`` beside the ``<instance>_pid_<pid>`` folders), and without
  them a warning gives the exact command (the CLI runs it before loading:
  :mod:`opscope.capture.neuron_explorer`).
* **Legacy JSON** (``--output-format json``): ``system_profile.json`` (events) and
  ``device_profile_model_<id>.json`` (old device summary and instructions, kept as tables).
* A folder holding any of these (``explorer/``, ``capture/``), or a run folder with ``neuron/``:
  every piece found is read into one profile.

Modules: :mod:`.schema` (the documented tables and event names), :mod:`.layout` (what a path
holds), :mod:`.tables` (Parquet tables, checked against the schema), :mod:`.capture` (NEFF/NTFF
pairing, the ``neuron-explorer view`` command), :mod:`.columns` (raw event columns and their
table in time order), :mod:`.flows` (the components of the ``flow_id`` graph),
:mod:`.system` (``SystemProfileEvents`` -> events), :mod:`.legacy` (legacy JSON),
:mod:`.framework` (a framework trace merged onto the system profile's clock), :mod:`.link`
(launches and ops), :mod:`.device` (device tables: clock, stacking, device name),
:mod:`.loader` (all of them -> a :class:`~opscope.trace.model.Trace`).

Clocks: the system profile's CPU clock (Unix ns) is the reference; Neuron already moved hardware
timestamps onto it.  A framework ``trace.json`` is matched to the system profile's framework
events (same name, thread and duration) and shifted by the most common start difference; its
events already in the system profile are dropped (no double counting), the others added.
Device tables get ``host_start_ns`` by matching ``ExecutionInfo`` windows to
``nc_exec_running``.  Offsets are in ``TraceMeta.alignment``.

``rank``: the order of the (instance, process) pairs, unless the framework trace of the process
names its rank (``distributedInfo``).

Bad input: a table without a column the schema requires -> :class:`~opscope.errors.TraceError`
naming the table and the columns; columns the schema does not know are ignored by the mapping
(kept in the SQL tables) and listed in ``TraceMeta.warnings``.  Warnings about the profile
itself start with :data:`~.schema.WARNING_PREFIX`; structured problems (Neuron's ``Warning``
table, unpaired NEFF/NTFF files, protobuf-only captures) are in ``TraceMeta.extra["neuron"]``
for the profile-quality rule.
"""
