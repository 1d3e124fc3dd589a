"""Where a command's document goes: a file named by ``-o/--output``, else stdout."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1 (``--top``)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be at least 1")
    return value


def text_width() -> int:
    """The width text output may take: the terminal's, or 100 columns when piped."""
    from rich.console import Console

    console = Console()
    return console.width if console.is_terminal else 100


def add_format(p: Any, kind: str, *, output: bool = True) -> None:
    """``--format`` (its choices the renderer registry's formats of ``kind``) and, with
    ``output``, ``-o/--output FILE`` (its extension names the format when --format is not
    given)."""
    from opscope.render.registry import format_help, formats

    p.add_argument("--format", choices=formats(kind), default=None, help=format_help(kind))
    if output:
        p.add_argument(
            "-o",
            "--output",
            metavar="FILE",
            help="write to FILE instead of stdout (FILE.md, .json, .html... names the format)",
        )


def chosen_format(args: Any, kind: str) -> str:
    """The format a command writes: ``--format``, else ``-o FILE``'s extension's, else the
    default; set back on ``args.format`` (a one-line usage error for an extension no format
    has, or a format ``kind`` is not written in)."""
    from opscope.render.registry import choose

    fmt = choose(kind, args.format, getattr(args, "output", None)).format
    args.format = fmt
    return fmt


def add_max_inflate(p: Any) -> None:
    """The ``--max-inflate`` option of the commands that read traces."""
    p.add_argument(
        "--max-inflate",
        type=inflate_ratio,
        metavar="X",
        help="refuse a gzip that inflates past X times its size, past 256 MiB (a decompression "
        "bomb; default 200, 0: no bound; or $OPSCOPE_MAX_INFLATE)",
    )


def peaks_file(text: str) -> str:
    """An argparse type: a ``--peaks`` file that exists and reads as a peaks table (a usage
    error otherwise, before any trace is read)."""
    import argparse

    from opscope.analysis.peaks import load_table
    from opscope.errors import OpscopeError

    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    try:
        load_table(text)
    except OpscopeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def inflate_ratio(text: str) -> float:
    """An argparse type: a ratio of at least 0 (``--max-inflate``)."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a number of at least 0")
    return value


def write_output(text: str | bytes | Iterable[bytes], output: str | None) -> None:
    """Write ``text`` (a string, UTF-8 bytes written as they are, or such bytes in pieces) to
    ``output`` (and say so on stderr), or to stdout when it is None; a file that cannot be
    written is a one-line :class:`~opscope.errors.OpscopeError`, and a file left half
    written by it is removed."""
    from opscope.errors import OpscopeError

    if output:
        path = Path(output)
        if not path.parent.is_dir():
            raise OpscopeError(f"-o {output}: no folder {path.parent} (create it first)")
        existed = path.exists()
        try:
            if isinstance(text, str):
                path.write_text(text, encoding="utf-8")
            else:
                with path.open("wb") as fh:
                    for chunk in _pieces(text):
                        fh.write(chunk)
        except OSError as exc:
            _remove_partial(path, existed)
            raise OpscopeError(f"-o {output}: {exc.strerror or exc}") from None
        except BaseException:  # the document failed (or the user stopped it) half written
            _remove_partial(path, existed)
            raise
        print(f"wrote {output}", file=sys.stderr)
    elif isinstance(text, str):
        sys.stdout.write(text)
    else:
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is None:  # a text-only stream (redirected in-process)
            for chunk in _pieces(text):
                sys.stdout.write(chunk.decode())
        else:
            sys.stdout.flush()
            for chunk in _pieces(text):
                buffer.write(chunk)
            buffer.flush()


def _remove_partial(path: Path, existed: bool) -> None:
    """Remove a file this command created and could not finish."""
    if not existed and path.is_file():
        path.unlink()


def _pieces(data: bytes | Iterable[bytes]) -> Iterable[bytes]:
    return [data] if isinstance(data, bytes) else data
