"""Where a command's document goes: a file named by ``-o/--output``, else stdout."""

from __future__ import annotations

import sys
from pathlib import Path


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


def write_output(text: str, output: str | None) -> None:
    """Write ``text`` to ``output`` (and say so on stderr), or to stdout when it is None; a
    file that cannot be written is a one-line :class:`~opscope.errors.OpscopeError`."""
    from opscope.errors import OpscopeError

    if output:
        path = Path(output)
        if not path.parent.is_dir():
            raise OpscopeError(f"-o {output}: no folder {path.parent} (create it first)")
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise OpscopeError(f"-o {output}: {exc.strerror or exc}") from None
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
