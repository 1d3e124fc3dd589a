"""What the CLI does to a path before it loads it: a raw Neuron capture is converted by
``neuron-explorer view`` when that is installed (:mod:`opscope.capture.neuron_explorer`;
loading itself never runs a program)."""

from __future__ import annotations

import sys
from pathlib import Path


def prepare(*paths: str | Path | None, command: str) -> None:
    """Convert the raw Neuron captures among ``paths`` (None: no path), saying so on stderr
    as ``opscope <command>: ...``; nothing happens for any other path."""
    from opscope.trace.neuron.capture import conversions

    def say(text: str) -> None:
        print(f"opscope {command}: {text}", file=sys.stderr, flush=True)

    for path in paths:
        # the capture's module (and its subprocess) only for a raw capture to convert
        if path is not None and conversions(Path(path)):
            from opscope.capture.neuron_explorer import convert

            convert(path, say=say)
