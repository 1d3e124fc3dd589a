"""The service layer: what every front-end asks of the core, in one place.

The explorer's HTTP API, the CLI and the MCP server for agents all go through a
:class:`Workspace`: open traces (each under a short handle; the last opened is the default),
their reports, single events, dependency chains, timeline windows, occurrences of an op, the
critical path placed on the timeline, SQL and the diff of two traces.  Answers are JSON-ready
data; nothing here renders or prints.  Front-ends add only their own conversions (the
explorer's relative times, MCP's result caps).
"""

from opscope.service.workspace import OpenTrace, ServiceError, Workspace

__all__ = ["OpenTrace", "ServiceError", "Workspace"]
