"""``python -m opscope`` is the same as the ``opscope`` command."""

from opscope.cli.main import console

raise SystemExit(console())
