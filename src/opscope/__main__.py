"""``python -m opscope`` is the same as the ``opscope`` command."""

from opscope.cli.main import main

raise SystemExit(main())
