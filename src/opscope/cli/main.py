"""``opscope`` entry point: a registry of subcommands, one module each under ``opscope.cli``.

Each command module defines ``HELP`` (one line), ``DESCRIPTION`` (the ``--help`` text, with an
example), ``add_arguments(parser)`` and ``run(args) -> int``.  Modules import their heavy
dependencies inside ``run`` so that ``opscope --help`` stays fast and never imports torch.

Exit codes: 0 success, 1 bad input (one-line reason on stderr), 2 bad usage (argparse, or a
:class:`~opscope.errors.UsageError`), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

from opscope import __version__

# Order is the order shown in --help.
COMMANDS = ("demo", "optimize", "profile", "report", "explore", "diff", "sql", "schema", "mcp")

# Commands that run torch's profiler in this process: its start/stop chatter on stderr is
# dropped there (opscope.capture.stderr_filter); everything else on stderr passes.
PROFILER_COMMANDS = ("demo", "profile", "optimize")
# Commands that analyse whole traces and end once they have written their answer: their
# large arrays come from the heap and stay there (see trace_reader_memory).
HEAP_ONLY_COMMANDS = ("report", "diff", "compare")

# Former names still accepted for one release (listed last in --help): old name -> command.
ALIASES = {"compare": "diff"}


def _command_modules(only: str | None = None) -> dict[str, ModuleType]:
    mods: dict[str, ModuleType] = {}
    for name in COMMANDS:
        if only is not None and name != only:
            continue
        modname = f"opscope.cli.{name}_cmd"
        if importlib.util.find_spec(modname) is None:
            continue  # not built yet
        mods[name] = importlib.import_module(modname)
    return mods


def named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option: the top-level
    options take no value), as its module is named (an alias as its command); None when
    that word is no command, or there is none."""
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is None:
        return None
    word = ALIASES.get(word, word)
    return word if word in COMMANDS else None


def build_parser(
    only: str | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, ModuleType]]:
    """The command line's parser and the command modules by name; ``only``: that command's
    parser alone (and its former name's), the others neither imported nor built."""
    parser = argparse.ArgumentParser(
        prog="opscope",
        description="Where is the time actually going? Profile PyTorch on any device, read "
        "any trace, and get ranked bottleneck findings.",
        epilog="Run 'opscope COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"opscope {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show full tracebacks instead of one-line errors"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    mods = _command_modules(only)
    for name, mod in mods.items():
        p = sub.add_parser(
            name,
            help=mod.HELP,
            description=mod.DESCRIPTION,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        _comm_kernels_option(p)
        mod.add_arguments(p)
    for old, new in ALIASES.items():
        if new not in mods:
            continue
        mod = mods[new]
        p = sub.add_parser(
            old,
            help=f"deprecated: the former name of '{new}'",
            description=f"'opscope {old}' is the former name of 'opscope {new}' and will be "
            f"removed;\nit runs 'opscope {new}'.\n\n{mod.DESCRIPTION}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        mod.add_arguments(p)
        mods[old] = mod
    return parser, mods


def _comm_kernels_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--comm-kernels",
        metavar="REGEX",
        action="append",
        default=argparse.SUPPRESS,
        help=(
            "count device kernels whose name matches REGEX as communication (an in-house "
            "library's; repeatable), e.g. --comm-kernels 'myccl::\\w+_kernel'"
        ),
    )


def command_settings(args: argparse.Namespace) -> contextlib.ExitStack:
    """The command's reading settings, in force while the command runs and gone after it,
    as settings of the process, never its environment: ``--comm-kernels`` (each pattern
    checked: a bad one is a usage error) and ``--max-inflate``.  Ingest workers forked from
    this process, and a cluster's tasks (their settings object), get them too."""
    from opscope.errors import UsageError
    from opscope.trace.commuser import check_pattern, process_comm_kernels
    from opscope.trace.readers import process_inflate_bound

    stack = contextlib.ExitStack()
    patterns: Sequence[str] = getattr(args, "comm_kernels", None) or ()
    for regex in patterns:
        why = check_pattern(regex)
        if why is not None:
            raise UsageError(f"--comm-kernels: {why}")
    if patterns:
        stack.enter_context(process_comm_kernels(*patterns))
    stack.enter_context(process_inflate_bound(getattr(args, "max_inflate", None)))
    return stack


def trace_reader_memory(*, heap_only: bool = False) -> None:
    """Memory settings for a command that reads traces (docs/trace-engine.md, "Memory
    settings of the commands"):

    * Arrow's buffers from the C library's allocator, as NumPy's are (unless
      ``ARROW_DEFAULT_MEMORY_POOL`` says otherwise): with Arrow's own default (mimalloc) the
      memory one frees is not the other's to reuse, and a report's peak RSS is 14-18 % higher
      (30-40 MB on 14k-100k-event traces);
    * glibc told to keep freed memory for the next arrays (``OPSCOPE_MALLOPT=0``: not):
      handing it back and faulting fresh zeroed pages in again took a third of a 1M-event
      report's time in the kernel; the report is about 17 % faster with it.  ``heap_only``
      (``report`` and ``diff``, which analyse whole traces and end once they have written
      their answer): the largest arrays too, from one arena (:func:`_keep_freed_memory`),
      with the heap's free pages handed back between the analysis's largest parts
      (:mod:`opscope.trace.heap`: the holes freed temporaries leave are not counted on top
      of the next part's peak; ``OPSCOPE_TRIM=0``: not);
      the others (``explore`` and ``mcp`` go on running; ``sql`` runs DuckDB's threads)
      still map those and give them back when they are freed.

    Only for the commands that read traces, before Arrow is loaded (Arrow reads the variable
    once); never for those that run the user's program (``PROFILER_COMMANDS``): its memory
    is its own.  The library leaves both to its caller."""
    import os

    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if os.environ.get("OPSCOPE_MALLOPT", "1") != "0":
        _keep_freed_memory(heap_only=heap_only)
        if heap_only and os.environ.get("OPSCOPE_TRIM", "1") != "0":
            from opscope.trace.heap import trim_between_parts

            trim_between_parts()


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD, _M_MMAP_MAX, _M_ARENA_MAX = -1, -2, -3, -4, -8


def _keep_freed_memory(*, heap_only: bool) -> None:
    """glibc's allocator told to keep the memory the analysis frees for its next arrays
    instead of handing it back to the kernel and faulting fresh zeroed pages in again.

    Blocks up to 32 MB (glibc's largest mmap threshold) come from the heap and stay there
    once freed (trim threshold 1 GB, top pad 64 MB).  ``heap_only``: larger ones too (no
    mmap at all), and every thread allocates from the main heap (one arena; a thread's own
    arena maps its large blocks whatever the settings): a 10M-event trace's arrays are
    hundreds of MB, and mapping each afresh zeroed about 60 GB of pages in a report, 40-60 %
    of its CPU time in the kernel."""
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    mallopt(_M_TOP_PAD, 64 << 20)
    if heap_only:
        mallopt(_M_MMAP_MAX, 0)
        mallopt(_M_ARENA_MAX, 1)


def main(argv: Sequence[str] | None = None) -> int:
    # the command named is the only one built (its module alone imported); --help, a
    # misspelt command or none build them all, for the list and argparse's suggestions
    words = list(sys.argv[1:] if argv is None else argv)
    parser, mods = build_parser(named_command(words))
    args, extra = parser.parse_known_args(words)
    late = len(extra) == 1 and not extra[0].startswith("-")
    if late and getattr(args, "query", "") is None:
        # an optional positional after options (``sql PATH --format json "QUERY"``): argparse
        # binds it before the options and leaves the query over
        args.query, extra = extra[0], []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return 2
    if args.command in ALIASES:
        new = ALIASES[args.command]
        print(
            f"opscope {args.command}: deprecated, use 'opscope {new}' (same arguments)",
            file=sys.stderr,
        )
    from opscope.errors import OpscopeError, UsageError

    if args.command not in PROFILER_COMMANDS and "pyarrow" not in sys.modules:
        trace_reader_memory(heap_only=args.command in HEAP_ONLY_COMMANDS)
    try:
        with command_settings(args):
            if args.command in PROFILER_COMMANDS:
                from opscope.capture.stderr_filter import quiet_profiler_lines

                with quiet_profiler_lines():
                    return int(mods[args.command].run(args))
            return int(mods[args.command].run(args))
    except OpscopeError as exc:
        if getattr(args, "debug", False):
            raise
        print(f"opscope {args.command}: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    except KeyboardInterrupt:
        print(f"opscope {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``| head``): stop quietly, as a pipe's writer does
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def console() -> int:
    """The ``opscope`` command (its installed script and ``python -m opscope``): :func:`main`,
    then the objects still alive are moved out of the collector's reach (``gc.freeze``) for
    the interpreter's exit.  They are still freed by their counts as the modules go; the
    collections during the exit no longer walk them (35-45 ms of a 0.9 s report, 4-7 %).
    Only here, in a process that is about to end: a caller of :func:`main` keeps its
    collector as it was."""
    import gc

    try:
        return main()
    finally:
        gc.freeze()
