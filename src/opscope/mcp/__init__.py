"""``opscope mcp``: opscope's analysis as tools for LLM agents (Model Context Protocol, stdio).

The server is a front-end over :class:`opscope.service.Workspace`: it keeps the open traces
(the last one opened answers every call that names none), checks each call's arguments
against the tool's strict schema, asks the workspace, and answers with a short Markdown text
and structured content that matches the tool's published output schema, both under a hard
size cap.  It holds no analysis logic.

Modules: :mod:`~opscope.mcp.schemas` (the JSON Schema pieces of the tools' inputs and
outputs), :mod:`~opscope.mcp.untrusted` (how trace strings are shown: quoted, inert),
:mod:`~opscope.mcp.budget` (the size cap), :mod:`~opscope.mcp.registry` (tool specs, argument
checks, dispatch), the tools by theme (``tools_trace``, ``tools_tables``, ``tools_findings``,
``tools_timeline``, ``tools_query``, ``tools_paths``) and :mod:`~opscope.mcp.server` (the MCP
SDK's low-level server over stdio).
"""
