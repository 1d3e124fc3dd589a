"""``opscope profile``'s engine: run a whole program under the profiler and capture its steps.

Contract: :func:`profile_program` runs a :class:`~.program.Program` in this process (as the
interpreter would, see :mod:`.program`), marks the end of each of its steps without changing it
(:mod:`.stepmarks`, :mod:`.active`), records one or more windows of steps with
:class:`~.session.ProfileSession`, and returns a :class:`ProfileResult`: the program's exit
code, the run folders written, and one-line messages about anything that kept a window from
being recorded.  It never lets profiling break the program: a profiler failure ends the capture
and is reported, the program runs on.

Steps (the first kind that marks one claims the run; the others are ignored and counted):

- each ``optimizer.step()`` of the first optimizer that steps (a second optimizer in the same
  loop would otherwise double the step count);
- with ``step_fn``: each completed call of that function (then optimizers are not watched);
- each ``opscope.step()`` the program calls.

Windows (``RunnerOptions``):

- default: the schedule (``skip_first``/``wait``/``warmup``/``active``/``repeat``) counted from
  the program's start; the session opens before the program runs and closes as soon as the
  schedule is complete, so the rest of the program runs unprofiled;
- ``duration_s`` (with ``delay_s``, default 0): recording starts at the first step boundary
  after ``delay_s`` seconds (at the program's start when there is no delay) and takes every
  step that *starts* within ``duration_s`` seconds of that moment; the window is counted from
  when recording started, because starting the profiler can take seconds the first time;
- ``delay_s`` alone: at the first step that starts after ``delay_s`` seconds, ``warmup`` then
  ``active`` steps (``repeat`` times);
- on demand: each SIGUSR2 starts, at the next step, a capture of ``warmup`` then ``active``
  steps into a new run folder (``on_demand`` turns the start-of-program window off).

Failure: when the program raises, exits or is interrupted, an open window is stopped cleanly
(what was recorded is exported, ``run.json`` says ``error``) and the program's exit code is
returned (1 for an uncaught exception, 130 for KeyboardInterrupt).

Several ranks (``RANK``/``WORLD_SIZE`` set, more than one rank): every rank records the same
schedule steps into one shared run folder (:mod:`.distributed`), as ``traces/rank<N>.json.gz``.
Time windows and signals are per process: ranks agree on them only as far as their clocks and
their signals do.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opscope.capture.devices import QUERY_ERRORS, DeviceSpec, resolve_device
from opscope.capture.distributed import World, agreed_run_dir, detect, process_groups
from opscope.capture.loader_workers import LOADER_FOLDER, LoaderWorkerPatch
from opscope.capture.program import Program, ProgramOutcome, load_program
from opscope.capture.schedule import Schedule
from opscope.capture.stepclaims import StepClaims
from opscope.capture.stepmarkers import StepMarkers
from opscope.errors import OpscopeError, ScheduleError

Log = Callable[[str], None]

#: The hint given whenever no step was marked.
HOW_TO_MARK = (
    "opscope profile ends a step at each optimizer.step(); a program without an optimizer can "
    "name its step function (--step-fn module:function or --step-fn script.py:function) or call "
    "opscope.step() once per iteration"
)

# torch warns about warmup=0, which a time window uses on purpose (every step in it counts)
_NO_WARMUP_WARNING = "Profiler won't be using warmup"


@dataclass(frozen=True)
class RunnerOptions:
    """What to capture and how; see the module docstring for the windows."""

    device: str | None = None
    schedule: Schedule = field(default_factory=Schedule)
    record_shapes: bool = True
    with_stack: bool = False
    profile_memory: bool = False
    out: Path = Path("opscope-runs")
    label: str | None = None
    neuron_config: Mapping[str, Any] | None = None
    step_fn: str | None = None
    delay_s: float | None = None
    duration_s: float | None = None
    on_demand: bool = False
    signals: bool = True
    command: tuple[str, ...] = ()
    #: profile each DataLoader worker into the run folder's loader_traces/
    loader_workers: bool = False

    def __post_init__(self) -> None:
        for name in ("delay_s", "duration_s"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise OpscopeError(f"--{name[:-2]} must be a number of seconds >= 0, got {value}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise OpscopeError("--duration must be > 0 seconds")
        if self.on_demand and (self.delay_s is not None or self.duration_s is not None):
            raise OpscopeError("--on-demand cannot be combined with --delay/--duration")

    @property
    def window(self) -> str:
        """``schedule``, ``time`` (duration), ``delay`` (delay alone) or ``signal`` only."""
        if self.on_demand:
            return "signal"
        if self.duration_s is not None:
            return "time"
        if self.delay_s is not None:
            return "delay"
        return "schedule"

    def triggered_schedule(self) -> Schedule:
        """The schedule of a capture started by a signal or by ``delay_s``: warmup, active."""
        s = self.schedule
        return Schedule(wait=0, warmup=s.warmup, active=s.active, repeat=s.repeat, skip_first=0)


@dataclass
class Capture:
    """One recorded window and where it went."""

    run_dir: Path
    trigger: str  # schedule, time, delay, signal
    first_step: int  # the program's step index (from 0) at which the session started
    steps_run: int  # steps the session counted
    status: str  # the session's status: ok, error, schedule_error
    traces: list[Path]
    error: str | None = None
    # the finished session: the end of the program still adds to its run.json
    session: Any = field(default=None, repr=False, compare=False)

    @property
    def recorded(self) -> bool:
        return bool(self.traces)


@dataclass
class ProfileResult:
    """How the program ended and what was captured."""

    exit_code: int
    outcome: ProgramOutcome | None
    captures: list[Capture]
    steps: int
    step_source: str | None
    messages: list[str]
    world: World | None
    ignored_marks: dict[str, int]

    def print_exception(self) -> None:
        if self.outcome is not None:
            self.outcome.print_exception()


def device_for_rank(name: str | None, world: World | None) -> str | None:
    """The device a rank profiles: an accelerator without an index becomes the rank's own
    (``LOCAL_RANK``, or 0 when each rank sees a single device) instead of the current device
    (0 for every rank at start: each would synchronize, and create a context on, device 0)."""
    if world is None or not world.multi:
        return name
    if name is not None and (":" in name or name.strip().lower() == "cpu"):
        return name
    spec = resolve_device(name)
    if not spec.is_accelerator or spec.backend is None:
        return name
    import torch

    count_fn = getattr(getattr(torch, spec.backend, None), "device_count", None)
    try:
        count = int(count_fn()) if count_fn is not None else 1
    except QUERY_ERRORS:  # resolve_device queries it again and notes the failure
        count = 1
    index = world.local_rank if world.local_rank < count else 0
    return f"{spec.backend}:{index}"


class _Driver:
    """Marks, windows and sessions for one program run."""

    def __init__(self, program: Program, options: RunnerOptions, log: Log) -> None:
        self.program = program
        self.options = options
        self.log = log
        self.world = detect()
        self.multi = self.world is not None and self.world.multi
        self.label = options.label or program.label
        self.spec: DeviceSpec = resolve_device(device_for_rank(options.device, self.world))
        self.base_dir: Path | None = (
            agreed_run_dir(options.out, self.label, self.world)
            if self.world is not None and self.world.multi
            else None
        )
        self.markers = StepMarkers(options.step_fn, self.mark, self._on_signal, options.signals)
        self.claims = StepClaims()

        self.t0 = time.monotonic()
        self.steps = 0
        self.busy = False
        self.session: Any = None  # the open ProfileSession
        self.session_trigger = ""
        self.session_first_step = 0
        self.session_until: float | None = None  # monotonic end of a time window
        self.window_pending = options.window in ("time", "delay")
        self.signals_pending = 0
        self.signal_steps: list[int] = []
        self.captures: list[Capture] = []
        self.messages: list[str] = []
        self.dist_info: dict[str, Any] | None = None

    # -- prefixes and logging ----------------------------------------------------------------

    def say(self, text: str) -> None:
        prefix = f"opscope[rank {self.world.rank}]" if self.multi and self.world else "opscope"
        self.log(f"{prefix}: {text}")

    # -- marks ---------------------------------------------------------------------------------

    def _on_signal(self) -> None:
        self.signals_pending += 1

    def mark(self, source: str, owner: object) -> None:
        """The end of one program step (from any marker)."""
        if self.busy or not self.claims.claim(source, owner):
            return
        self.steps += 1
        self.busy = True
        try:
            self._advance()
        except Exception as exc:  # never break the program for the profiler
            self.messages.append(f"profiling stopped: {type(exc).__name__}: {exc}")
            self._abandon(exc)
        finally:
            self.busy = False

    def _advance(self) -> None:
        now = time.monotonic()
        session = self.session
        if session is not None:
            if self.session_until is not None:
                if now >= self.session_until:  # the next step starts after the window
                    self._close(stop=True)
                else:
                    session.step()
            else:
                session.step()
                if session.steps_run >= session.steps:
                    self._close()
            if self.session is not None:
                return
        self._maybe_start(now)

    def _maybe_start(self, now: float) -> None:
        if self.session is not None:
            return
        if self.signals_pending:
            self.signals_pending = 0  # several signals before a step boundary: one capture
            self.signal_steps.append(self.steps)
            self._open("signal", self.options.triggered_schedule())
            return
        if self.window_pending and now - self.t0 >= (self.options.delay_s or 0.0):
            self.window_pending = False
            if self.options.duration_s is not None:
                self._open("time", Schedule(wait=0, warmup=0, active=1), duration=True)
            else:
                self._open("delay", self.options.triggered_schedule())

    # -- sessions ------------------------------------------------------------------------------

    def start(self) -> None:
        """Open the window that starts with the program, if any."""
        window = self.options.window
        if window == "schedule":
            self._open("schedule", self.options.schedule)
        elif window == "time" and not self.options.delay_s:
            self.window_pending = False
            self._open("time", Schedule(wait=0, warmup=0, active=1), duration=True)

    def _run_dir_for(self, index: int) -> Path | None:
        if self.base_dir is None:
            return None
        return self.base_dir if index == 1 else Path(f"{self.base_dir}-capture{index}")

    def _open(self, trigger: str, schedule: Schedule, duration: bool = False) -> None:
        """Start a session at a step boundary.  With ``duration`` it records until the first
        step boundary ``duration_s`` seconds after recording started: the window is counted
        from then, not from the boundary, because starting the profiler can itself take
        seconds (the first time in a process) and would otherwise eat a short window."""
        from opscope.capture.session import ProfileSession

        index = len(self.captures) + 1
        session = ProfileSession(
            device=self.spec,
            schedule=schedule,
            record_shapes=self.options.record_shapes,
            with_stack=self.options.with_stack,
            profile_memory=self.options.profile_memory,
            out=self.options.out,
            label=self.label,
            neuron_config=self.options.neuron_config,
            run_dir=self._run_dir_for(index),
            rank=self.world.rank if self.multi and self.world else None,
            until_stop=duration,
        )
        session.annotate("capture", self._capture_info(trigger, index))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_NO_WARMUP_WARNING)
            session.__enter__()
        self.session = session
        self.session_trigger = trigger
        self.session_first_step = self.steps
        self.session_until = (
            time.monotonic() + (self.options.duration_s or 0.0) if duration else None
        )
        if trigger != "schedule":
            what = {"signal": "SIGUSR2", "delay": "--delay", "time": "the time window"}[trigger]
            self.say(f"{what}: capturing from step {self.steps} into {session.run_dir}")

    def _capture_info(self, trigger: str, index: int) -> dict[str, Any]:
        return {
            "tool": "opscope profile",
            "command": list(self.options.command),
            "program": {"kind": self.program.kind, "target": self.program.target},
            "argv": [self.program.target, *self.program.args],
            "trigger": trigger,
            "index": index,
            "first_program_step": self.steps,
            "window": {
                "kind": self.options.window,
                "delay_s": self.options.delay_s,
                "duration_s": self.options.duration_s,
            },
            "step_fn": self.options.step_fn,
        }

    def _refresh_dist(self) -> None:
        if not self.multi and self.world is None:
            return
        info = process_groups()
        if info is not None:
            self.dist_info = info

    def _close(
        self,
        *,
        stop: bool = False,
        exc: BaseException | None = None,
    ) -> None:
        session = self.session
        if session is None:
            return
        self.session = None
        self.session_until = None
        if self.world is not None:
            self._refresh_dist()
            session.annotate(
                "distributed", {**self.world.to_dict(), "torch_distributed": self.dist_info}
            )
        error: str | None = None
        try:
            if exc is not None:
                session.__exit__(type(exc), exc, exc.__traceback__)
            elif stop:
                session.stop()
            else:
                session.__exit__(None, None, None)
        except ScheduleError as sched_exc:
            error = str(sched_exc)
        except Exception as prof_exc:
            error = f"the profiler failed: {type(prof_exc).__name__}: {prof_exc}"
        capture = self._capture(session, error)
        self.captures.append(capture)
        if error is not None:
            self.messages.append(self._explain(capture, error))
        elif capture.recorded:
            recorded = [
                capture.first_step + s
                for s in session.run_json()["steps"]["active"]
                if s < capture.steps_run
            ]
            where = (
                f"step{'s' if len(recorded) > 1 else ''} {_span(recorded)}"
                if recorded
                else "the step in progress"
            )
            state = "" if exc is None else " (the program stopped: what was recorded so far)"
            self.say(f"recorded {where} of the program{state} → {capture.run_dir}")

    def _capture(self, session: Any, error: str | None) -> Capture:
        """What the just-closed ``session`` (a ProfileSession) captured."""
        return Capture(
            run_dir=session.run_dir,
            trigger=self.session_trigger,
            first_step=self.session_first_step,
            steps_run=session.steps_run,
            status=session.status,
            traces=list(session.trace_paths),
            error=error,
            session=session,
        )

    def _abandon(self, exc: BaseException) -> None:
        """End the open session after a profiler failure, keeping what it wrote."""
        session = self.session
        if session is None:
            return
        self.session = None
        with contextlib.suppress(Exception):  # already failing: keep the first error
            session.__exit__(type(exc), exc, exc.__traceback__)
        self.captures.append(self._capture(session, f"{type(exc).__name__}: {exc}"))

    def _explain(self, capture: Capture, error: str) -> str:
        if self.steps == 0:
            return self.no_steps_message()
        if capture.status == "schedule_error" and capture.trigger == "schedule":
            return (
                f"{error}. With opscope profile: lower --wait/--warmup/--skip-first, or let "
                "the program run more steps"
            )
        return error

    def no_steps_message(self) -> str:
        target, patch = self.markers.target, self.markers.import_patch
        if target is not None:
            where = f"{target.where}:{target.qualname}"
            if patch is not None and not patch.done:
                return (
                    f"the program never imported {target.where}, so --step-fn {where} "
                    "marked no step: nothing was recorded"
                )
            return (
                f"the program never completed a call of --step-fn {where}, so it marked no "
                "step: nothing was recorded"
            )
        return (
            "the program ran to its end without marking a step, so nothing was recorded: "
            + HOW_TO_MARK
        )

    # -- the end -------------------------------------------------------------------------------

    def place_loader_traces(self, patch: LoaderWorkerPatch) -> None:
        """``--loader-workers``: the workers' traces copied into each run folder's
        ``loader_traces/`` (where the report reads them), then their folder removed; a message
        when there was nothing to record or nothing was written."""
        import shutil

        traces = patch.traces()
        try:
            if not patch.loaders:
                self.messages.append(
                    "--loader-workers: no DataLoader with num_workers > 0 was iterated: "
                    "nothing to record (a loader with num_workers=0 loads in the main process, "
                    "whose trace holds it)"
                )
                return
            if not traces:
                self.messages.append(
                    "--loader-workers: the DataLoader workers wrote no trace by the program's "
                    "end (a loader with persistent_workers=True writes its workers' traces "
                    "when it is deleted: delete it before the program ends)"
                )
                return
            # the folder the report reads (trace.loader_work.LOADER_FOLDER; the capture keeps
            # its own copy of the name, to import nothing of the trace's reading).  A job's
            # report reads none: each rank's go to a folder of their own, for that rank's
            # trace (--loader-traces)
            rank = self.world.rank if self.multi and self.world is not None else None
            folder = LOADER_FOLDER if rank is None else f"{LOADER_FOLDER}-rank{rank}"
            for capture in self.captures:
                dest = capture.run_dir / folder
                dest.mkdir(parents=True, exist_ok=True)
                for f in traces:
                    shutil.copy2(f, dest / f.name)
                where = str(dest)
                if rank is not None:
                    where += (
                        f" (a job's report does not read them: opscope report "
                        f"{capture.run_dir}/traces/rank{rank}.json.gz --loader-traces {dest})"
                    )
                self.say(f"--loader-workers: {len(traces)} loader worker trace(s) in {where}")
        finally:
            shutil.rmtree(patch.folder, ignore_errors=True)

    def finish(self, outcome: ProgramOutcome) -> None:
        exc = outcome.exception
        if exc is None and outcome.exit_code != 0:
            exc = SystemExit(outcome.exit_code)
        self._close(exc=exc)
        patch = self.markers.import_patch
        if patch is not None and patch.error is not None:
            err = patch.error
            self.messages.append(f"--step-fn could not be installed: {err}")
        elapsed = time.monotonic() - self.t0
        if self.window_pending:
            if self.steps == 0:
                self.messages.append(self.no_steps_message())
            else:
                self.messages.append(
                    f"the program ended after {elapsed:.1f} s and {self.steps} steps, before "
                    f"the capture window opened at --delay {self.options.delay_s:g} s: nothing "
                    "was recorded"
                )
        if self.signals_pending:
            self.messages.append(
                "SIGUSR2 arrived but the program marked no step after it: nothing was recorded"
            )
        if self.options.window == "signal" and not self.captures and not self.signals_pending:
            self.messages.append(
                "no SIGUSR2 arrived (--on-demand): nothing was recorded"
                if self.steps
                else self.no_steps_message()
            )
        optimizers = self.markers.optimizers
        if optimizers is not None and optimizers.marked_inside_range:
            self.messages.append(
                "some optimizer steps were marked from inside torch's Optimizer.step range "
                "(the optimizer class was instrumented before opscope): that range may be cut "
                "at step boundaries"
            )
        program_info = {
            "exit_code": outcome.exit_code,
            "exception": f"{type(outcome.exception).__name__}: {outcome.exception}"
            if outcome.exception is not None
            else None,
            "steps_marked": self.steps,
            "step_source": self.claims.source,
            "ignored_marks": dict(self.claims.ignored),
            "wall_s": round(elapsed, 6),
        }
        for capture in self.captures:
            try:
                capture.session.annotate("program", program_info)
            except Exception as exc:  # a run folder removed meanwhile: say so, go on
                self.messages.append(f"{capture.run_dir}: could not update run.json: {exc}")


def _loader_patch(options: RunnerOptions) -> LoaderWorkerPatch | None:
    """``--loader-workers``: the DataLoader patch, installed, its workers' traces written to a
    folder of their own until the program ends (the run folders are made as windows open)."""
    if not options.loader_workers:
        return None
    import tempfile

    patch = LoaderWorkerPatch(
        Path(tempfile.mkdtemp(prefix="opscope-loader-")), with_stack=options.with_stack
    )
    patch.install()
    return patch


def _span(steps: list[int]) -> str:
    """``3–5`` for a run of consecutive steps, else the list."""
    if len(steps) > 1 and steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}–{steps[-1]}"
    return ", ".join(str(s) for s in steps)


def profile_program(program: Program, options: RunnerOptions, log: Log) -> ProfileResult:
    """Run ``program`` under the profiler; see the module docstring.

    Raises OpscopeError (bad ``--step-fn``, unknown device, program not found) before the
    program starts.  A SyntaxError in the program is returned as its outcome (exit code 1),
    as the interpreter would report it.
    """
    driver = _Driver(program, options, log)
    try:
        loaded = load_program(program, driver.markers.transform)
    except SyntaxError as exc:
        failed = ProgramOutcome(exit_code=1, exception=exc.with_traceback(None))
        return ProfileResult(1, failed, [], 0, None, [], driver.world, {})
    driver.markers.install(loaded)
    loaders = _loader_patch(options)
    pid = os.getpid()
    driver.say(
        f"profiling {program.display()} (pid {pid}); to capture the next "
        f"{options.schedule.active} step(s) at any time: kill -USR2 {pid}"
    )
    outcome: ProgramOutcome
    try:
        try:
            driver.start()
        except Exception as exc:
            driver.messages.append(f"profiling could not start: {type(exc).__name__}: {exc}")
        outcome = loaded.execute()
        driver.finish(outcome)
    finally:
        driver.markers.uninstall()
        if loaders is not None:
            loaders.uninstall()
    if loaders is not None:
        driver.place_loader_traces(loaders)
    return ProfileResult(
        exit_code=outcome.exit_code,
        outcome=outcome,
        captures=driver.captures,
        steps=driver.steps,
        step_source=driver.claims.source,
        messages=driver.messages,
        world=driver.world,
        ignored_marks=dict(driver.claims.ignored),
    )


__all__ = [
    "HOW_TO_MARK",
    "Capture",
    "ProfileResult",
    "RunnerOptions",
    "device_for_rank",
    "profile_program",
]
