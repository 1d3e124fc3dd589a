"""What the CLI does to a path before it loads it: a raw Neuron capture is converted by
``neuron-explorer view`` when that is installed (:mod:`opscope.capture.neuron_explorer`;
loading itself never runs a program)."""

from __future__ import annotations

import sys
from pathlib import Path


def prepare(*paths: str | Path | None, command: str) -> None:
    """Convert the raw Neuron captures among ``paths`` (None: no path), saying so on stderr
    as ``opscope <command>: ...``; nothing happens for any other path (a file is never a
    raw capture: the capture's checks are not even imported for one)."""

    def say(text: str) -> None:
        print(f"opscope {command}: {text}", file=sys.stderr, flush=True)

    for path in paths:
        if path is None or not Path(path).is_dir():
            continue
        from opscope.trace.neuron.capture import conversions

        # the capture's module (and its subprocess) only for a raw capture to convert
        if conversions(Path(path)):
            from opscope.capture.neuron_explorer import convert

            convert(path, say=say)
