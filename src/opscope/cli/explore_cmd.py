"""opscope explore: browse a trace in a local web app (timeline, chains, findings, compare)."""

from __future__ import annotations

import argparse
import sys

from opscope.cli.output import add_max_inflate
from opscope.cli.report_cmd import add_graph_capture, graph_capture_arg

HELP = "browse a trace in a local web app: timeline, dependency chains, findings"
DESCRIPTION = """\
Serve the explorer for a trace (file, run folder or folder of per-rank traces) on this machine
and open it in the browser: Summary, Ops, Timeline (zoom/pan with the wheel, drag and W/A/S/D),
Dependency chain (framework op -> runtime launch -> device execution), Findings, and Compare
when a second path is given.  Stop it with Ctrl+C.

The server binds 127.0.0.1 and serves only the app and its JSON API.  --host 0.0.0.0 makes the
trace readable by anyone who can reach this machine (a warning is printed).

examples:
  opscope explore opscope-runs/20261129-101500-naive
  opscope explore before.json.gz after.json.gz --port 8765 --no-open
  opscope explore vllm/graph_execution.json.gz --graph-capture vllm/capture_traces/

--graph-capture attributes the first trace's CUDA/HIP graph replays to the captured ops (see
opscope report --help).

A large trace file (more than twice --preview MiB of JSON) is served at once: the timeline
shows the events of its first --preview MiB, marked as a preview, while the whole trace loads,
then switches to the whole trace; the Summary, Ops and Findings wait for it.  --preview 0
serves nothing before the whole trace is loaded.
"""

#: MiB of a large trace's JSON the timeline shows while the whole of it loads
PREVIEW_MIB = 64


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="trace file, run folder, or folder of per-rank traces")
    p.add_argument("path_b", nargs="?", help="a second trace to compare with (Compare view)")
    p.add_argument("--port", type=int, default=0, help="port (default: 0, a free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    p.add_argument("--no-open", action="store_true", help="do not open a browser")
    p.add_argument(
        "--preview",
        type=int,
        default=PREVIEW_MIB,
        metavar="MIB",
        help="a trace of more than twice this many MiB of JSON: show its first MIB on the "
        "timeline while the whole trace loads (0: no preview; default: %(default)s)",
    )
    add_graph_capture(p)
    add_max_inflate(p)


def run(args: argparse.Namespace) -> int:
    import webbrowser

    from opscope.cli.prepare import prepare
    from opscope.errors import OpscopeError
    from opscope.explorer.data import Session
    from opscope.explorer.server import ExplorerServer

    if not 0 <= args.port <= 65535:
        raise OpscopeError(f"--port {args.port}: expected 0..65535")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"opscope explore: warning: binding {args.host}: anyone who can reach this "
            "machine can read the trace",
            file=sys.stderr,
        )
    if args.preview < 0:
        raise OpscopeError(f"--preview {args.preview}: expected MiB >= 0")
    prepare(args.path, args.path_b, command="explore")

    def loaded(s: Session) -> None:
        st = s.status()
        if st["error"] is not None:
            print(f"opscope explore: the trace failed to load: {st['error']}", file=sys.stderr)
        else:
            print(f"opscope explore: the whole trace is loaded ({st['load_s']:.1f} s)", flush=True)

    session = Session.open(
        args.path,
        args.path_b,
        graph_capture=graph_capture_arg(args),
        preview_bytes=args.preview << 20,
        on_loaded=loaded,
    )
    try:
        server = ExplorerServer(session, args.host, args.port)
    except OSError as exc:
        raise OpscopeError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    print(f"opscope explorer: {server.url}  (Ctrl+C to stop)", flush=True)
    if session.preview is not None:
        pv = session.preview.describe()
        print(
            f"opscope explore: showing a preview (the first {args.preview} MiB, "
            f"{pv['events']:,} events) while the whole trace loads",
            flush=True,
        )
    if not args.no_open:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
