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
from pathlib import Path
from typing import Any

from opscope.analysis.report import Report
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


class Session:
    """The explorer's data for one path (and optionally a second one to compare with): the
    explorer's view of a :class:`~opscope.service.Workspace` holding them as ``a`` and ``b``,
    whose every answer it passes on."""

    def __init__(self, a: Side, b: Side | None = None) -> None:
        self.a = a
        self.b = b
        self.workspace = Workspace()
        self.workspace.adopt(a.opened, "a")
        if b is not None:
            self.workspace.adopt(b.opened, "b")

    @classmethod
    def open(
        cls,
        path_a: str | Path,
        path_b: str | Path | None = None,
        *,
        graph_capture: str | Path | bool | None = None,
    ) -> Session:
        ws = Workspace()
        a = Side.of(ws.open(path_a, handle="a", prefetch=True, graph_capture=graph_capture))
        b = Side.of(ws.open(path_b, handle="b", prefetch=True)) if path_b is not None else None
        # the timeline's index now, so that the first window is answered at once
        for side in (a, b):
            if side is not None:
                _ = side.index
        return cls(a, b)

    def side(self, name: str) -> Side:
        if name == "b":
            if self.b is None:
                raise KeyError("no second trace")
            return self.b
        return self.a

    def _handle(self, side: str) -> str:
        self.side(side)  # no second trace: KeyError
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
        return self.workspace.lanes(self._handle(side))

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
