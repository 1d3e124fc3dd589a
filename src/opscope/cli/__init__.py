"""Command-line front-end: one small module per subcommand (see :mod:`opscope.cli.main`)."""
