"""What the explorer shows, as JSON-ready data: a thin adapter over the core's service layer.

A :class:`Session` holds one trace (or two, for Compare) opened in a
:class:`~opscope.service.Workspace`, which keeps each trace's report and
:class:`~opscope.trace.viewport.Viewport`; each method is one API answer.  No analysis here.
The only conversion is of absolute nanosecond times into times relative to the index origin
(``t``), which JavaScript numbers represent exactly.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opscope.analysis.report import Report
from opscope.errors import OpscopeError
from opscope.render.finding_groups import group_findings
from opscope.service import OpenTrace, Workspace
from opscope.trace import Trace
from opscope.trace.viewport import Viewport

EXPLORER_SCHEMA = "opscope.explorer/1"


def with_relative_times(report: dict[str, Any], origin_ns: int) -> dict[str, Any]:
    """A copy of the report whose finding evidence also carries ``t0``/``t1`` relative times."""
    out = copy.copy(report)
    findings = []
    for finding in report.get("findings") or []:
        f = dict(finding)
        ev = []
        for item in f.get("evidence") or []:
            e = dict(item) if isinstance(item, dict) else {"event_ids": item}
            if isinstance(e.get("start_ns"), int):
                e["t0"] = e["start_ns"] - origin_ns
            if isinstance(e.get("end_ns"), int):
                e["t1"] = e["end_ns"] - origin_ns
            ev.append(e)
        f["evidence"] = ev
        findings.append(f)
    out["findings"] = findings
    out["explorer"] = {"schema": EXPLORER_SCHEMA, "origin_ns": str(origin_ns)}
    if any(f.get("rank") is not None for f in findings):  # a job: the same finding once
        out["explorer"]["finding_groups"] = [
            {"ids": [m.get("id") for m in g.members], "label": g.rank_label(), "spread": g.spread()}
            for g in group_findings(findings)
        ]
    return out


class Side:
    """One analysed trace, as the explorer shows it (an open trace of the workspace).  The
    report is computed on first use (or in the background, see ``OpenTrace.prefetch``): the
    timeline's answers never wait for it."""

    def __init__(self, opened: OpenTrace) -> None:
        self.opened = opened
        self._data: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def data(self) -> dict[str, Any]:
        with self._lock:
            if self._data is None:
                self._data = with_relative_times(self.opened.data, self.opened.index.origin_ns)
            return self._data

    @property
    def report(self) -> Report:
        return self.opened.report

    @property
    def index(self) -> Viewport:
        return self.opened.index

    @classmethod
    def from_trace(
        cls, trace: Trace, report: Report | None = None, workspace: Workspace | None = None
    ) -> Side:
        ws = workspace if workspace is not None else Workspace()
        opened = ws.add(trace, report=report)
        return cls.of(opened)

    @classmethod
    def of(cls, opened: OpenTrace) -> Side:
        return cls(opened)


#: a gzipped trace inflates about this much (real traces: 5-30x): its on-disk size times this
#: is what decides whether it is large enough for a preview
GZIP_GUESS = 8


def wants_preview(path: Path, preview_bytes: int) -> bool:
    """Whether ``path`` is one trace file large enough that its head is worth painting while
    the whole of it loads: a Kineto JSON file (plain or gzipped) of more than twice
    ``preview_bytes`` (gzip: its size on disk times :data:`GZIP_GUESS`)."""
    if preview_bytes <= 0 or not path.is_file():
        return False
    from opscope.trace import formats
    from opscope.trace.formats import kineto
    from opscope.trace.readers import is_gzip

    try:
        if formats.detect(path).name != kineto.NAME:
            return False
        size = path.stat().st_size * (GZIP_GUESS if is_gzip(path) else 1)
    except (OSError, OpscopeError):
        return False  # the whole load says what is wrong with it
    return size > 2 * preview_bytes


class Preview:
    """A large trace's head (:func:`~opscope.trace.formats.kineto.load_head`), shown while the
    whole trace loads: the page asks for it as ``side=preview``."""

    def __init__(self, trace: Trace, head_bytes: int, file_bytes: int, gzip: bool) -> None:
        self.trace = trace
        self.head_bytes = head_bytes
        self.file_bytes = file_bytes
        self.gzip = gzip

    def describe(self) -> dict[str, Any]:
        """``events`` of the head, its ``bytes`` of JSON, the file's size on disk
        (``file_bytes``) and whether that is gzipped (``gzip``)."""
        return {
            "events": len(self.trace),
            "bytes": self.head_bytes,
            "file_bytes": self.file_bytes,
            "gzip": self.gzip,
        }


class Session:
    """The explorer's data for one path (and optionally a second one to compare with): the
    explorer's view of a :class:`~opscope.service.Workspace` holding them as ``a`` and ``b``,
    whose every answer it passes on.

    A session opened on one large trace (:meth:`open_previewed`) answers at once: its
    ``preview`` side is the trace's head while the whole trace loads in a thread; every
    question of ``a`` waits for that load (:meth:`status` says where it is)."""

    def __init__(self, a: Side | None, b: Side | None = None) -> None:
        self._a = a
        self.b = b
        self.preview: Preview | None = None
        self._loaded = threading.Event()
        self._error: BaseException | None = None
        self._started = time.monotonic()
        self._load_s: float | None = None
        self.workspace = Workspace()
        if a is not None:
            self.workspace.adopt(a.opened, "a")
            self._loaded.set()
            self._load_s = 0.0
        if b is not None:
            self.workspace.adopt(b.opened, "b")

    @property
    def a(self) -> Side:
        """The trace (waits while it loads; its load's error is raised here)."""
        self._loaded.wait()
        if self._error is not None:
            raise self._error
        assert self._a is not None
        return self._a

    @classmethod
    def open(
        cls,
        path_a: str | Path,
        path_b: str | Path | None = None,
        *,
        graph_capture: str | Path | bool | None = None,
        preview_bytes: int = 0,
        on_loaded: Callable[[Session], None] | None = None,
    ) -> Session:
        """Open and index the trace(s).  ``preview_bytes`` > 0: a single trace larger than
        twice that (:func:`wants_preview`) is served at once from its head, the whole trace
        loading behind it (:meth:`open_previewed`; ``on_loaded`` is called when it is)."""
        if path_b is None and wants_preview(Path(path_a), preview_bytes):
            return cls.open_previewed(
                path_a, preview_bytes, graph_capture=graph_capture, on_loaded=on_loaded
            )
        ws = Workspace()
        a = Side.of(ws.open(path_a, handle="a", prefetch=True, graph_capture=graph_capture))
        b = Side.of(ws.open(path_b, handle="b", prefetch=True)) if path_b is not None else None
        # the timeline's index now, so that the first window is answered at once
        for side in (a, b):
            if side is not None:
                _ = side.index
        return cls(a, b)

    @classmethod
    def open_previewed(
        cls,
        path: str | Path,
        preview_bytes: int,
        *,
        graph_capture: str | Path | bool | None = None,
        on_loaded: Callable[[Session], None] | None = None,
    ) -> Session:
        """The session of one trace file, answering from its first ``preview_bytes``
        decompressed bytes at once (their events indexed as the ``preview`` side) while the
        whole file loads, is indexed and analysed in a thread."""
        from opscope.trace.formats.kineto import load_head
        from opscope.trace.readers import is_gzip

        p = Path(path)
        head = load_head(p, preview_bytes)  # a file that cannot be read fails here, at once
        session = cls(None)
        session.preview = Preview(head, preview_bytes, p.stat().st_size, is_gzip(p))
        opened = session.workspace.add(head, path=str(p), handle="preview", make_default=False)
        _ = opened.index

        def work() -> None:
            try:
                ws = Workspace()
                side = Side.of(ws.open(p, handle="a", prefetch=True, graph_capture=graph_capture))
                _ = side.index
            except BaseException as exc:  # raised to whoever asks for the trace
                session._error = exc
            else:
                session._a = side
                session.workspace.adopt(side.opened, "a")
            session._load_s = time.monotonic() - session._started
            session._loaded.set()
            if on_loaded is not None:
                on_loaded(session)

        threading.Thread(target=work, name="opscope-explorer-load", daemon=True).start()
        return session

    def status(self) -> dict[str, Any]:
        """Whether the whole trace is loaded (``loaded``), its load's ``error``, the
        ``preview`` shown meanwhile (None when none is) and the seconds since the session
        began (``elapsed_s``; ``load_s`` once loaded)."""
        loaded = self._loaded.is_set()
        return {
            "loaded": loaded and self._error is None,
            "error": None if self._error is None else str(self._error),
            "preview": None if self.preview is None else self.preview.describe(),
            "elapsed_s": round(time.monotonic() - self._started, 3),
            "load_s": None if self._load_s is None else round(self._load_s, 3),
        }

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Wait for the whole trace (True when it is loaded or failed)."""
        return self._loaded.wait(timeout)

    def side(self, name: str) -> Side:
        if name == "b":
            if self.b is None:
                raise KeyError("no second trace")
            return self.b
        return self.a

    def _handle(self, side: str) -> str:
        if side == "preview":
            if self.preview is None:
                raise KeyError("no preview")
            return "preview"
        self.side(side)  # no second trace: KeyError; the trace still loading: wait
        return "b" if side == "b" else "a"

    def report(self, side: str = "a") -> dict[str, Any]:
        """The report as the page takes it: the critical path's segments left out (the page
        asks /api/critical_path for the longest of them; at 10M events all of them are about
        2 GB of JSON, more than a browser fetches), their count kept as ``segments_total``."""
        data = dict(self.side(side).data)
        data["explorer"] = {**data["explorer"], "compare": self.b is not None, "mode": "server"}
        cp = data.get("critical_path")
        if isinstance(cp, dict) and "segments" in cp:
            segments = cp.get("segments") or []
            data["critical_path"] = {**cp, "segments": [], "segments_total": len(segments)}
        return data

    def lanes(self, side: str = "a") -> dict[str, Any]:
        """The lanes; of the ``preview`` side, with ``preview`` saying what it holds."""
        handle = self._handle(side)
        out = self.workspace.lanes(handle)
        if handle == "preview" and self.preview is not None:
            out = {**out, "preview": self.preview.describe()}
        return out

    def window(
        self, lanes: list[int] | None, t0: int, t1: int, px: int, side: str = "a"
    ) -> dict[str, Any]:
        return self.workspace.window(lanes, t0, t1, px, self._handle(side))

    def event(self, event_id: int, side: str = "a") -> dict[str, Any] | None:
        return self.workspace.event(event_id, self._handle(side))

    def chain(self, event_id: int, side: str = "a") -> dict[str, Any]:
        return self.workspace.chain(event_id, self._handle(side))

    def collective(self, event_id: int, side: str = "a") -> dict[str, Any]:
        return self.workspace.collective(event_id, self._handle(side))

    def critical_path(self, side: str = "a") -> dict[str, Any]:
        return self.workspace.critical_path(self._handle(side))

    def occurrences(self, name: str, side: str = "a") -> dict[str, Any]:
        return self.workspace.occurrences(name, self._handle(side))

    def diff(self) -> dict[str, Any] | None:
        return None if self.b is None else self.workspace.diff("a", "b")
