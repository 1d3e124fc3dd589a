"""The explorer's HTTP server: the app's own assets and a JSON API, nothing else.

Standard library only (:class:`http.server.ThreadingHTTPServer`).  Each endpoint is a few lines
over :class:`opscope.explorer.data.Session`:

==========================================  ====================================================
``GET /``                                    the app (``static/index.html``)
``GET /app.js``, ``/style.css``              its assets (a fixed list: no file-system paths)
``GET /api/report[?side=b]``                 the report (``opscope.report/1`` + ``explorer``)
``GET /api/lanes[?side=b]``                  the lanes, grouped framework / runtime / hardware
``GET /api/events?lanes=&t0=&t1=&px=``       one viewport, level of detail applied
``GET /api/event?id=``                       one event in full (args decoded)
``GET /api/chain?id=``                       its dependency chain
``GET /api/collective?event=``               its collective across the ranks (waits)
``GET /api/critical_path[?side=b]``          the critical path, each segment placed on a lane
``GET /api/occurrences?name=``               the occurrences of a framework op
``GET /api/diff``                            ``opscope.diff/1`` when two traces were given
``GET /api/sections[?side=b]``               the Summary's sections (renderer-escaped HTML)
``GET /api/status``                          whether the trace is loaded; the preview shown
==========================================  ====================================================

A large trace is served at once from its head (``side=preview`` on ``lanes``, ``events``,
``event`` and ``chain``: the head's own events and ids) while the whole of it loads; every
other answer waits for the whole trace.

Security: binds 127.0.0.1 unless told otherwise; answers only requests whose ``Host`` is the
address it serves (no DNS rebinding); a strict Content-Security-Policy (``script-src 'self'``)
and ``nosniff`` on every answer; only GET/HEAD.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from opscope.analysis.critical.path import json_default
from opscope.explorer.data import Session
from opscope.explorer.page import asset, server_page
from opscope.render import html
from opscope.service import ServiceError

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

# The only files the server ever sends: URL path -> (asset name, content type).
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}


class BadRequest(Exception):
    pass


def _int(q: dict[str, list[str]], key: str, default: int | None = None) -> int:
    vals = q.get(key)
    if not vals:
        if default is None:
            raise BadRequest(f"missing parameter {key}")
        return default
    try:
        value = float(vals[0])
    except ValueError:
        raise BadRequest(f"parameter {key} must be a number") from None
    if not math.isfinite(value) or not _INT64_MIN <= value <= _INT64_MAX:
        raise BadRequest(f"parameter {key} is out of range")
    return int(value)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1024  # the last float below 2**63 that fits


def _side(q: dict[str, list[str]]) -> str:
    """``a`` (the default), ``b`` (the compared trace) or ``preview`` (a large trace's head,
    answered while the whole trace loads)."""
    side = q.get("side", ["a"])[0]
    return side if side in ("b", "preview") else "a"


def _lanes(q: dict[str, list[str]]) -> list[int] | None:
    text = q.get("lanes", [""])[0]
    if not text:
        return None
    try:
        lanes = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise BadRequest("lanes must be comma-separated integers") from None
    if any(not 0 <= x < 2**31 for x in lanes):
        raise BadRequest("lanes out of range")
    return lanes


Endpoint = Callable[[Session, dict[str, list[str]]], Any]

ENDPOINTS: dict[str, Endpoint] = {
    "/api/report": lambda s, q: s.report(_side(q)),
    "/api/lanes": lambda s, q: s.lanes(_side(q)),
    "/api/events": lambda s, q: s.window(
        _lanes(q), _int(q, "t0"), _int(q, "t1"), _int(q, "px", 1000), _side(q)
    ),
    "/api/event": lambda s, q: s.event(_int(q, "id"), _side(q)),
    "/api/chain": lambda s, q: s.chain(_int(q, "id"), _side(q)),
    "/api/collective": lambda s, q: s.collective(_int(q, "event"), _side(q)),
    "/api/critical_path": lambda s, q: s.critical_path(_side(q)),
    "/api/occurrences": lambda s, q: s.occurrences(q.get("name", [""])[0], _side(q)),
    "/api/diff": lambda s, q: s.diff(),
    "/api/status": lambda s, q: s.status(),
    # the Summary's sections (study, roofline, Neuron engines): the renderer's escaped HTML,
    # asked for once the report is there so that the page itself never waits for the analysis
    "/api/sections": lambda s, q: {"html": html.sections(s.report(_side(q)))},
}


class Handler(BaseHTTPRequestHandler):
    server: ExplorerServer
    server_version = "opscope-explorer"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            # the page may have moved on (an aborted viewport fetch)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

    def _error(self, status: HTTPStatus, message: str) -> None:
        body = orjson.dumps({"error": message})
        self._send(status, body, "application/json")

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").lower()
        return host in self.server.allowed_hosts

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if not self._host_ok():
            self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
            return
        url = urlsplit(self.path)
        path = url.path
        if path in ASSETS:
            name, ctype = ASSETS[path]
            text = self.server.page if name == "index.html" else asset(name)
            self._send(HTTPStatus.OK, text.encode("utf-8"), ctype)
            return
        endpoint = ENDPOINTS.get(path)
        if endpoint is None:
            self._error(HTTPStatus.NOT_FOUND, "not found")
            return
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            result = endpoint(self.server.session, query)
        except BadRequest as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return
        except KeyError:
            self._error(HTTPStatus.NOT_FOUND, "no such item")
            return
        except ServiceError as exc:  # a question with no answer here (no collective...)
            self._error(HTTPStatus.NOT_FOUND, str(exc))
            return
        except (OverflowError, ValueError) as exc:  # a parameter the service cannot take
            self._error(HTTPStatus.BAD_REQUEST, f"bad parameter: {exc}")
            return
        except Exception as exc:  # a defect: answer it, never drop the connection
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            return
        if result is None:
            self._error(HTTPStatus.NOT_FOUND, "no such item")
            return
        body = orjson.dumps(result, default=json_default, option=orjson.OPT_SERIALIZE_NUMPY)
        self._send(HTTPStatus.OK, body, "application/json")

    def _refuse(self) -> None:
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, "read-only")

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse


class ExplorerServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer bound to one Session."""

    daemon_threads = True

    def __init__(
        self, session: Session, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False
    ) -> None:
        super().__init__((host, port), Handler)
        self.session = session
        self.verbose = verbose
        self.page = server_page()
        bound = self.server_address[1]
        names = {host, "127.0.0.1", "localhost", "[::1]"}
        self.allowed_hosts = {f"{h}:{bound}" for h in names} | (names if bound == 80 else set())

    @property
    def url(self) -> str:
        host = str(self.server_address[0])
        return f"http://{host}:{self.server_address[1]}/"

    def start_background(self) -> threading.Thread:
        """Serve from a daemon thread (tests and benchmarks); stop with :meth:`stop`."""
        thread = threading.Thread(target=self.serve_forever, name="opscope-explorer", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
