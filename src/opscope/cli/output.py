"""Where a command's document goes: a file named by ``-o/--output``, else stdout."""

from __future__ import annotations

import sys
from pathlib import Path


def write_output(text: str, output: str | None) -> None:
    """Write ``text`` to ``output`` (and say so on stderr), or to stdout when it is None."""
    if output:
        Path(output).write_text(text, encoding="utf-8")
        print(f"wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
