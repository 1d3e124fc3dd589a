"""``opscope.profile(...)``: a torch.profiler session that fixes the usual pitfalls.

Contract::

    with opscope.profile(wait=2, warmup=1, active=2) as p:
        for _ in range(p.steps):
            model(x)
            p.step()
    p.run_dir            # out/<YYYYmmdd-HHMMSS>-<label>/ with run.json and trace.json.gz

What it does beyond ``torch.profiler.profile`` (docs/capture.md explains each):

- picks the device and the profiler activities that see its work (:mod:`.devices`);
- synchronizes the device at the end of every step, inside a ``record_function`` named
  :data:`SYNC_ANNOTATION` so analyses can recognise and exclude the wait: without it the last
  kernels of a step run after the step is closed, or after the trace is stopped;
- exports each active window exactly once (torch raises "Trace is already saved" on a second
  export) into a fresh run folder: ``trace.json.gz`` for the first window,
  ``trace.cycle<N>.json.gz`` for the N-th when the schedule repeats;
- writes ``run.json`` (schema ``opscope.run/1``) on every exit: normal, when the body raised
  (the body's exception is re-raised unchanged) and when the schedule's active window was never
  reached, which raises :class:`~opscope.errors.ScheduleError` instead of leaving an empty trace;
- keeps compile time apart: ``record_compile`` stores a :class:`CompileRecord` measured before
  profiling, and the session warns when Dynamo compiled during a recorded step;
- on a Neuron device, passes the ``NeuronConfig`` and chains ``NeuronProfiler.export_trace``
  (:mod:`.neuron`).

For ``opscope profile`` (:mod:`.runner`) a session can also share a run folder with the other
ranks of a distributed run (``run_dir=`` and ``rank=``: traces go to ``traces/rank<N>.json.gz``,
the run document to ``ranks/rank<N>.json`` and, on rank 0, ``run.json``), record an open-ended
window that its caller ends (``until_stop=True`` and :meth:`ProfileSession.stop`), and carry
extra top-level ``run.json`` sections (:meth:`ProfileSession.annotate`).

This module imports torch; the rest of :mod:`opscope.capture` does not need to.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import torch

from opscope.capture.compile_metrics import CompileRecord, frames_compiled_so_far
from opscope.capture.devices import DeviceSpec, resolve_device
from opscope.capture.neuron import (
    NeuronCapture,
    copy_as_gzip,
    find_exported_trace,
    setup_neuron_capture,
)
from opscope.capture.runfolder import (
    RUN_JSON,
    RUN_SCHEMA,
    new_run_dir,
    open_run_dir,
    rank_run_json,
    rank_trace_name,
    run_environment,
    trace_name,
    write_json,
)
from opscope.capture.schedule import Schedule
from opscope.errors import ScheduleError
from opscope.markers import SYNC_ANNOTATION

#: Top-level trace metadata key naming the device kind (read by :mod:`opscope.trace.device`).
DEVICE_KIND_METADATA = "device_kind"

# An open-ended window (until_stop=True) is a schedule whose active part never ends on its own.
_OPEN_ACTIVE = 2**31 - 1

# said once in run.json's warnings where Dynamo's frame counter cannot be read
UNREADABLE_FRAMES = (
    "Dynamo's frame counter (torch._dynamo.utils.counters['frames']['ok']) could not be read: "
    "compilation inside the recorded steps cannot be detected in this run"
)


class ProfileSession:
    """One profiling run; create it with :func:`profile` and use it as a context manager."""

    def __init__(
        self,
        *,
        device: DeviceSpec,
        schedule: Schedule,
        record_shapes: bool = True,
        with_stack: bool = False,
        profile_memory: bool = False,
        with_flops: bool = False,
        out: str | os.PathLike[str] = "opscope-runs",
        label: str | None = None,
        sync: bool = True,
        neuron_config: Mapping[str, Any] | None = None,
        run_info: Mapping[str, Any] | None = None,
        run_dir: str | os.PathLike[str] | None = None,
        rank: int | None = None,
        until_stop: bool = False,
    ) -> None:
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
            raise ValueError(f"rank must be an integer >= 0, got {rank!r}")
        if run_info is not None and not isinstance(run_info, Mapping):
            raise TypeError(f"run_info must be a mapping, got {type(run_info).__name__}")
        if neuron_config is not None and not isinstance(neuron_config, Mapping):
            raise TypeError(f"neuron_config must be a mapping, got {type(neuron_config).__name__}")
        self._device = device
        self._schedule = schedule
        self._options = {
            "record_shapes": bool(record_shapes),
            "with_stack": bool(with_stack),
            "profile_memory": bool(profile_memory),
            "with_flops": bool(with_flops),
        }
        self._out = Path(out)
        self._label = label
        self._sync_enabled = bool(sync)
        self._neuron_options = dict(neuron_config) if neuron_config is not None else None
        self._run_info = dict(run_info or {})
        self._shared_dir = Path(run_dir) if run_dir is not None else None
        self._rank = rank
        self._until_stop = bool(until_stop)
        # The schedule torch runs: the given one, or for an open-ended window the same start
        # with an active part that only stop() or the end of the block ends.
        self._window = (
            Schedule(
                wait=schedule.wait,
                warmup=schedule.warmup,
                active=_OPEN_ACTIVE,
                repeat=1,
                skip_first=schedule.skip_first,
            )
            if self._until_stop
            else schedule
        )
        self._extra: dict[str, Any] = {}

        self._run_dir: Path | None = None
        self._prof: Any = None
        self._neuron: NeuronCapture | None = None
        self._state = "new"  # new -> running -> finished
        self._steps_run = 0
        self._traces: list[str] = []
        self._compile: list[dict[str, Any]] = []
        self._warnings: list[str] = []
        self._compiled_in_window: list[int] = []
        self._frames_mark: int | None = 0
        self._metadata_cycle = 0
        self._created = ""
        self._t0 = 0.0
        self._status = "running"
        self._error: str | None = None
        self._finished = ""
        self._wall_s: float | None = None

    # -- what callers read ------------------------------------------------------------------

    @property
    def device(self) -> DeviceSpec:
        return self._device

    @property
    def schedule(self) -> Schedule:
        return self._schedule

    @property
    def steps(self) -> int:
        """How many ``step()`` calls the schedule needs (loop ``for _ in range(p.steps)``)."""
        return self._schedule.steps_needed

    @property
    def steps_run(self) -> int:
        return self._steps_run

    @property
    def run_dir(self) -> Path:
        """The run folder (created when the session starts)."""
        if self._run_dir is None:
            raise RuntimeError("the profile session has not started: use it in a `with` block")
        return self._run_dir

    @property
    def rank(self) -> int | None:
        """The rank this session records in a shared run folder, or None."""
        return self._rank

    @property
    def trace_path(self) -> Path | None:
        """The first window's trace once exported, else None: ``run_dir/trace.json.gz``, or
        ``run_dir/traces/rank<N>.json.gz`` for a session with a ``rank``."""
        return self.run_dir / self._traces[0] if self._traces else None

    @property
    def trace_paths(self) -> list[Path]:
        """Every exported trace, one per completed active window."""
        return [self.run_dir / name for name in self._traces]

    @property
    def profiler(self) -> Any:
        """The underlying ``torch.profiler.profile`` (None outside the ``with`` block)."""
        return self._prof if self._state == "running" else None

    @property
    def status(self) -> str:
        """``running``, ``ok``, ``error`` (the body raised), ``schedule_error``."""
        return self._status

    # -- the session ------------------------------------------------------------------------

    def __enter__(self) -> ProfileSession:
        if self._state != "new":
            raise RuntimeError("a ProfileSession can be used for one `with` block only")
        self._run_dir = (
            open_run_dir(self._shared_dir)
            if self._shared_dir is not None
            else new_run_dir(self._out, self._label)
        )
        self._created = datetime.now().astimezone().isoformat(timespec="seconds")
        self._t0 = time.perf_counter()
        self._state = "running"
        self._warnings.extend(self._device.notes)
        try:
            kwargs = self._profiler_kwargs()
            self._prof = torch.profiler.profile(**kwargs)
            self._prof.__enter__()
        except BaseException as exc:
            self._finish("error", f"{type(exc).__name__}: {exc}")
            raise
        self._frames_mark = frames_compiled_so_far()
        self._tag_trace()
        return self

    def step(self) -> None:
        """End the current step: synchronize the device, then advance the profiler."""
        if self._state != "running":
            raise RuntimeError("step() called outside the profile session's `with` block")
        self._end_step()
        self._prof.step()
        self._steps_run += 1
        self._tag_trace()

    def stop(self) -> None:
        """End the session at a step boundary: the step in progress counts as completed (as
        with :meth:`step`), then the profiler stops and exports what it recorded, and
        ``run.json`` is written, exactly as when the ``with`` block ends normally (and with the
        same checks: ScheduleError when no step was recorded).  Leaving the ``with`` block
        afterwards does nothing more.

        Unlike ``step()`` followed by the end of the block, no new profiler step is opened, so
        the trace does not end with an empty ``ProfilerStep``.
        """
        if self._state != "running":
            raise RuntimeError("stop() called outside the profile session's `with` block")
        self._end_step()
        self._steps_run += 1
        self.__exit__(None, None, None)

    def annotate(self, key: str, value: Any) -> None:
        """Add a top-level section ``key`` to ``run.json`` (e.g. how ``opscope profile`` chose
        the window, the distributed world).  The sections the session writes itself cannot be
        replaced; raises ValueError for those."""
        if key in self._base_keys():
            raise ValueError(f"run.json key {key!r} is written by the session itself")
        self._extra[key] = value
        if self._state == "finished":  # run.json is already on disk: bring it up to date
            self._write_run_json()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        if self._state != "running":
            return False
        stop_error: BaseException | None = None
        if exc is None and self._sync_enabled:
            try:  # a body that stops mid-step still gets its device work into the trace
                self._synchronize()
            except Exception as sync_exc:
                stop_error = sync_exc
        try:
            self._prof.__exit__(exc_type, exc, tb)  # stops; may export the last window
        except Exception as prof_exc:
            if exc is None and stop_error is None:
                stop_error = prof_exc
            else:
                self._warnings.append(
                    f"stopping the profiler also failed: {type(prof_exc).__name__}: {prof_exc}"
                )

        if exc is not None:
            self._finish("error", f"{type(exc).__name__}: {exc}")
            return False  # re-raise the body's exception unchanged
        if stop_error is not None:
            self._finish("error", f"{type(stop_error).__name__}: {stop_error}")
            raise stop_error
        try:
            self._validate()
        except ScheduleError as sched_exc:
            self._finish("schedule_error", str(sched_exc))
            raise
        note = None if self._until_stop else self._schedule.check(self._steps_run)
        if note:
            self._warnings.append(note)
            warnings.warn(f"opscope.profile: {note}", RuntimeWarning, stacklevel=2)
        if self._compiled_in_window:
            note = (
                f"Dynamo compiled during recorded step(s) {self._compiled_in_window}: compile "
                "time is inside the measured window; run warm-up calls inside "
                "opscope.capture.watch_compile() before profiling"
            )
            self._warnings.append(note)
            warnings.warn(f"opscope.profile: {note}", RuntimeWarning, stacklevel=2)
        self._finish("ok", None)
        return False

    def record_compile(self, record: CompileRecord | Mapping[str, Any]) -> None:
        """Store compile metrics (from :func:`watch_compile`) in ``run.json``."""
        entry = record.to_dict() if isinstance(record, CompileRecord) else dict(record)
        self._compile.append(entry)
        if self._state == "finished":  # run.json is already on disk: bring it up to date
            self._write_run_json()

    def run_json(self) -> dict[str, Any]:
        """The ``run.json`` document as it stands."""
        doc = self._base_document()
        for key, value in self._extra.items():
            doc.setdefault(key, value)
        return doc

    def _base_keys(self) -> set[str]:
        return set(self._base_document()) | {"rank"}

    def _base_document(self) -> dict[str, Any]:
        return {
            "schema": RUN_SCHEMA,
            "label": self._label,
            "run_dir": self._run_dir.name if self._run_dir else None,
            "created": self._created,
            "finished": self._finished or None,
            "wall_s": self._wall_s,
            "status": self._status,
            "error": self._error,
            **run_environment(),
            "device": self._device.to_dict(),
            # until_stop and rank appear only when used: run.json of plain sessions is unchanged
            "schedule": {**self._schedule.to_dict(), "until_stop": True}
            if self._until_stop
            else self._schedule.to_dict(),
            "steps": {
                "needed": self._steps_needed(),
                "run": self._steps_run,
                "first_window": self._steps_needed()
                if self._until_stop
                else self._schedule.first_window_steps,
                "active": list(range(self._schedule.first_active_step, self._steps_run))
                if self._until_stop
                else self._schedule.active_steps(),
            },
            "profiler": {
                **self._options,
                "activities": self._device.to_dict()["activities"],
                "sync": self._sync_enabled,
                # CPU ops are synchronous: no wait, so no range in the trace
                "sync_annotation": SYNC_ANNOTATION
                if self._sync_enabled and self._device.is_accelerator
                else None,
            },
            "traces": list(self._traces),
            "compile": list(self._compile),
            "compiled_in_window": list(self._compiled_in_window),
            "neuron": self._neuron.info if self._neuron is not None else None,
            "warnings": list(self._warnings),
            "run_info": self._run_info,
            **({"rank": self._rank} if self._rank is not None else {}),
        }

    # -- internals --------------------------------------------------------------------------

    def _profiler_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            # a hand-made DeviceSpec may leave activities empty: the CPU activity always works
            "activities": list(self._device.activities) or [torch.profiler.ProfilerActivity.CPU],
            "schedule": self._window.to_torch(),
            "on_trace_ready": self._on_trace_ready,
            **self._options,
        }
        if self._device.kind == "neuron":
            self._neuron = setup_neuron_capture(self.run_dir, self._neuron_options)
            if self._neuron.active:
                kwargs["experimental_config"] = self._neuron.config
            else:
                self._warnings.append(str(self._neuron.info.get("reason")))
        elif self._neuron_options:
            self._warnings.append(
                f"neuron_config ignored: the device is {self._device.torch_device}, not neuron"
            )
        return kwargs

    def _steps_needed(self) -> int:
        # an open-ended window needs one recorded step; it has no upper bound
        return self._schedule.first_active_step + 1 if self._until_stop else self.steps

    def _validate(self) -> None:
        if not self._until_stop:
            self._schedule.validate(self._steps_run)
        elif self._steps_run <= self._schedule.first_active_step:
            raise ScheduleError(
                f"the capture ended after {self._steps_run} step(s), before its first recorded "
                f"step ({self._schedule.describe()}): nothing was recorded"
            )

    def _end_step(self) -> None:
        """What ending a step means besides advancing the profiler: wait for the device, note
        whether Dynamo compiled during a recorded step."""
        index = self._steps_run
        if self._sync_enabled:
            self._synchronize()
        frames = frames_compiled_so_far()
        if frames is None or self._frames_mark is None:
            if frames is None and UNREADABLE_FRAMES not in self._warnings:
                self._warnings.append(UNREADABLE_FRAMES)
        elif frames > self._frames_mark and self._window.is_active(index):
            self._compiled_in_window.append(index)
        self._frames_mark = frames

    def _trace_name(self, cycle: int) -> str:
        return trace_name(cycle) if self._rank is None else rank_trace_name(self._rank, cycle)

    def _write_run_json(self) -> None:
        if self._run_dir is None:
            return
        doc = self.run_json()
        if self._rank is None:
            write_json(self._run_dir / RUN_JSON, doc)
            return
        # each rank writes its own document; rank 0's is also the folder's run.json
        own = self._run_dir / rank_run_json(self._rank)
        own.parent.mkdir(parents=True, exist_ok=True)
        write_json(own, doc)
        if self._rank == 0:
            write_json(self._run_dir / RUN_JSON, doc)

    def _synchronize(self) -> None:
        if not self._device.is_accelerator:
            return  # CPU ops are synchronous: nothing to wait for, no range to add
        with torch.profiler.record_function(SYNC_ANNOTATION):
            self._device.synchronize()

    def _tag_trace(self) -> None:
        """Name the device kind in the trace's metadata, once per recorded window.

        Kineto drops metadata added while the profiler is idle (wait steps), so this runs when
        the current step is recorded.
        """
        index = self._steps_run
        if not self._window.is_active(index):
            return
        cycle = (index - self._window.skip_first) // self._window.cycle + 1
        if cycle == self._metadata_cycle:
            return
        self._metadata_cycle = cycle
        try:
            self._prof.add_metadata(DEVICE_KIND_METADATA, self._device.kind)
        except Exception as exc:  # metadata is a convenience: never fail the run for it
            self._warnings.append(f"could not add trace metadata: {type(exc).__name__}: {exc}")

    def _on_trace_ready(self, prof: Any) -> None:
        """Export the window just recorded, once, to the next ``trace*.json.gz``."""
        name = self._trace_name(len(self._traces) + 1)
        run_dir = self.run_dir
        started = time.time()
        neuron = self._neuron
        if neuron is not None and neuron.export_trace is not None:
            try:
                neuron.export_trace(prof)
            except Exception as exc:
                self._warnings.append(
                    f"NeuronProfiler.export_trace failed: {type(exc).__name__}: {exc}"
                )
        # Export beside the run folder's root and rename, so a crash never leaves half a
        # trace.json.gz; the name keeps the .gz suffix because torch gzips by suffix.  Every
        # rank's partial file has a name of its own at the root (the trace reader would take
        # traces/.partial-* for a rank), so no rank creates or removes a folder another rank is
        # writing into.
        partial = run_dir / f".partial-{name.replace('/', '-')}"
        try:
            prof.export_chrome_trace(str(partial))
        except RuntimeError as exc:
            found = (
                find_exported_trace(neuron.output_dir, started)
                if neuron is not None and "already saved" in str(exc)
                else None
            )
            if found is None:
                raise
            # The Neuron exporter saved the Kineto trace itself (torch allows one save per
            # window): keep a gzip copy under the usual name.
            copy_as_gzip(found, partial)
            self._warnings.append(f"{name}: copied from the Neuron export {found.name}")
        (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, run_dir / name)
        self._traces.append(name)

    def _finish(self, status: str, error: str | None) -> None:
        self._status = status
        self._error = error
        self._state = "finished"
        self._finished = datetime.now().astimezone().isoformat(timespec="seconds")
        self._wall_s = round(time.perf_counter() - self._t0, 6)
        self._write_run_json()


def profile(
    *,
    device: str | DeviceSpec | None = None,
    wait: int = 2,
    warmup: int = 1,
    active: int = 1,
    repeat: int = 1,
    skip_first: int = 0,
    record_shapes: bool = True,
    with_stack: bool = False,
    profile_memory: bool = False,
    with_flops: bool = False,
    out: str | os.PathLike[str] = "opscope-runs",
    label: str | None = None,
    sync: bool = True,
    neuron_config: Mapping[str, Any] | None = None,
    run_info: Mapping[str, Any] | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    rank: int | None = None,
    until_stop: bool = False,
) -> ProfileSession:
    """A profiling session over ``torch.profiler.profile``; see the module docstring.

    ``device``: a name (``"cuda:1"``, ``"neuron"``, …), a :class:`DeviceSpec`, or None for the
    first accelerator found.  ``wait``/``warmup``/``active``/``repeat``/``skip_first``: the
    schedule (loop ``p.steps`` times).  ``record_shapes``…``with_flops``: as in torch.profiler.
    ``out``/``label``: the run folder is ``out/<YYYYmmdd-HHMMSS>-<label>``.  ``sync``:
    synchronize the device at each step.  ``neuron_config``: extra ``NeuronConfig`` keywords.
    ``run_info``: extra JSON-able facts stored in ``run.json``.  ``run_dir``: use this folder
    (created if missing; the ranks of one run share it) instead of a new one under ``out``.
    ``rank``: this process's rank: its trace is ``traces/rank<N>.json.gz``, its run document
    ``ranks/rank<N>.json`` (and ``run.json`` on rank 0).  ``until_stop``: record from the first
    active step until :meth:`ProfileSession.stop` or the end of the block (``active`` and
    ``repeat`` are then ignored).

    Raises DeviceError (unknown/unavailable device) and ScheduleError (bad schedule) at once.
    """
    spec = device if isinstance(device, DeviceSpec) else resolve_device(device)
    schedule = Schedule(
        wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first
    )
    return ProfileSession(
        device=spec,
        schedule=schedule,
        record_shapes=record_shapes,
        with_stack=with_stack,
        profile_memory=profile_memory,
        with_flops=with_flops,
        out=out,
        label=label,
        sync=sync,
        neuron_config=neuron_config,
        run_info=run_info,
        run_dir=run_dir,
        rank=rank,
        until_stop=until_stop,
    )


__all__ = [
    "DEVICE_KIND_METADATA",
    "SYNC_ANNOTATION",
    "ProfileSession",
    "profile",
]
